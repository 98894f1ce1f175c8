package controller_test

// Tests of the lifecycle rules of issue 13: status never lies, nothing is overwritten, every
// change reaches the pods, errors are classed right. Each test is named after its rule; the
// numbers in the comments are the items.

import (
	"context"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/pkg/errors"
	"github.com/prometheus/client_golang/prometheus"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/controller"
	"github.com/kdag-dev/kdag/pkg/metrics"
	"github.com/kdag-dev/kdag/pkg/testing/poll"
	"github.com/kdag-dev/kdag/pkg/testing/testapi"
)

// TestPrune_FailedDeleteMakesOwnerNotReady (1): a prune whose DELETE the API server refuses
// fails the reconcile (retried), sets Ready=False with reason PruneFailed naming the object and
// the cause, and emits a Warning event; once the delete goes through, the owner is Ready.
func TestPrune_FailedDeleteMakesOwnerNotReady(t *testing.T) {
	for _, tc := range []struct {
		name   string
		code   int
		reason metav1.StatusReason
	}{
		{"500 from the API server", http.StatusInternalServerError, metav1.StatusReasonInternalError},
		{"403 from RBAC", http.StatusForbidden, metav1.StatusReasonForbidden},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, widgetRM{readyDeployment: true})
			f.widget("app", testapi.WidgetSpec{MaxReplicas: 3, Components: []string{"a", "b", "c"}})
			f.settle("app")

			path := "/api/v1/namespaces/" + f.ns + "/configmaps/extra-b"
			f.calls.FailNextWith("DELETE", path, 100, tc.code, tc.reason)
			f.updateWidget("app", func(w *testapi.Widget) { w.Spec.Components = []string{"a"} })
			err := f.reconcile("app")
			if err == nil || isTerminalErr(err) {
				t.Fatalf("reconcile with a refused prune: err = %v, want a transient error (retried)", err)
			}
			bID := "ConfigMap " + f.ns + "/extra-b"
			if !strings.Contains(err.Error(), bID) {
				t.Errorf("reconcile error %q does not name %s", err, bID)
			}
			f.get(&corev1.ConfigMap{}, "extra-b")
			if !f.notFound(&corev1.ConfigMap{}, "extra-c") {
				t.Error("extra-c, whose delete was not refused, was not pruned")
			}
			st := f.status("app")
			ready := condition(st, kdagv1alpha1.ConditionReady)
			if ready == nil || ready.Status != metav1.ConditionFalse || ready.Reason != kdagv1alpha1.ReasonPruneFailed {
				t.Fatalf("Ready condition %+v, want False with reason %s", ready, kdagv1alpha1.ReasonPruneFailed)
			}
			if !strings.Contains(ready.Message, bID) || !strings.Contains(ready.Message, "injected fault") {
				t.Errorf("Ready message %q, want the object %s and the cause", ready.Message, bID)
			}
			if rec := condition(st, kdagv1alpha1.ConditionReconciling); rec == nil || rec.Status != metav1.ConditionTrue {
				t.Errorf("Reconciling condition %+v, want True: the prune is retried", rec)
			}
			ev := f.waitEvent("app", corev1.EventTypeWarning, kdagv1alpha1.ReasonPruneFailed)
			if !strings.Contains(ev.Note, bID) {
				t.Errorf("PruneFailed event note %q does not name %s", ev.Note, bID)
			}

			f.calls.Clear()
			f.settle("app")
			if !f.notFound(&corev1.ConfigMap{}, "extra-b") {
				t.Error("extra-b still exists once its delete is allowed")
			}
			if !isTrue(f.status("app"), kdagv1alpha1.ConditionReady) {
				t.Errorf("conditions %+v once the prune succeeded, want Ready=True", f.status("app").Conditions)
			}
		})
	}
}

