package controller_test

import (
	"context"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/controller"
	"github.com/kdag-dev/kdag/pkg/plan"
	"github.com/kdag-dev/kdag/pkg/testing/poll"
	"github.com/kdag-dev/kdag/pkg/testing/testapi"
	"github.com/kdag-dev/kdag/pkg/testing/workload"
)

// hookRM: a ConfigMap "<name>-config", and a BeforeDelete Job "<name>-backup" (timeout from the
// Widget's spec.data["timeout"], default 10 minutes; Keep when spec.data["keep"] is "yes") that
// mounts it, so that the Graph infers the edge hook → ConfigMap.
var hookRM = funcRM{add: func(w *testapi.Widget, b *controller.Graph) error {
	b.Add(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: w.Name + "-config"}, Data: map[string]string{"k": "v"}})
	timeout := 10 * time.Minute
	if v := w.Spec.Data["timeout"]; v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			return err
		}
		timeout = d
	}
	opts := []controller.NodeOption{controller.BeforeDelete(timeout)}
	if w.Spec.Data["keep"] == "yes" {
		opts = append(opts, controller.Keep())
	}
	b.Add(backupJob(w.Name), opts...)
	return nil
}}.owning(&batchv1.Job{})

func backupJob(owner string) *batchv1.Job {
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: owner + "-backup"},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers:    []corev1.Container{{Name: "backup", Image: "busybox"}},
			Volumes: []corev1.Volume{{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: owner + "-config"}}}}},
		}}},
	}
}

// hookFixture starts a fixture of hookRM, creates the Widget "app" with data, settles it, checks
// that the hook's Job was not created while the owner lives, and deletes the Widget.
func hookFixture(t *testing.T, data map[string]string, annotations map[string]string, opts ...controller.Options) *fixture {
	t.Helper()
	f := newFixture(t, hookRM, opts...)
	w := &testapi.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "app", Annotations: annotations},
		Spec: testapi.WidgetSpec{MaxReplicas: 1, Data: data}}
	if err := f.cl.Create(context.Background(), w); err != nil {
		t.Fatal(err)
	}
	f.waitCachedVersion(&testapi.Widget{}, "app", w.ResourceVersion)
	f.settle("app")
	if !f.notFound(&batchv1.Job{}, "app-backup") {
		t.Fatal("the BeforeDelete Job was created by a reconcile of a live owner")
	}
	if !isTrue(f.status("app"), kdagv1alpha1.ConditionReady) {
		t.Fatalf("conditions %+v, want Ready=True (a hook counts as ready while the owner lives)", f.status("app").Conditions)
	}
	if !controllerutil.ContainsFinalizer(f.get(&testapi.Widget{}, "app"), kdagv1alpha1.Finalizer) {
		t.Fatalf("finalizers %v, want %s: the hook runs in the teardown", f.get(&testapi.Widget{}, "app").GetFinalizers(), kdagv1alpha1.Finalizer)
	}
	if err := f.cl.Delete(context.Background(), f.get(&testapi.Widget{}, "app")); err != nil {
		t.Fatal(err)
	}
	cached := &testapi.Widget{}
	f.waitCached(cached, "app", "cache sees the deletion", func() bool { return !cached.GetDeletionTimestamp().IsZero() })
	return f
}

// reconcileHook reconciles "app" once and checks that nothing was deleted and the owner is still
// there with kdag's finalizer; it returns the reconcile's error.
func (f *fixture) reconcileHook() error {
	f.t.Helper()
	f.calls.Reset()
	err := f.reconcile("app")
	for _, w := range f.objectWrites() {
		if strings.HasPrefix(w, "DELETE") {
			f.t.Errorf("%s while the BeforeDelete hook has not completed", w)
		}
	}
	if !controllerutil.ContainsFinalizer(f.get(&testapi.Widget{}, "app"), kdagv1alpha1.Finalizer) {
		f.t.Error("kdag's finalizer was removed while the BeforeDelete hook has not completed")
	}
	if f.notFound(&corev1.ConfigMap{}, "app-config") {
		f.t.Error("the ConfigMap was deleted while the BeforeDelete hook has not completed")
	}
	return err
}

