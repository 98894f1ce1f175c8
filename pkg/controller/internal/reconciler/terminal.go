package reconciler

import (
	"fmt"
	"regexp"

	"github.com/pkg/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/apply"
	"github.com/kdag-dev/kdag/pkg/graph"
	"github.com/kdag-dev/kdag/pkg/resources"
)

// isTerminal reports whether err cannot be fixed by retrying, only by a change of the owner's
// spec (design.md §2.9): a reconcile.TerminalError (an author's or a failed object's), or the
// API server's own validation of an object kdag rendered (apply.IsInvalid). Everything else
// is transient: an admission webhook's or policy's denial, RBAC, a conflict, a 400 the server
// gives for other reasons are fixed elsewhere, so they are retried with backoff and shown.
func isTerminal(err error) bool {
	return errors.Is(err, reconcile.TerminalError(nil)) || apply.IsInvalid(err)
}

// reasoned is implemented by node errors that carry the condition reason the owner should show
// (a failed Job's BackoffLimitExceeded; a stalled child's, resources.StalledError, is read apart).
type reasoned interface{ conditionReason() string }

// conditionReasonPattern is the format of metav1.Condition.Reason (its validation pattern).
var conditionReasonPattern = regexp.MustCompile(`^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$`)

// validReason returns reason if it is a valid condition reason, else fallback.
func validReason(reason, fallback string) string {
	if len(reason) <= 1024 && conditionReasonPattern.MatchString(reason) {
		return reason
	}
	return fallback
}

// objectFailedError is a node's error when its object failed for good as kstatus judges it
// (sigs.k8s.io/cli-utils/pkg/kstatus: a Job past its backoff limit or deadline, a Deployment
// past its progress deadline, a resource with Stalled=True). It is terminal: the owner is
// Stalled with the object's own reason and message, and is not retried until the owner
// changes or the object's watch reports a change (a new desired object, such as a new migration
// Job for a new version, or the failed object deleted so that kdag creates it again).
type objectFailedError struct {
	// Node is the failed node.
	Node graph.NodeID
	// Reason is the object's reason for the failure (the reason of its Failed or Stalled
	// condition), a valid condition reason; kdagv1alpha1.ReasonObjectFailed when it gives none.
	Reason string
	// Message is the object's message for the failure.
	Message string
}

func (e *objectFailedError) Error() string {
	return fmt.Sprintf("%s failed (%s): %s", e.Node, e.Reason, e.Message)
}

// Is makes errors.Is(err, reconcile.TerminalError(nil)) hold: only a change helps.
func (e *objectFailedError) Is(target error) bool {
	return errors.Is(reconcile.TerminalError(nil), target)
}

func (e *objectFailedError) conditionReason() string { return e.Reason }

// newObjectFailed describes the failure of live, which kstatus called Failed with
// kstatusMessage: the reason and message of live's own failure condition (resources.Failure),
// else kstatus' message.
func newObjectFailed(id graph.NodeID, live *unstructured.Unstructured, kstatusMessage string) *objectFailedError {
	e := &objectFailedError{Node: id, Reason: kdagv1alpha1.ReasonObjectFailed, Message: kstatusMessage}
	if reason, msg, ok := resources.Failure(live); ok {
		e.Reason = validReason(reason, kdagv1alpha1.ReasonObjectFailed)
		if msg != "" {
			e.Message = msg
		}
	}
	return e
}
