package reconciler

import (
	"context"
	"fmt"
	"time"

	"github.com/pkg/errors"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/resources"
)

// BeforeDelete is controller.BeforeDelete: a Job the owner's teardown runs first.
func BeforeDelete(timeout time.Duration) Option {
	return func(s *nodeSpec) { s.beforeDelete = &timeout }
}

// checkBeforeDelete returns an error when s is a BeforeDelete node that cannot be one.
func checkBeforeDelete(verb string, s *nodeSpec) error {
	if s.beforeDelete == nil {
		return nil
	}
	switch {
	case s.gvk.Group != "batch" || s.gvk.Kind != "Job":
		return errors.Errorf("%s %s: BeforeDelete applies to a batch/v1 Job only", verb, s.id)
	case *s.beforeDelete <= 0:
		return errors.Errorf("%s %s: BeforeDelete(%s): the timeout must be positive", verb, s.id, *s.beforeDelete)
	case s.finished, s.recreate != nil, s.adopt, s.protects != nil:
		return errors.Errorf("%s %s: BeforeDelete does not take Finished, Recreate, Adopt or ProtectsData "+
			"(the teardown creates the Job once and never updates it)", verb, s.id)
	}
	return nil
}

// checkHookBlocker returns an error when s, not a hook itself, names a BeforeDelete node as its
// blocker: that node's object exists only during the owner's teardown.
func checkHookBlocker(verb string, s, blocker *nodeSpec) error {
	if blocker.beforeDelete == nil || s.beforeDelete != nil {
		return nil
	}
	return errors.Errorf("%s %s: blocker %s is a BeforeDelete hook: it runs only when the owner is deleted, so nothing can wait for it",
		verb, s.id, blocker.id)
}

// hooksOf returns the BeforeDelete nodes of specs, in graph order.
func hooksOf(specs []*nodeSpec) []*nodeSpec {
	var hooks []*nodeSpec
	for _, s := range specs {
		if s.beforeDelete != nil {
			hooks = append(hooks, s)
		}
	}
	return hooks
}

// hookOutcome is where one hook's Job stands.
type hookOutcome int

const (
	hookCompleted hookOutcome = iota // Complete=True: the next hook, or the teardown, may go on
	hookRunning                      // created or running, within its timeout
	hookFailed                       // Failed=True, timed out, or not the owner's Job
	hookAllDone                      // the owner's BeforeDelete condition is True after all
)

// hookState is one hook's Job as runBeforeDelete judges it.
type hookState struct {
	outcome hookOutcome
	msg     string        // says what happens, naming the Job
	wait    time.Duration // with hookRunning: when to look again if no event comes
	created bool          // this pass created the Job
	job     client.Object // the Job, when one was read or created
}