// waitHookJob waits until the cache holds the hook's Job.
func (f *fixture) waitHookJob() *batchv1.Job {
	f.t.Helper()
	job := &batchv1.Job{}
	f.waitCached(job, "app-backup", "cache holds the hook's Job", func() bool { return true })
	return job
}

// failJob sets the named Job's status as the Job controller does when its pods failed too often.
func failJob(f *fixture, name string) {
	f.t.Helper()
	job := f.get(&batchv1.Job{}, name).(*batchv1.Job)
	now := metav1.Now()
	job.Status = batchv1.JobStatus{StartTime: &now, Failed: 1, Conditions: []batchv1.JobCondition{
		{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue, Reason: batchv1.JobReasonBackoffLimitExceeded,
			Message: "Job has reached the specified backoff limit", LastTransitionTime: now, LastProbeTime: now},
		{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: batchv1.JobReasonBackoffLimitExceeded,
			Message: "Job has reached the specified backoff limit", LastTransitionTime: now, LastProbeTime: now},
	}}
	if err := f.cl.Status().Update(context.Background(), job); err != nil {
		f.t.Fatalf("fail Job %s: %v", name, err)
	}
	f.waitCachedVersion(&batchv1.Job{}, name, job.ResourceVersion)
}

// finishTeardown reconciles "app" until the API server no longer has it.
func (f *fixture) finishTeardown() {
	f.t.Helper()
	poll.True(f.t, "the Widget is gone", waitTimeout, func(context.Context) bool {
		_ = f.reconcile("app")
		return f.notFound(&testapi.Widget{}, "app")
	})
}

// hookCondition returns the owner's BeforeDelete condition, failing the test without one.
func (f *fixture) hookCondition() metav1.Condition {
	f.t.Helper()
	c := condition(f.status("app"), kdagv1alpha1.ConditionBeforeDelete)
	if c == nil {
		f.t.Fatalf("conditions %+v, want BeforeDelete", f.status("app").Conditions)
	}
	return *c
}

// TestBeforeDelete_GatesTeardownUntilTheJobCompletes: the teardown creates the hook's Job and
// deletes nothing while it runs (across a restart of the operator), then tears the owner down
// once it completes: the Job is deleted with the rest, not run again. With and without ordered
// teardown (without it, the finalizer alone holds the garbage collector off).
func TestBeforeDelete_GatesTeardownUntilTheJobCompletes(t *testing.T) {
	for _, tt := range []struct {
		name string
		opts []controller.Options
	}{{"ordered teardown", []controller.Options{{OrderedTeardown: true}}}, {"garbage collector", nil}} {
		t.Run(tt.name, func(t *testing.T) {
			f := hookFixture(t, nil, nil, tt.opts...)
			if err := f.reconcileHook(); err != nil {
				t.Fatalf("first teardown reconcile: %v", err)
			}
			job := f.waitHookJob()
			if !metav1.IsControlledBy(job, f.get(&testapi.Widget{}, "app")) {
				t.Errorf("hook Job owner references %v, want the Widget as controller", job.OwnerReferences)
			}
			if c := f.hookCondition(); c.Status != metav1.ConditionFalse || c.Reason != kdagv1alpha1.ReasonBeforeDeleteRunning ||
				!strings.Contains(c.Message, "Job "+f.ns+"/app-backup") {
				t.Errorf("BeforeDelete condition %+v, want False, BeforeDeleteRunning, naming the Job", c)
			}
			if c := condition(f.status("app"), kdagv1alpha1.ConditionReady); c == nil || c.Status != metav1.ConditionFalse {
				t.Errorf("Ready %+v while the hook runs, want False", c)
			}
			f.restart() // the Job is the state: a new process waits for the same one
			if err := f.reconcileHook(); err != nil {
				t.Fatalf("teardown reconcile while the hook runs: %v", err)
			}
			if got := f.get(&batchv1.Job{}, "app-backup"); got.GetUID() != job.UID {
				t.Fatal("the hook's Job was created again")
			}

			completeJob(f, "app-backup")
			f.finishTeardown()
			if !f.notFound(&corev1.ConfigMap{}, "app-config") && tt.opts != nil {
				t.Error("the ConfigMap outlived the ordered teardown")
			}
			if tt.opts != nil && !f.notFound(&batchv1.Job{}, "app-backup") {
				t.Error("the hook's Job outlived the ordered teardown")
			}
			ev := f.waitEvent("app", corev1.EventTypeNormal, kdagv1alpha1.ReasonBeforeDeleteCompleted)
			if !strings.Contains(ev.Note, "Job "+f.ns+"/app-backup") {
				t.Errorf("BeforeDeleteCompleted event %q does not name the Job", ev.Note)
			}
		})
	}
}