// TestPrune_WaitsUntilEveryNodeIsReady (7): an object leaving the graph is deleted only once
// every node of the graph is Ready, not as soon as none failed.
func TestPrune_WaitsUntilEveryNodeIsReady(t *testing.T) {
	f := newFixture(t, widgetRM{})
	f.widget("app", testapi.WidgetSpec{MaxReplicas: 3, Components: []string{"old"}, Data: map[string]string{"v": "1"}})
	_ = f.reconcile("app")
	f.markDeploymentAvailable("app")
	f.settle("app")
	if !isTrue(f.status("app"), kdagv1alpha1.ConditionReady) {
		t.Fatalf("conditions %+v, want Ready=True before the change", f.status("app").Conditions)
	}

	// The new configuration rolls the Deployment (its pod template carries the ConfigMap's
	// hash), which is not available again until the Deployment controller says so; meanwhile
	// the component that left the graph must stay.
	f.updateWidget("app", func(w *testapi.Widget) {
		w.Spec.Components = nil
		w.Spec.Data = map[string]string{"v": "2"}
	})
	f.calls.Reset()
	if err := f.reconcile("app"); err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	for _, w := range f.objectWrites() {
		if strings.HasPrefix(w, "DELETE ") {
			t.Errorf("%s while the Deployment is not ready", w)
		}
	}
	f.get(&corev1.ConfigMap{}, "extra-old")
	if isTrue(f.status("app"), kdagv1alpha1.ConditionReady) {
		t.Error("Ready=True while the Deployment rolls and extra-old is not pruned")
	}

	f.markDeploymentAvailable("app")
	f.settle("app")
	if !f.notFound(&corev1.ConfigMap{}, "extra-old") {
		t.Error("extra-old still exists once every node is Ready")
	}
}

// TestDrift_FailedRepairIsNotReportedAsRepaired (2): an apply that reverts drift but is refused
// by the API server emits no DriftRepaired event and does not count in the drift metric; the
// repair that goes through does both.
func TestDrift_FailedRepairIsNotReportedAsRepaired(t *testing.T) {
	reg := prometheus.NewRegistry()
	f := newFixture(t, widgetRM{readyDeployment: true}, controller.Options{Metrics: metrics.Register(reg)})
	f.widget("app", testapi.WidgetSpec{MaxReplicas: 3, Data: map[string]string{"k": "ours"}})
	f.settle("app")

	f.foreignUpdate(&corev1.ConfigMap{}, "app-config", func(o client.Object) {
		o.(*corev1.ConfigMap).Data["k"] = "theirs"
	})
	f.calls.FailNext("PATCH", "/api/v1/namespaces/"+f.ns+"/configmaps/app-config", 1)
	if err := f.reconcile("app"); err == nil {
		t.Fatal("reconcile whose repair was refused: no error")
	}
	if got := counterValue(t, reg, "kdag_drift_repairs_total"); got != 0 {
		t.Errorf("kdag_drift_repairs_total = %v after a refused repair, want 0", got)
	}
	if err := f.reconcile("app"); err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	if cm := f.get(&corev1.ConfigMap{}, "app-config").(*corev1.ConfigMap); cm.Data["k"] != "ours" {
		t.Fatalf("ConfigMap data %v after the repair, want k=ours", cm.Data)
	}
	f.waitEvent("app", corev1.EventTypeNormal, "DriftRepaired")
	if n := len(f.events("DriftRepaired")); n != 1 {
		t.Errorf("%d DriftRepaired events, want 1: the refused repair is not one", n)
	}
	if got := counterValue(t, reg, "kdag_drift_repairs_total"); got != 1 {
		t.Errorf("kdag_drift_repairs_total = %v, want 1", got)
	}
}

// counterValue sums every series of the counter name in reg.
func counterValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range families {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

// jobRM: a migration Job named after spec.data["version"], and a ConfigMap that needs it.
var jobRM = funcRM{add: func(w *testapi.Widget, b *controller.Graph) error {
	job := b.Add(&batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "migrate-" + w.Spec.Data["version"]},
		Spec: batchv1.JobSpec{
			BackoffLimit: ptr.To[int32](0),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				Containers:    []corev1.Container{{Name: "migrate", Image: "busybox"}},
			}},
		},
	}, controller.CreateOnly())
	b.Add(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: w.Name + "-config"}}, controller.DependsOn(job))
	return nil
}}

// failJob sets the named Job's status as the Job controller does when its pods failed past the
// backoff limit (envtest runs no controllers).
func (f *fixture) failJob(name string) {
	f.t.Helper()
	job := f.get(&batchv1.Job{}, name).(*batchv1.Job)
	now := metav1.Now()
	job.Status = batchv1.JobStatus{
		StartTime: &now, Failed: 1,
		Conditions: []batchv1.JobCondition{
			{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue, Reason: batchv1.JobReasonBackoffLimitExceeded,
				Message: "Job has reached the specified backoff limit", LastTransitionTime: now, LastProbeTime: now},
			{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: batchv1.JobReasonBackoffLimitExceeded,
				Message: "Job has reached the specified backoff limit", LastTransitionTime: now, LastProbeTime: now},
		},
	}
	if err := f.cl.Status().Update(context.Background(), job); err != nil {
		f.t.Fatalf("fail Job %s: %v", name, err)
	}
	f.waitCachedVersion(&batchv1.Job{}, name, job.ResourceVersion)
}