// runBeforeDelete runs owner's BeforeDelete hooks, the first step of its teardown. done is true
// once nothing is left to run (no hooks, every hook completed, or skipped), and the teardown may
// delete objects; otherwise res and err are the reconcile's result: a requeue while a Job runs,
// a reconcile.TerminalError when a hook failed or timed out (the Job's watch events or a change
// of the owner resume it), any other error when the status write or the Job's creation failed.
//
// When the graph cannot be built for good (a *GraphError, a terminal error of AddResources), no
// hook can be rendered: the teardown goes on without them and a Warning event says so; a
// transient error is returned, to be retried.
func (c *Reconciler) runBeforeDelete(ctx context.Context, owner client.Object) (res reconcile.Result, done bool, err error) {
	b, err := buildGraph(ctx, c.rm, owner, c.scheme, c.mapper, c.ownedKind)
	var build *GraphError
	switch {
	case errors.As(err, &build) || isTerminal(err):
		c.event(ctx, owner, corev1.EventTypeWarning, kdagv1alpha1.ReasonBeforeDeleteFailed,
			"BeforeDelete hooks, if any, not run: the graph cannot be built: %s", err.Error())
		return reconcile.Result{}, true, nil
	case err != nil:
		return reconcile.Result{}, false, errors.Wrapf(err, "%s %s: build the graph to run its BeforeDelete hooks",
			c.ownerGVK.Kind, client.ObjectKeyFromObject(owner))
	}
	hooks := hooksOf(b.nodes)
	if len(hooks) == 0 || hooksDone(owner) {
		return reconcile.Result{}, true, nil
	}

	if controllerutil.ContainsFinalizer(owner, metav1.FinalizerDeleteDependents) {
		// Foreground deletion: the garbage collector deletes every dependent with an owner
		// reference itself, now, whatever the owner's other finalizers; a hook's Job too, as soon
		// as it is created. Nothing is left for a hook to protect, and saying so beats a Job
		// that is deleted and created again.
		msg := fmt.Sprintf("BeforeDelete hooks (%s) not run: the owner is deleted in the foreground, so the garbage collector "+
			"deletes its objects at once; delete it with propagation Background (kubectl's default) to run them", hookNames(hooks))
		if err := c.setHookConditions(ctx, owner, nil, metav1.ConditionTrue, kdagv1alpha1.ReasonBeforeDeleteSkipped, msg, corev1.EventTypeWarning); err != nil {
			return reconcile.Result{}, false, err
		}
		return reconcile.Result{}, true, nil
	}
	if v, set := owner.GetAnnotations()[kdagv1alpha1.AnnotationBeforeDelete]; set {
		if v != kdagv1alpha1.BeforeDeleteSkip {
			msg := fmt.Sprintf("annotation %s=%q: unknown value, the BeforeDelete hooks neither run nor are skipped: "+
				"set it to %q to delete without them, or remove it to run them", kdagv1alpha1.AnnotationBeforeDelete, v, kdagv1alpha1.BeforeDeleteSkip)
			return c.hookFailed(ctx, owner, nil, msg)
		}
		msg := fmt.Sprintf("BeforeDelete hooks skipped: the owner is annotated %s=%s", kdagv1alpha1.AnnotationBeforeDelete, kdagv1alpha1.BeforeDeleteSkip)
		if err := c.setHookConditions(ctx, owner, nil, metav1.ConditionTrue, kdagv1alpha1.ReasonBeforeDeleteSkipped, msg, corev1.EventTypeNormal); err != nil {
			return reconcile.Result{}, false, err
		}
		logFrom(ctx).Info("BeforeDelete hooks skipped", "annotation", kdagv1alpha1.AnnotationBeforeDelete)
		return reconcile.Result{}, true, nil
	}

	var last client.Object
	for _, s := range hooks {
		st, err := c.hookJob(ctx, owner, s)
		if err != nil {
			return reconcile.Result{}, false, err
		}
		switch st.outcome {
		case hookAllDone:
			return reconcile.Result{}, true, nil
		case hookCompleted:
			last = st.job
			continue
		case hookFailed:
			return c.hookFailed(ctx, owner, st.job, st.msg)
		}
		// Running: the Job's watch events resume the teardown; the requeue bounds the wait
		// for its timeout, which no event marks.
		if st.created {
			logFrom(ctx).Info("BeforeDelete hook created", "node", s.id.String(), "timeout", s.beforeDelete.String())
		}
		if err := c.setHookConditions(ctx, owner, st.job, metav1.ConditionFalse, kdagv1alpha1.ReasonBeforeDeleteRunning, st.msg, corev1.EventTypeNormal); err != nil {
			return reconcile.Result{}, false, err
		}
		return reconcile.Result{RequeueAfter: st.wait}, false, nil
	}
	msg := fmt.Sprintf("BeforeDelete hooks completed (%s): deleting the owner's objects", hookNames(hooks))
	if err := c.setHookConditions(ctx, owner, last, metav1.ConditionTrue, kdagv1alpha1.ReasonBeforeDeleteCompleted, msg, corev1.EventTypeNormal); err != nil {
		return reconcile.Result{}, false, err
	}
	logFrom(ctx).Info("BeforeDelete hooks completed", "hooks", hookNames(hooks))
	return reconcile.Result{}, true, nil
}

// hookFailed records a failed hook (Stalled, a Warning event) and returns the terminal error
// that ends the reconcile.
func (c *Reconciler) hookFailed(ctx context.Context, owner client.Object, job client.Object, msg string) (reconcile.Result, bool, error) {
	if err := c.setHookConditions(ctx, owner, job, metav1.ConditionFalse, kdagv1alpha1.ReasonBeforeDeleteFailed, msg, corev1.EventTypeWarning); err != nil {
		return reconcile.Result{}, false, err
	}
	return reconcile.Result{}, false, reconcile.TerminalError(errors.Errorf("%s %s: %s", c.ownerGVK.Kind, client.ObjectKeyFromObject(owner), msg))
}

