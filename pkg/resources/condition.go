package resources

import (
	"fmt"

	"github.com/pkg/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
)

// ReadyFunc decides whether a node's live object is ready, replacing the kstatus rule for that
// node (controller.ReadyWhen, controller.Options.ReadyWhen). live has the type that was added. An
// error fails the node.
type ReadyFunc func(live client.Object) (bool, error)

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

// StalledError is CustomResourceReady's error for a child custom resource that is Stalled for its
// current generation: "stalled (<reason>): <message>". It is terminal, like a
// reconcile.TerminalError, without that error's "terminal error: " prefix in the owner's
// conditions; the owner's Stalled condition repeats the child's reason when it is a valid
// condition reason.
type StalledError struct {
	// Reason and Message are the child's Stalled condition's.
	Reason, Message string
}

func (e *StalledError) Error() string { return "stalled (" + e.Reason + "): " + e.Message }

// Is reports whether target is a reconcile.TerminalError, so that errors.Is(err,
// reconcile.TerminalError(nil)) holds for e.
func (e *StalledError) Is(target error) bool {
	return errors.Is(reconcile.TerminalError(nil), target)
}

// CustomResourceReady is a ReadyFunc for custom resources whose controller follows the kstatus
// conventions, kdag owners among them: ready when status.observedGeneration equals
// metadata.generation and the Ready condition is True. Use it with controller.ReadyWhen for child custom
// resources: kstatus alone calls a resource whose controller has not written any status yet
// Current, which would open the gate too early.
//
// It tells the owner why a child is not ready, so that the top-level owner a user looks at does
// not only say "waiting for <child>": a child Ready=False with a message keeps the node waiting
// with that message (*NotReadyError); a child Stalled=True for its current generation fails the
// node with a terminal error (*StalledError) carrying the child's reason and message, since only a change of the
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
		return false, &StalledError{Reason: fmt.Sprint(stalled["reason"]), Message: fmt.Sprint(stalled["message"])}
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
