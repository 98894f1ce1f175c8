package controller

import (
	"time"

	"github.com/kdag-dev/kdag/pkg/controller/internal/reconciler"
)

// BeforeDelete makes the node, a batch/v1 Job, a hook that the owner's teardown runs before it
// deletes anything: a backup before the data goes. The Job is not created by a reconcile while
// the owner lives (the node counts as Ready, without content: nothing may depend on it, a build
// error). Once the owner is deleted, kdag creates the Job (the owner holds kdag's finalizer for
// it), waits until it has the condition Complete=True and only then tears the owner down,
// deleting the Job with the rest (or orphaning it with Keep, to keep its record). Several hooks
// of one owner run one after the other, in the order they were added.
//
// timeout bounds the wait, counted from the Job's creationTimestamp (so that a restarted
// operator, or another shard's replica, counts from the same start). A Job that fails
// (Failed=True), or has not completed within timeout, Stalls the teardown: nothing is deleted,
// the owner gets Stalled=True and BeforeDelete=False with reason BeforeDeleteFailed naming the
// Job, and a Warning event. kdag does not stop a Job that is late (give it activeDeadlineSeconds
// for that): should it complete after all, the teardown goes on. To run a failed hook again,
// delete its Job; to delete the owner without the hooks, annotate the owner
// kdag.dev/before-delete=skip (kdagv1alpha1.AnnotationBeforeDelete).
//
// Once every hook completed (or was skipped) the owner's condition BeforeDelete is True and the
// hooks never run again for it. A Job must not remove itself before that
// (ttlSecondsAfterFinished), or a later hook's wait would run it again.
//
// A BeforeDelete node takes Keep, CreateOnly, DependsOn, After, ReadyWhen and
// NoInferredDependencies; Finished, Recreate, Adopt and ProtectsData are build errors (the Job
// is created once, by the teardown, and never updated), as are a timeout that is not positive and
// a kind other than Job. Two deletions run no hook: of an owner whose namespace is being deleted
// (the API server creates nothing there), and a foreground deletion (the garbage collector
// deletes the owner's objects at once, finalizers or not; the owner gets BeforeDelete=True with
// reason BeforeDeleteSkipped and a Warning event saying so).
func BeforeDelete(timeout time.Duration) NodeOption {
	return nodeOption(reconciler.BeforeDelete(timeout))
}