// hookNames lists the hooks' IDs.
func hookNames(hooks []*nodeSpec) string {
	out := ""
	for i, s := range hooks {
		if i > 0 {
			out += ", "
		}
		out += s.id.String()
	}
	return out
}

// hooksDone reports whether owner's condition BeforeDelete is True: its hooks completed or
// were skipped.
func hooksDone(owner client.Object) bool {
	st := readStatus(owner)
	return st != nil && meta.IsStatusConditionTrue(st.Conditions, kdagv1alpha1.ConditionBeforeDelete)
}

// hookJob creates the hook's Job when it does not exist yet and judges it. The Job is read from
// the cache; when the cache does not hold it, the owner is read from the API server first (the
// cache may not have seen the condition that says the hooks completed, while the completed Job
// is already deleted), then the Job is created only if absent. A Job that exists though the
// cache did not hold it (a shard's cache that has not seen it relabelled) is read from the API
// server and judged as read.
func (c *Reconciler) hookJob(ctx context.Context, owner client.Object, s *nodeSpec) (hookState, error) {
	live, err := c.newObject(s)
	if err != nil {
		return hookState{}, err
	}
	key := client.ObjectKey{Namespace: s.id.Namespace, Name: s.id.Name}
	switch err := c.client.Get(ctx, key, live); {
	case err == nil:
		return c.judgeHook(owner, s, live, false)
	case !apierrors.IsNotFound(err):
		return hookState{}, errors.Wrapf(err, "%s: read from cache", s.id)
	}

	fresh := c.rm.NewOwner()
	switch err := c.reader.Get(ctx, client.ObjectKeyFromObject(owner), fresh); {
	case apierrors.IsNotFound(err):
		return hookState{outcome: hookAllDone}, nil // gone: nothing left to protect
	case err != nil:
		return hookState{}, errors.Wrapf(err, "%s %s: read before creating BeforeDelete hook %s",
			c.ownerGVK.Kind, client.ObjectKeyFromObject(owner), s.id)
	}
	if hooksDone(fresh) {
		return hookState{outcome: hookAllDone}, nil
	}
	desired, err := c.desiredObject(owner, s, "", false)
	if err != nil {
		return hookState{}, err
	}
	switch err := c.engine.CreateIfAbsent(ctx, desired); {
	case err == nil:
		return c.judgeHook(owner, s, desired, true)
	case apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err):
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(s.gvk)
		if err := c.reader.Get(ctx, key, u); err != nil {
			return hookState{}, errors.Wrapf(err, "%s: read the BeforeDelete hook's Job, which exists though the cache does not hold it", s.id)
		}
		st, err := c.judgeHook(owner, s, u, false)
		if st.outcome == hookRunning {
			// No event of a Job the cache does not hold resumes the teardown: look again soon.
			st.wait = min(st.wait, TeardownRecheck)
		}
		return st, err
	default:
		return hookState{}, errors.Wrapf(err, "%s: create BeforeDelete hook", s.id)
	}
}

// judgeHook says where the hook's Job job stands: completed, failed (Failed=True, past its
// timeout, not the owner's), or running with the time left until its timeout.
func (c *Reconciler) judgeHook(owner client.Object, s *nodeSpec, job client.Object, created bool) (hookState, error) {
	timeout := *s.beforeDelete
	if !c.engine.Owns(c.applyOwner(owner), job) {
		return hookState{outcome: hookFailed, job: job, msg: fmt.Sprintf(
			"BeforeDelete hook %s: a Job of that name exists and is not this owner's: delete or rename it, "+
				"or annotate the owner %s=%s to delete without the hook", s.id, kdagv1alpha1.AnnotationBeforeDelete, kdagv1alpha1.BeforeDeleteSkip)}, nil
	}
	if job.GetDeletionTimestamp() != nil {
		// Deleted by someone (to run it again): its deletion event brings the owner back.
		return hookState{outcome: hookRunning, job: job, wait: TeardownRecheck,
			msg: fmt.Sprintf("BeforeDelete hook %s is being deleted; it runs again once it is gone", s.id)}, nil
	}
	u, err := unstructuredOf(job, s)
	if err != nil {
		return hookState{}, err
	}
	r, err := resources.Ready(u)
	if err != nil {
		return hookState{}, err
	}
	advice := fmt.Sprintf("nothing of the owner is deleted: inspect the Job (kubectl -n %s describe job %s), "+
		"delete it to run the hook again, or annotate the owner %s=%s to delete without it",
		s.id.Namespace, s.id.Name, kdagv1alpha1.AnnotationBeforeDelete, kdagv1alpha1.BeforeDeleteSkip)
	elapsed := time.Since(job.GetCreationTimestamp().Time)
	switch {
	case resources.JobComplete(u):
		return hookState{outcome: hookCompleted, job: job}, nil
	case r.Status == resources.StatusFailed:
		return hookState{outcome: hookFailed, job: job, msg: fmt.Sprintf("BeforeDelete hook %s failed: %s; %s", s.id, r.Message, advice)}, nil
	case !created && elapsed >= timeout:
		return hookState{outcome: hookFailed, job: job, msg: fmt.Sprintf("BeforeDelete hook %s did not complete within its timeout %s; %s",
			s.id, timeout, advice)}, nil
	}
	wait := timeout - elapsed
	if created || wait > timeout {
		wait = timeout // a clock behind the API server's
	}
	return hookState{outcome: hookRunning, job: job, created: created, wait: wait + time.Second,
		msg: fmt.Sprintf("running BeforeDelete hook %s (timeout %s): the owner's objects are deleted once it completes", s.id, timeout)}, nil
}