// TestBeforeDelete_FailureAndTimeoutStallTheTeardown: a hook Job that fails, or has not completed
// within its timeout, Stalls the teardown (terminal error, Stalled=True naming the Job, a
// Warning event) and nothing is deleted; deleting the failed Job runs the hook again, and a late
// completion lets the teardown go on.
func TestBeforeDelete_FailureAndTimeoutStallTheTeardown(t *testing.T) {
	for _, tt := range []struct {
		name    string
		data    map[string]string
		breakIt func(f *fixture)
		want    string
		recover func(f *fixture)
	}{
		{name: "failed", breakIt: func(f *fixture) { failJob(f, "app-backup") }, want: "failed: ",
			recover: func(f *fixture) {
				// Run it again: delete the failed Job; the teardown creates a new one.
				if err := f.cl.Delete(context.Background(), f.get(&batchv1.Job{}, "app-backup"),
					client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
					f.t.Fatal(err)
				}
				poll.True(f.t, "the cache sees the failed Job gone", waitTimeout, func(context.Context) bool {
					return f.cached(&batchv1.Job{}, "app-backup") != nil
				})
				if err := f.reconcileHook(); err != nil {
					f.t.Fatalf("reconcile after the failed Job was deleted: %v", err)
				}
				f.waitHookJob()
				completeJob(f, "app-backup")
			}},
		{name: "timed out", data: map[string]string{"timeout": "1s"}, want: "did not complete within its timeout 1s",
			breakIt: func(f *fixture) {
				job := f.waitHookJob()
				poll.True(f.t, "the hook's timeout passed", waitTimeout, func(context.Context) bool {
					return time.Since(job.CreationTimestamp.Time) > 2*time.Second
				})
			},
			recover: func(f *fixture) { completeJob(f, "app-backup") }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := hookFixture(t, tt.data, nil, controller.Options{OrderedTeardown: true})
			if err := f.reconcileHook(); err != nil {
				t.Fatalf("first teardown reconcile: %v", err)
			}
			f.waitHookJob()
			tt.breakIt(f)
			err := f.reconcileHook()
			if !isTerminalErr(err) || !strings.Contains(err.Error(), "Job "+f.ns+"/app-backup") || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("reconcile error %v, want a terminal error naming the Job and %q", err, tt.want)
			}
			st := f.status("app")
			stalled := condition(st, kdagv1alpha1.ConditionStalled)
			if stalled == nil || stalled.Status != metav1.ConditionTrue || stalled.Reason != kdagv1alpha1.ReasonBeforeDeleteFailed ||
				!strings.Contains(stalled.Message, "Job "+f.ns+"/app-backup") || !strings.Contains(stalled.Message, kdagv1alpha1.AnnotationBeforeDelete) {
				t.Errorf("Stalled %+v, want True, BeforeDeleteFailed, naming the Job and the skip annotation", stalled)
			}
			if c := f.hookCondition(); c.Status != metav1.ConditionFalse || c.Reason != kdagv1alpha1.ReasonBeforeDeleteFailed {
				t.Errorf("BeforeDelete condition %+v, want False, BeforeDeleteFailed", c)
			}
			if c := condition(st, kdagv1alpha1.ConditionReconciling); c != nil {
				t.Errorf("Reconciling %+v next to Stalled, want none", c)
			}
			ev := f.waitEvent("app", corev1.EventTypeWarning, kdagv1alpha1.ReasonBeforeDeleteFailed)
			if !strings.Contains(ev.Note, "Job "+f.ns+"/app-backup") {
				t.Errorf("BeforeDeleteFailed event %q does not name the Job", ev.Note)
			}
			// Stalled is stable: another reconcile writes nothing and deletes nothing.
			f.calls.Reset()
			if err := f.reconcileHook(); !isTerminalErr(err) {
				t.Errorf("second reconcile: %v, want the terminal error again", err)
			}
			if w := f.objectWrites(); len(w) != 0 {
				t.Errorf("writes of a Stalled teardown's reconcile: %v, want none", w)
			}

			tt.recover(f)
			f.finishTeardown()
			if !f.notFound(&corev1.ConfigMap{}, "app-config") {
				t.Error("the ConfigMap outlived the teardown")
			}
		})
	}
}