// TestReadiness_FailedJobStallsOwnerUntilANewOneIsDesired (3): a Job kstatus calls Failed makes
// its owner Stalled with the Job's own reason and message (not a transient error retried for
// ever); a new desired Job (a new version) clears it.
func TestReadiness_FailedJobStallsOwnerUntilANewOneIsDesired(t *testing.T) {
	f := newFixture(t, jobRM.owning(&batchv1.Job{}))
	f.widget("app", testapi.WidgetSpec{MaxReplicas: 1, Data: map[string]string{"version": "1"}})
	if err := f.reconcile("app"); err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	f.failJob("migrate-1")
	err := f.reconcile("app")
	if !isTerminalErr(err) {
		t.Fatalf("reconcile with a failed Job: err = %v, want a terminal error", err)
	}
	st := f.status("app")
	stalled := condition(st, kdagv1alpha1.ConditionStalled)
	if stalled == nil || stalled.Status != metav1.ConditionTrue || stalled.Reason != batchv1.JobReasonBackoffLimitExceeded {
		t.Fatalf("Stalled condition %+v, want True with the Job's reason %s", stalled, batchv1.JobReasonBackoffLimitExceeded)
	}
	jobID := "Job " + f.ns + "/migrate-1"
	if !strings.Contains(stalled.Message, jobID) || !strings.Contains(stalled.Message, "backoff limit") {
		t.Errorf("Stalled message %q, want it to name %s and carry the Job's message", stalled.Message, jobID)
	}
	if isTrue(st, kdagv1alpha1.ConditionReady) || condition(st, kdagv1alpha1.ConditionReconciling) != nil {
		t.Errorf("conditions %+v, want Ready=False and no Reconciling while stalled", st.Conditions)
	}
	f.waitEvent("app", corev1.EventTypeWarning, batchv1.JobReasonBackoffLimitExceeded)

	f.updateWidget("app", func(w *testapi.Widget) { w.Spec.Data["version"] = "2" })
	if err := f.reconcile("app"); err != nil {
		t.Fatalf("reconcile with the new Job: %v", err)
	}
	st = f.status("app")
	if c := condition(st, kdagv1alpha1.ConditionStalled); c != nil {
		t.Errorf("Stalled condition %+v once a new Job is desired, want none", c)
	}
	if rec := condition(st, kdagv1alpha1.ConditionReconciling); rec == nil || !strings.Contains(rec.Message, "migrate-2") {
		t.Errorf("Reconciling condition %+v, want it waiting for Job migrate-2", rec)
	}
}