// setHookConditions sets, on the owner being deleted, the condition BeforeDelete (status,
// reason, msg), Ready=False, and Stalled=True (reason BeforeDeleteFailed) or Reconciling=True
// (any other reason), writing the status only when a condition changes; then, on a change, it
// emits an event of type typ with the same reason and message, related to job when not nil. The
// status is applied whole, as it is live, so that no field of it is lost.
func (c *Reconciler) setHookConditions(ctx context.Context, owner, job client.Object, status metav1.ConditionStatus,
	reason, msg, typ string) error {
	raw, st, err := currentStatus(owner)
	if err != nil {
		return errors.Wrapf(err, "%s %s: read status", c.ownerGVK.Kind, client.ObjectKeyFromObject(owner))
	}
	conds := append([]metav1.Condition(nil), st.Conditions...)
	gen := owner.GetGeneration()
	set := func(typ string, status metav1.ConditionStatus, reason string) {
		meta.SetStatusCondition(&conds, metav1.Condition{Type: typ, Status: status, Reason: reason, Message: truncate(msg, 1024), ObservedGeneration: gen})
	}
	set(kdagv1alpha1.ConditionBeforeDelete, status, reason)
	set(kdagv1alpha1.ConditionReady, metav1.ConditionFalse, reason)
	if reason == kdagv1alpha1.ReasonBeforeDeleteFailed {
		set(kdagv1alpha1.ConditionStalled, metav1.ConditionTrue, reason)
		meta.RemoveStatusCondition(&conds, kdagv1alpha1.ConditionReconciling)
	} else {
		set(kdagv1alpha1.ConditionReconciling, metav1.ConditionTrue, reason)
		meta.RemoveStatusCondition(&conds, kdagv1alpha1.ConditionStalled)
	}
	if conditionsEqual(st.Conditions, conds) {
		return nil
	}
	if raw == nil {
		raw = map[string]any{}
	}
	list := make([]any, len(conds))
	for i := range conds {
		if list[i], err = runtime.DefaultUnstructuredConverter.ToUnstructured(&conds[i]); err != nil {
			return errors.Wrap(err, "convert conditions")
		}
	}
	raw["conditions"] = list
	// This status is not writeStatus's: what that last wrote is no longer what the API server
	// holds, and the cache is trusted again.
	c.written.Delete(owner.GetUID())
	if _, err := c.applyStatus(ctx, owner, raw); err != nil {
		return err
	}
	if job != nil {
		c.eventRelated(ctx, owner, job, typ, reason, "%s", msg)
	} else {
		c.event(ctx, owner, typ, reason, "%s", msg)
	}
	return nil
}

// conditionsEqual reports whether a and b hold the same conditions, in any order, transition
// times included.
func conditionsEqual(a, b []metav1.Condition) bool {
	if len(a) != len(b) {
		return false
	}
	for _, x := range a {
		y := meta.FindStatusCondition(b, x.Type)
		if y == nil || y.Status != x.Status || y.Reason != x.Reason || y.Message != x.Message ||
			y.ObservedGeneration != x.ObservedGeneration || !y.LastTransitionTime.Equal(&x.LastTransitionTime) {
			return false
		}
	}
	return true
}