// TestBeforeDelete_SkipAnnotation: an owner annotated kdag.dev/before-delete=skip is torn down
// without its hook (set before the deletion, or while a failed hook Stalls the teardown); any
// other value Stalls the teardown without running the hook, until it is corrected.
func TestBeforeDelete_SkipAnnotation(t *testing.T) {
	skip := map[string]string{kdagv1alpha1.AnnotationBeforeDelete: kdagv1alpha1.BeforeDeleteSkip}
	annotate := func(f *fixture, v string) {
		f.t.Helper()
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			w := f.get(&testapi.Widget{}, "app")
			ann := w.GetAnnotations()
			if ann == nil {
				ann = map[string]string{}
			}
			ann[kdagv1alpha1.AnnotationBeforeDelete] = v
			w.SetAnnotations(ann)
			return f.cl.Update(context.Background(), w)
		})
		if err != nil {
			f.t.Fatal(err)
		}
		cached := &testapi.Widget{}
		f.waitCached(cached, "app", "cache sees the annotation", func() bool {
			return cached.GetAnnotations()[kdagv1alpha1.AnnotationBeforeDelete] == v
		})
	}
	for _, tt := range []struct {
		name        string
		annotations map[string]string
		before      func(f *fixture)
		wantJob     bool
	}{
		{name: "annotated before the deletion", annotations: skip},
		{name: "annotated while the hook fails", wantJob: true, before: func(f *fixture) {
			if err := f.reconcileHook(); err != nil {
				f.t.Fatal(err)
			}
			f.waitHookJob()
			failJob(f, "app-backup")
			if err := f.reconcileHook(); !isTerminalErr(err) {
				f.t.Fatalf("reconcile of a failed hook: %v, want a terminal error", err)
			}
			annotate(f, kdagv1alpha1.BeforeDeleteSkip)
		}},
		{name: "an unknown value Stalls until corrected", annotations: map[string]string{kdagv1alpha1.AnnotationBeforeDelete: "true"},
			before: func(f *fixture) {
				err := f.reconcileHook()
				if !isTerminalErr(err) || !strings.Contains(err.Error(), `"true"`) {
					f.t.Fatalf("reconcile with %s=true: %v, want a terminal error naming the value", kdagv1alpha1.AnnotationBeforeDelete, err)
				}
				if !f.notFound(&batchv1.Job{}, "app-backup") {
					f.t.Fatal("the hook ran under an unknown annotation value")
				}
				if c := condition(f.status("app"), kdagv1alpha1.ConditionStalled); c == nil || !strings.Contains(c.Message, `to "skip"`) {
					f.t.Errorf("Stalled %+v, want the accepted value named", c)
				}
				annotate(f, kdagv1alpha1.BeforeDeleteSkip)
			}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := hookFixture(t, nil, tt.annotations, controller.Options{OrderedTeardown: true})
			if tt.before != nil {
				tt.before(f)
			}
			f.calls.Reset()
			f.finishTeardown()
			if !tt.wantJob {
				for _, w := range f.objectWrites() {
					if strings.Contains(w, "/jobs") {
						t.Errorf("%s: the skipped hook's Job was written", w)
					}
				}
			}
			ev := f.waitEvent("app", corev1.EventTypeNormal, kdagv1alpha1.ReasonBeforeDeleteSkipped)
			if !strings.Contains(ev.Note, kdagv1alpha1.AnnotationBeforeDelete) {
				t.Errorf("BeforeDeleteSkipped event %q does not name the annotation", ev.Note)
			}
			if !f.notFound(&corev1.ConfigMap{}, "app-config") || !f.notFound(&batchv1.Job{}, "app-backup") {
				t.Error("objects outlived the teardown")
			}
		})
	}
}