// TestAdoption_CreateOnlyNeverChangesData (5): adopting a create-only object takes ownership
// (kdag's labels, the owner reference, kdag's field manager) and keeps its data, whether the
// cache missed it (no kdag labels) or held it (labelled for another owner).
func TestAdoption_CreateOnlyNeverChangesData(t *testing.T) {
	for _, tc := range []struct {
		name   string
		labels func(f *fixture) map[string]string
	}{
		{"created by hand, not in the cache", func(*fixture) map[string]string { return nil }},
		{"labelled for another owner, in the cache", func(f *fixture) map[string]string {
			return map[string]string{kdagv1alpha1.LabelController: f.name, kdagv1alpha1.LabelManagedBy: "kdag", kdagv1alpha1.LabelOwnerUID: "00000000-0000-0000-0000-00000000dead"}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rm := funcRM{add: func(w *testapi.Widget, b *controller.Graph) error {
				b.Add(&corev1.Secret{
					ObjectMeta: metav1.ObjectMeta{Name: w.Name + "-password"},
					StringData: map[string]string{"password": "generated-by-kdag"},
				}, controller.CreateOnly(), controller.Adopt())
				return nil
			}}
			f := newFixture(t, rm)
			theirs := map[string][]byte{"password": []byte("made-by-helm")}
			secret := &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "app-password", Labels: tc.labels(f)},
				Data:       theirs,
			}
			if err := f.cl.Create(context.Background(), secret, client.FieldOwner("helm")); err != nil {
				t.Fatal(err)
			}
			if secret.Labels != nil {
				f.waitCachedVersion(&corev1.Secret{}, "app-password", secret.ResourceVersion)
			}
			w := f.widget("app", testapi.WidgetSpec{MaxReplicas: 1})
			f.settle("app")

			got := f.get(&corev1.Secret{}, "app-password").(*corev1.Secret)
			if !maps.EqualFunc(got.Data, theirs, func(a, b []byte) bool { return string(a) == string(b) }) {
				t.Errorf("adopted create-only Secret's data changed: keys %v, password replaced: %v",
					keysOf(got.Data), string(got.Data["password"]) != "made-by-helm")
			}
			if got.Labels[kdagv1alpha1.LabelOwnerUID] != string(w.UID) || got.Labels[kdagv1alpha1.LabelController] != f.name {
				t.Errorf("adopted Secret labels %v, want kdag's for owner %s", got.Labels, w.UID)
			}
			if len(got.OwnerReferences) != 1 || got.OwnerReferences[0].UID != w.UID {
				t.Errorf("adopted Secret owner references %+v, want the Widget", got.OwnerReferences)
			}
			if !slices.ContainsFunc(got.ManagedFields, func(mf metav1.ManagedFieldsEntry) bool { return mf.Manager == f.fieldManager }) {
				t.Errorf("adopted Secret has no managed-fields entry of %s", f.fieldManager)
			}
			f.waitEvent("app", corev1.EventTypeNormal, "Adopted")
			if !isTrue(f.status("app"), kdagv1alpha1.ConditionReady) {
				t.Errorf("conditions %+v, want Ready=True", f.status("app").Conditions)
			}
		})
	}
}

func keysOf[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestCreate_FallbackIsConditional (6): when the conditional create collides with an object
// that is gone by the time kdag reads it, and someone creates another one right then, kdag's
// next write is again conditional: the newcomer is refused, never overwritten.
func TestCreate_FallbackIsConditional(t *testing.T) {
	f := newFixture(t, widgetRM{readyDeployment: true})
	path := "/api/v1/namespaces/" + f.ns + "/configmaps/app-config"
	theirs := map[string]string{"k": "theirs"}
	// The first conditional apply answers 409 as if an object existed; the read that follows
	// finds none, and right after it someone creates the ConfigMap.
	f.calls.FailNextWith("PATCH", path, 1, http.StatusConflict, metav1.StatusReasonConflict)
	f.calls.AfterNext("GET", path, func() {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "app-config"}, Data: theirs}
		if err := f.cl.Create(context.Background(), cm, client.FieldOwner("someone")); err != nil {
			t.Errorf("create the newcomer: %v", err)
		}
	})
	f.widget("app", testapi.WidgetSpec{MaxReplicas: 3, Data: map[string]string{"k": "ours"}})
	err := f.reconcile("app")
	if err == nil || !strings.Contains(err.Error(), "was not created by kdag") {
		t.Fatalf("reconcile: err = %v, want the newcomer refused", err)
	}
	cm := f.get(&corev1.ConfigMap{}, "app-config").(*corev1.ConfigMap)
	if !maps.Equal(cm.Data, theirs) || cm.Labels[kdagv1alpha1.LabelOwnerUID] != "" {
		t.Errorf("the newcomer was overwritten: data %v labels %v", cm.Data, cm.Labels)
	}
	if !f.notFound(&appsv1.Deployment{}, "app") {
		t.Error("the Deployment ran although its ConfigMap was refused")
	}
}

