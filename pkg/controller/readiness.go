package controller

import (
	"fmt"

	"github.com/pkg/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
)

// NotReadyError is the error a ReadyFunc returns to keep its node waiting and say why: the reason
// follows the node's name in the owner's Ready and Reconciling conditions ("waiting for
// GiteaServer ns/demo (waiting for Secret ns/db)"). Keep it stable from one call to the next (no
// times or counters), or the owner's status changes on every reconcile. Any other error fails
// the node.
type NotReadyError struct {
	// Reason says what the object waits for.
	Reason string
}

func (e *NotReadyError) Error() string { return e.Reason }

// childStalledError is CustomResourceReady's error for a Stalled child. It is terminal, like a
// reconcile.TerminalError, without that error's "terminal error: " prefix in the owner's
// conditions.
type childStalledError struct{ reason, message string }

func (e *childStalledError) Error() string { return "stalled (" + e.reason + "): " + e.message }

// conditionReason is the child's reason, which the owner's Stalled condition repeats.
func (e *childStalledError) conditionReason() string {
	return validReason(e.reason, kdagv1alpha1.ReasonObjectInvalid)
}

// Is reports whether target is a reconcile.TerminalError, so that errors.Is(err,
// reconcile.TerminalError(nil)) holds for e.
func (e *childStalledError) Is(target error) bool {
	return errors.Is(reconcile.TerminalError(nil), target)
}

// CustomResourceReady is a ReadyFunc for custom resources whose controller follows the kstatus
// conventions, kdag owners among them: ready when status.observedGeneration equals
// metadata.generation and the Ready condition is True. Use it with ReadyWhen for child custom
// resources: kstatus alone calls a resource whose controller has not written any status yet
// Current, which would open the gate too early.
//
// It tells the owner why a child is not ready, so that the top-level owner a user looks at does
// not only say "waiting for <child>": a child Ready=False with a message keeps the node waiting
// with that message (*NotReadyError); a child Stalled=True for its current generation fails the
// node with a terminal error carrying the child's reason and message, since only a change of the
// child's spec, which the owner writes, can help.
func CustomResourceReady(live client.Object) (bool, error) {
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(live)
	if err != nil {
		return false, errors.Wrap(err, "convert")
	}
	observed, _, _ := unstructured.NestedInt64(u, "status", "observedGeneration")
	if observed != live.GetGeneration() {
		return false, nil
	}
	conditions, _, _ := unstructured.NestedSlice(u, "status", "conditions")
	var ready, stalled map[string]any
	for _, c := range conditions {
		m, ok := c.(map[string]any)
		switch {
		case !ok:
		case m["type"] == kdagv1alpha1.ConditionReady:
			ready = m
		case m["type"] == kdagv1alpha1.ConditionStalled:
			stalled = m
		}
	}
	if stalled != nil && stalled["status"] == "True" {
		return false, &childStalledError{reason: fmt.Sprint(stalled["reason"]), message: fmt.Sprint(stalled["message"])}
	}
	if ready == nil {
		return false, nil
	}
	if ready["status"] == "True" {
		return true, nil
	}
	if msg, _ := ready["message"].(string); msg != "" {
		return false, &NotReadyError{Reason: msg}
	}
	return false, nil
}