// TestBeforeDelete_KeptHookOutlivesTheOwner: a BeforeDelete Job with Keep runs like any hook and
// is orphaned, not deleted, by the teardown: its record stays.
func TestBeforeDelete_KeptHookOutlivesTheOwner(t *testing.T) {
	f := hookFixture(t, map[string]string{"keep": "yes"}, nil, controller.Options{OrderedTeardown: true})
	if err := f.reconcileHook(); err != nil {
		t.Fatal(err)
	}
	job := f.waitHookJob()
	if metav1.GetControllerOf(job) != nil || job.Annotations[kdagv1alpha1.AnnotationResourcePolicy] != kdagv1alpha1.ResourcePolicyKeep {
		t.Errorf("kept hook Job: controller %v, annotations %v; want no controller and the keep annotation", metav1.GetControllerOf(job), job.Annotations)
	}
	completeJob(f, "app-backup")
	f.finishTeardown()
	got := f.get(&batchv1.Job{}, "app-backup")
	if got.GetUID() != job.UID || got.GetLabels()[kdagv1alpha1.LabelOwnerUID] != "" || got.GetAnnotations()[kdagv1alpha1.AnnotationAdopt] != "Widget/app" {
		t.Errorf("kept hook Job after the teardown: labels %v, annotations %v; want it orphaned", got.GetLabels(), got.GetAnnotations())
	}
	if !f.notFound(&corev1.ConfigMap{}, "app-config") {
		t.Error("the ConfigMap outlived the teardown")
	}
}

// TestBeforeDelete_BuildErrors: the options a hook does not take, a kind other than Job, a
// timeout that is not positive, and a node that waits for a hook are build errors naming the
// node; a hook is described in the plan.
func TestBeforeDelete_BuildErrors(t *testing.T) {
	cm := func() *corev1.ConfigMap { return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm"}} }
	for _, tt := range []struct {
		name string
		add  func(b *controller.Graph)
		want string // "" for no error
	}{
		{"a Job", func(b *controller.Graph) { b.Add(backupJob("w"), controller.BeforeDelete(time.Minute)) }, ""},
		{"with Keep and CreateOnly", func(b *controller.Graph) {
			b.Add(backupJob("w"), controller.BeforeDelete(time.Minute), controller.Keep(), controller.CreateOnly())
		}, ""},
		{"a hook after another", func(b *controller.Graph) {
			first := b.Add(backupJob("a"), controller.BeforeDelete(time.Minute))
			b.Add(backupJob("b"), controller.BeforeDelete(time.Minute), controller.After(first))
		}, ""},
		{"not a Job", func(b *controller.Graph) { b.Add(cm(), controller.BeforeDelete(time.Minute)) }, "BeforeDelete applies to a batch/v1 Job only"},
		{"zero timeout", func(b *controller.Graph) { b.Add(backupJob("w"), controller.BeforeDelete(0)) }, "the timeout must be positive"},
		{"Finished", func(b *controller.Graph) {
			b.Add(backupJob("w"), controller.BeforeDelete(time.Minute), controller.Finished())
		}, "does not take Finished"},
		{"Recreate", func(b *controller.Graph) {
			b.Add(backupJob("w"), controller.BeforeDelete(time.Minute), controller.Recreate(metav1.DeletePropagationBackground))
		}, "does not take Finished, Recreate"},
		{"Adopt", func(b *controller.Graph) {
			b.Add(backupJob("w"), controller.BeforeDelete(time.Minute), controller.Adopt())
		}, "does not take Finished, Recreate, Adopt"},
		{"a dependent", func(b *controller.Graph) {
			hook := b.Add(backupJob("w"), controller.BeforeDelete(time.Minute))
			b.Add(cm(), controller.After(hook))
		}, "is a BeforeDelete hook: it runs only when the owner is deleted"},
		{"a Reference", func(b *controller.Graph) { b.Reference(backupJob("w"), controller.BeforeDelete(time.Minute)) }, "a Reference takes no option"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rm := funcRM{add: func(_ *testapi.Widget, b *controller.Graph) error { tt.add(b); return nil }}.owning(&batchv1.Job{})
			owner := &testapi.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "w"}}
			p, err := plan.NewPlan(context.Background(), rm, owner, scheme, nil)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("NewPlan: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("NewPlan error %v, want one containing %q", err, tt.want)
			case tt.want == "":
				if got := p.Nodes[0].String(); !strings.Contains(got, "runs before the owner is deleted (timeout 1m0s)") {
					t.Errorf("plan node %q does not say it is a hook", got)
				}
			}
		})
	}
}