// TestApply_AdmissionDenialIsRetriedNotStalled (11): an object refused by an admission policy
// (a ValidatingAdmissionPolicy, evaluated by the real API server) leaves the owner Ready=False
// and Reconciling with the denial, not Stalled; once the policy is gone, the owner converges.
func TestApply_AdmissionDenialIsRetriedNotStalled(t *testing.T) {
	f := newFixture(t, widgetRM{readyDeployment: true})
	ctx := context.Background()
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "no-forbidden-data-" + f.ns},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}},
				},
			}}},
			Validations: []admissionregistrationv1.Validation{{
				Expression: `!has(object.data) || !('k' in object.data) || object.data['k'] != 'forbidden'`,
				Message:    "data k must not be forbidden",
			}},
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: policy.Name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        policy.Name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
			MatchResources: &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{"kubernetes.io/metadata.name": f.ns},
			}},
		},
	}
	for _, o := range []client.Object{policy, binding} {
		if err := f.cl.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = f.cl.Delete(context.Background(), o) })
	}
	// The policy takes effect once the API server's policy informer has it: probe with a dry run.
	poll.True(t, "the admission policy denies", waitTimeout, func(context.Context) bool {
		probe := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "probe"}, Data: map[string]string{"k": "forbidden"}}
		err := f.cl.Create(ctx, probe, client.DryRunAll)
		return err != nil && strings.Contains(err.Error(), "denied request")
	})

	f.widget("app", testapi.WidgetSpec{MaxReplicas: 3, Data: map[string]string{"k": "forbidden"}})
	err := f.reconcile("app")
	if err == nil || isTerminalErr(err) {
		t.Fatalf("reconcile with an object the policy denies: err = %v, want a transient error", err)
	}
	st := f.status("app")
	if c := condition(st, kdagv1alpha1.ConditionStalled); c != nil {
		t.Errorf("Stalled condition %+v, want none: an admission policy is not a spec error", c)
	}
	ready := condition(st, kdagv1alpha1.ConditionReady)
	if ready == nil || ready.Status != metav1.ConditionFalse || !strings.Contains(ready.Message, "data k must not be forbidden") {
		t.Errorf("Ready condition %+v, want False with the policy's message", ready)
	}
	if rec := condition(st, kdagv1alpha1.ConditionReconciling); rec == nil || rec.Status != metav1.ConditionTrue {
		t.Errorf("Reconciling condition %+v, want True", rec)
	}

	if err := f.cl.Delete(ctx, binding); err != nil {
		t.Fatal(err)
	}
	poll.True(t, "the admission policy is gone", waitTimeout, func(context.Context) bool {
		probe := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "probe"}, Data: map[string]string{"k": "forbidden"}}
		return f.cl.Create(ctx, probe, client.DryRunAll) == nil
	})
	f.settle("app")
	if !isTrue(f.status("app"), kdagv1alpha1.ConditionReady) {
		t.Errorf("conditions %+v once the policy is gone, want Ready=True", f.status("app").Conditions)
	}
}

// transientValidatingRM's Validator fails with a plain (transient) error while the Widget's
// spec.data["db"] is "missing", and with a terminal one while maxReplicas is 0.
type transientValidatingRM struct{ widgetRM }

func (transientValidatingRM) Validate(_ context.Context, owner *testapi.Widget) error {
	w := owner
	if w.Spec.MaxReplicas == 0 {
		return reconcile.TerminalError(errors.New("spec.maxReplicas must be at least 1"))
	}
	if w.Spec.Data["db"] == "missing" {
		return errors.New("Secret db does not exist yet")
	}
	return nil
}

// TestValidate_TransientErrorIsRetried (11): a Validator error not marked terminal is retried
// (Ready=False, Reconciling=True with reason ValidationFailed, no Stalled).
func TestValidate_TransientErrorIsRetried(t *testing.T) {
	f := newFixture(t, transientValidatingRM{widgetRM{readyDeployment: true}})
	f.widget("app", testapi.WidgetSpec{MaxReplicas: 1, Data: map[string]string{"db": "missing"}})
	err := f.reconcile("app")
	if err == nil || isTerminalErr(err) {
		t.Fatalf("reconcile: err = %v, want a transient error", err)
	}
	st := f.status("app")
	if c := condition(st, kdagv1alpha1.ConditionStalled); c != nil {
		t.Errorf("Stalled condition %+v, want none for a transient validation error", c)
	}
	rec := condition(st, kdagv1alpha1.ConditionReconciling)
	if rec == nil || rec.Reason != kdagv1alpha1.ReasonValidationFailed || !strings.Contains(rec.Message, "does not exist yet") {
		t.Errorf("Reconciling condition %+v, want reason %s with the Validator's message", rec, kdagv1alpha1.ReasonValidationFailed)
	}
	f.waitEvent("app", corev1.EventTypeWarning, kdagv1alpha1.ReasonValidationFailed)
	f.updateWidget("app", func(w *testapi.Widget) { w.Spec.Data["db"] = "there" })
	f.settle("app")
	if !isTrue(f.status("app"), kdagv1alpha1.ConditionReady) {
		t.Errorf("conditions %+v, want Ready=True", f.status("app").Conditions)
	}
}