// TestBeforeDelete_ForegroundDeletionSaysTheHookDidNotRun: deleted in the foreground, the owner's
// objects go with the garbage collector whatever its finalizers: kdag creates no hook Job (the
// collector would delete it), says so in a Warning event and the BeforeDelete condition, and
// releases its finalizer.
func TestBeforeDelete_ForegroundDeletionSaysTheHookDidNotRun(t *testing.T) {
	f := newFixture(t, hookRM, controller.Options{OrderedTeardown: true})
	f.widget("app", testapi.WidgetSpec{MaxReplicas: 1})
	f.settle("app")
	if err := f.cl.Delete(context.Background(), f.get(&testapi.Widget{}, "app"), client.PropagationPolicy(metav1.DeletePropagationForeground)); err != nil {
		t.Fatal(err)
	}
	cached := &testapi.Widget{}
	f.waitCached(cached, "app", "cache sees the deletion", func() bool { return !cached.GetDeletionTimestamp().IsZero() })
	poll.True(t, "kdag's finalizer released", waitTimeout, func(context.Context) bool {
		_ = f.reconcile("app")
		w := &testapi.Widget{}
		if err := f.cl.Get(context.Background(), client.ObjectKey{Namespace: f.ns, Name: "app"}, w); err != nil {
			return true // gone
		}
		return !controllerutil.ContainsFinalizer(w, kdagv1alpha1.Finalizer)
	})
	if !f.notFound(&batchv1.Job{}, "app-backup") {
		t.Error("a hook Job was created under foreground deletion")
	}
	ev := f.waitEvent("app", corev1.EventTypeWarning, kdagv1alpha1.ReasonBeforeDeleteSkipped)
	if !strings.Contains(ev.Note, "foreground") || !strings.Contains(ev.Note, "Job "+f.ns+"/app-backup") {
		t.Errorf("BeforeDeleteSkipped event %q, want it to name the hook and the foreground deletion", ev.Note)
	}
}

// TestBeforeDelete_JobTheCacheDoesNotHold: the hook's Job exists, the owner's, but the cache does
// not hold it (a shard's cache before the Job carries that shard's label: here, a Job without
// kdag's labels): the conditional create does not overwrite it, the Job is read from the API
// server and judged as read, and the teardown goes on once it completes.
func TestBeforeDelete_JobTheCacheDoesNotHold(t *testing.T) {
	f := hookFixture(t, nil, nil, controller.Options{OrderedTeardown: true})
	w := f.get(&testapi.Widget{}, "app")
	job := backupJob("app")
	job.Namespace = f.ns
	job.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(w, testapi.GroupVersion.WithKind("Widget"))}
	if err := f.cl.Create(context.Background(), job); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := f.reconcileHook(); err != nil {
			t.Fatalf("teardown reconcile: %v", err)
		}
	}
	if got := f.get(&batchv1.Job{}, "app-backup"); got.GetUID() != job.UID || got.GetLabels()[kdagv1alpha1.LabelOwnerUID] != "" {
		t.Fatalf("the Job the cache does not hold was replaced or rewritten: UID %s (was %s), labels %v", got.GetUID(), job.UID, got.GetLabels())
	}
	if c := f.hookCondition(); c.Reason != kdagv1alpha1.ReasonBeforeDeleteRunning {
		t.Errorf("BeforeDelete condition %+v, want BeforeDeleteRunning", c)
	}
	if err := workload.MarkReady(context.Background(), f.cl, &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "app-backup"}}); err != nil {
		t.Fatal(err) // not completeJob: the cache does not hold this Job
	}
	f.finishTeardown()
	if !f.notFound(&corev1.ConfigMap{}, "app-config") {
		t.Error("the ConfigMap outlived the teardown")
	}
}
