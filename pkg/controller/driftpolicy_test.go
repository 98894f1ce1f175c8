package controller_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/apply"
	"github.com/kdag-dev/kdag/pkg/controller"
	"github.com/kdag-dev/kdag/pkg/metrics"
	"github.com/kdag-dev/kdag/pkg/testing/poll"
	"github.com/kdag-dev/kdag/pkg/testing/testapi"
)

// annotateWidget sets annotations on the named Widget and waits for the cache.
func (f *fixture) annotateWidget(name string, ann map[string]string) {
	f.t.Helper()
	f.updateWidget(name, func(w *testapi.Widget) {
		if w.Annotations == nil {
			w.Annotations = map[string]string{}
		}
		for k, v := range ann {
			w.Annotations[k] = v
		}
	})
}

// writesTo returns the writes among writes whose path ends with suffix.
func writesTo(writes []string, suffix string) []string {
	var out []string
	for _, w := range writes {
		if strings.HasSuffix(w, suffix) {
			out = append(out, w)
		}
	}
	return out
}

// TestDriftPolicy_ReportLeavesDriftAndSaysSo is issue 14, part 3: with the drift policy report
// (the owner's kdag.dev/drift annotation, or the node's OnDrift), another writer's change of a
// field kdag set is detected but not reverted: no write to the object, the owner's Drifted
// condition names the object and the field (never the value), one Warning event and one count in
// kdag_drift_reports_total however many reconciles follow, and Ready still follows the live
// object. Once the other writer puts the value back, Drifted turns False. The owner's annotation
// wins over the node's option.
func TestDriftPolicy_ReportLeavesDriftAndSaysSo(t *testing.T) {
	report := []controller.NodeOption{controller.OnDrift(controller.DriftReport)}
	for _, tc := range []struct {
		name       string
		annotation string // kdag.dev/drift on the owner, "" for none
		configOpts []controller.NodeOption
		wantReport bool
	}{
		{name: "owner annotation report", annotation: kdagv1alpha1.DriftReport, wantReport: true},
		{name: "node OnDrift(DriftReport)", configOpts: report, wantReport: true},
		{name: "owner annotation repair wins over the node's report", annotation: kdagv1alpha1.DriftRepair, configOpts: report},
		{name: "owner annotation report wins over the node's repair", annotation: kdagv1alpha1.DriftReport,
			configOpts: []controller.NodeOption{controller.OnDrift(controller.DriftRepair)}, wantReport: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			f := newFixture(t, widgetRM{readyDeployment: true, configOpts: tc.configOpts}, controller.Options{Metrics: metrics.Register(reg)})
			f.widget("app", testapi.WidgetSpec{MaxReplicas: 3, Data: map[string]string{"k": "ours"}})
			if tc.annotation != "" {
				f.annotateWidget("app", map[string]string{kdagv1alpha1.AnnotationDrift: tc.annotation})
			}
			f.settle("app")

			const theirs = "hunter2-their-value" // must never show in status, events or metrics
			f.foreignUpdate(&corev1.ConfigMap{}, "app-config", func(o client.Object) { o.(*corev1.ConfigMap).Data["k"] = theirs })
			f.calls.Reset()
			if err := f.reconcile("app"); err != nil {
				t.Fatalf("reconcile: %v", err)
			}
			cmWrites := writesTo(f.objectWrites(), "/configmaps/app-config")
			live := f.get(&corev1.ConfigMap{}, "app-config").(*corev1.ConfigMap)
			st := f.status("app")
			drifted := condition(st, kdagv1alpha1.ConditionDrifted)
			if !tc.wantReport {
				if len(cmWrites) != 1 || live.Data["k"] != "ours" {
					t.Fatalf("repair policy: writes %v, data %v; want one apply restoring k=ours", cmWrites, live.Data)
				}
				if drifted != nil {
					t.Errorf("repair policy: Drifted condition %+v, want none", drifted)
				}
				if got := counterValue(t, reg, "kdag_drift_repairs_total"); got != 1 {
					t.Errorf("kdag_drift_repairs_total = %v, want 1", got)
				}
				return
			}

			if len(cmWrites) != 0 || live.Data["k"] != theirs {
				t.Fatalf("report policy: writes %v, data k=%q; want no write and the other writer's value", cmWrites, live.Data["k"])
			}
			wantObj := "ConfigMap " + f.ns + "/app-config: .data.k"
			if drifted == nil || drifted.Status != metav1.ConditionTrue || drifted.Reason != kdagv1alpha1.ReasonDriftReported ||
				!strings.Contains(drifted.Message, wantObj) {
				t.Fatalf("Drifted condition %+v, want True, reason %s, naming %q", drifted, kdagv1alpha1.ReasonDriftReported, wantObj)
			}
			if strings.Contains(drifted.Message, theirs) {
				t.Errorf("Drifted message %q holds the drifted value", drifted.Message)
			}
			if !isTrue(st, kdagv1alpha1.ConditionReady) {
				t.Errorf("conditions %+v, want Ready=True: the drifted ConfigMap is ready as it is", st.Conditions)
			}
			ev := f.waitEvent("app", corev1.EventTypeWarning, kdagv1alpha1.ReasonDriftReported)
			if !strings.Contains(ev.Note, wantObj) || strings.Contains(ev.Note, theirs) {
				t.Errorf("DriftReported event note %q: want it naming %q and not the value", ev.Note, wantObj)
			}

			// More reconciles find the same drift: no write at all, no new event, no new count.
			cached := &testapi.Widget{}
			f.waitCached(cached, "app", "the cache holds the Drifted condition", func() bool {
				return condition(cached.Status.Status, kdagv1alpha1.ConditionDrifted) != nil
			})
			f.calls.Reset()
			for range 2 {
				if err := f.reconcile("app"); err != nil {
					t.Fatalf("reconcile: %v", err)
				}
			}
			if writes := f.objectWrites(); len(writes) != 0 {
				t.Errorf("reconciles of a reported drift wrote %v, want nothing", writes)
			}
			if got := counterValue(t, reg, "kdag_drift_reports_total"); got != 1 {
				t.Errorf("kdag_drift_reports_total = %v, want 1", got)
			}
			if got := counterValue(t, reg, "kdag_drift_repairs_total"); got != 0 {
				t.Errorf("kdag_drift_repairs_total = %v, want 0", got)
			}
			if n := len(f.events(kdagv1alpha1.ReasonDriftReported)); n != 1 {
				t.Errorf("%d DriftReported events, want 1", n)
			}

			// The other writer puts kdag's value back: no drift left.
			f.foreignUpdate(&corev1.ConfigMap{}, "app-config", func(o client.Object) { o.(*corev1.ConfigMap).Data["k"] = "ours" })
			if err := f.reconcile("app"); err != nil {
				t.Fatalf("reconcile: %v", err)
			}
			if c := condition(f.status("app"), kdagv1alpha1.ConditionDrifted); c == nil || c.Status != metav1.ConditionFalse {
				t.Errorf("Drifted condition %+v once the drift is gone, want False", c)
			}
		})
	}
}

// TestDriftPolicy_ReportStillCreatesAndAppliesTheAuthorsChanges: report concerns other writers'
// changes of existing objects only. A missing object is created, and a change of the desired
// object is applied (as a whole: the drift present then is reverted, and said so).
func TestDriftPolicy_ReportStillCreatesAndAppliesTheAuthorsChanges(t *testing.T) {
	f := newFixture(t, widgetRM{readyDeployment: true})
	f.widget("app", testapi.WidgetSpec{MaxReplicas: 3, Data: map[string]string{"k": "v1"}})
	f.annotateWidget("app", map[string]string{kdagv1alpha1.AnnotationDrift: kdagv1alpha1.DriftReport})
	f.settle("app")

	if err := f.cl.Delete(context.Background(), f.get(&corev1.ConfigMap{}, "app-config")); err != nil {
		t.Fatal(err)
	}
	poll.True(t, "the cache sees the ConfigMap deleted", waitTimeout, func(context.Context) bool {
		return apierrors.IsNotFound(f.cached(&corev1.ConfigMap{}, "app-config"))
	})
	f.settle("app")
	if cm := f.get(&corev1.ConfigMap{}, "app-config").(*corev1.ConfigMap); cm.Data["k"] != "v1" {
		t.Fatalf("re-created ConfigMap data %v, want k=v1", cm.Data)
	}

	f.foreignUpdate(&corev1.ConfigMap{}, "app-config", func(o client.Object) { o.(*corev1.ConfigMap).Data["k"] = "theirs" })
	if err := f.reconcile("app"); err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	if cm := f.get(&corev1.ConfigMap{}, "app-config").(*corev1.ConfigMap); cm.Data["k"] != "theirs" {
		t.Fatalf("ConfigMap data %v, want the reported drift left", cm.Data)
	}
	f.updateWidget("app", func(w *testapi.Widget) { w.Spec.Data = map[string]string{"k": "v2"} })
	f.settle("app")
	if cm := f.get(&corev1.ConfigMap{}, "app-config").(*corev1.ConfigMap); cm.Data["k"] != "v2" {
		t.Fatalf("ConfigMap data %v after the author's change, want k=v2", cm.Data)
	}
	ev := f.waitEvent("app", corev1.EventTypeNormal, "DriftRepaired")
	if !strings.Contains(ev.Note, "app-config") {
		t.Errorf("DriftRepaired event note %q does not name app-config", ev.Note)
	}
	if c := condition(f.status("app"), kdagv1alpha1.ConditionDrifted); c == nil || c.Status != metav1.ConditionFalse {
		t.Errorf("Drifted condition %+v, want False once the author's change is applied", c)
	}
}

// TestDriftPolicy_UnknownAnnotationStalls: a kdag.dev/drift value other than repair or report
// stalls the owner, naming the annotation, until it is corrected.
func TestDriftPolicy_UnknownAnnotationStalls(t *testing.T) {
	f := newFixture(t, widgetRM{readyDeployment: true})
	f.widget("app", testapi.WidgetSpec{MaxReplicas: 3})
	f.annotateWidget("app", map[string]string{kdagv1alpha1.AnnotationDrift: "ignore"})
	if err := f.reconcile("app"); !isTerminalErr(err) {
		t.Fatalf("reconcile: err = %v, want a terminal error", err)
	}
	c := condition(f.status("app"), kdagv1alpha1.ConditionStalled)
	if c == nil || c.Reason != kdagv1alpha1.ReasonInvalidDriftPolicy || !strings.Contains(c.Message, kdagv1alpha1.AnnotationDrift) {
		t.Fatalf("Stalled condition %+v, want reason %s naming %s", c, kdagv1alpha1.ReasonInvalidDriftPolicy, kdagv1alpha1.AnnotationDrift)
	}
	if !f.notFound(&corev1.ConfigMap{}, "app-config") {
		t.Error("the graph ran with an invalid drift policy")
	}
	f.annotateWidget("app", map[string]string{kdagv1alpha1.AnnotationDrift: kdagv1alpha1.DriftRepair})
	f.settle("app")
	if !isTrue(f.status("app"), kdagv1alpha1.ConditionReady) {
		t.Errorf("conditions %+v, want Ready=True once the annotation is corrected", f.status("app").Conditions)
	}
}

// scaledRM: a ConfigMap from spec.data and a Deployment reading it, whose spec.replicas
// (spec.replicas of the Widget, 3 by default) kdag sets at create time only: IgnoreFields.
var scaledRM = funcRM{add: func(w *testapi.Widget, b *controller.Graph) error {
	b.Add(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: w.Name + "-config"}, Data: w.Spec.Data})
	b.Add(webDeployment(w, 3), controller.IgnoreFields("spec.replicas"), controller.ReadyWhen(func(client.Object) (bool, error) { return true, nil }))
	return nil
}}

// TestIgnoreFields_ReplicasLeftToAnotherManager is issue 14, part 3: a field the node ignores is
// set on create only. kdag's later applies leave it out without resetting it (the create's value
// is handed to "<field manager>-released" first), another field manager's change of it (an
// autoscaler, "hpa") is neither reverted nor reported, the author's later value of it is not
// applied, and drift of another field is still repaired.
func TestIgnoreFields_ReplicasLeftToAnotherManager(t *testing.T) {
	for _, tc := range []struct {
		name       string
		annotation string
	}{
		{name: "repair"},
		{name: "report", annotation: kdagv1alpha1.DriftReport},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, scaledRM)
			f.widget("app", testapi.WidgetSpec{MaxReplicas: 10, Data: map[string]string{"k": "v1"}})
			if tc.annotation != "" {
				f.annotateWidget("app", map[string]string{kdagv1alpha1.AnnotationDrift: tc.annotation})
			}
			f.settle("app")
			replicas := func() int32 {
				return ptr.Deref(f.get(&appsv1.Deployment{}, "app").(*appsv1.Deployment).Spec.Replicas, 0)
			}
			if got := replicas(); got != 3 {
				t.Fatalf("created with %d replicas, want 3", got)
			}

			// The author's change rolls the Deployment (new dependencies hash): an apply without
			// spec.replicas, which must not reset it to the default of 1.
			f.updateWidget("app", func(w *testapi.Widget) { w.Spec.Data = map[string]string{"k": "v2"} })
			writes := f.settle("app")
			if len(writesTo(writes, "/deployments/app")) == 0 {
				t.Fatalf("writes %v, want the Deployment applied for its new dependencies hash", writes)
			}
			d := f.get(&appsv1.Deployment{}, "app").(*appsv1.Deployment)
			if got := ptr.Deref(d.Spec.Replicas, 0); got != 3 {
				t.Fatalf("after an apply without spec.replicas: %d replicas, want 3 kept", got)
			}
			if !slices.ContainsFunc(d.ManagedFields, func(m metav1.ManagedFieldsEntry) bool {
				return m.Manager == f.fieldManager+apply.ReleasedFieldManagerSuffix
			}) {
				t.Errorf("no managed-fields entry of %s%s holding the released field", f.fieldManager, apply.ReleasedFieldManagerSuffix)
			}

			// The autoscaler scales: kdag neither reverts nor reports it.
			f.update(&appsv1.Deployment{}, "app", func(o client.Object) { o.(*appsv1.Deployment).Spec.Replicas = ptr.To[int32](5) },
				client.FieldOwner("hpa"))
			f.calls.Reset()
			for range 2 {
				if err := f.reconcile("app"); err != nil {
					t.Fatalf("reconcile: %v", err)
				}
			}
			if writes := f.objectWrites(); len(writes) != 0 {
				t.Errorf("reconciles after the autoscaler's change wrote %v, want nothing", writes)
			}
			if got := replicas(); got != 5 {
				t.Errorf("%d replicas, want the autoscaler's 5", got)
			}
			if c := condition(f.status("app"), kdagv1alpha1.ConditionDrifted); c != nil {
				t.Errorf("Drifted condition %+v, want none: an ignored field is not drift", c)
			}

			// The author's value of an ignored field is not applied after the create either.
			f.updateWidget("app", func(w *testapi.Widget) { w.Spec.Replicas = ptr.To[int32](7) })
			f.settle("app")
			if got := replicas(); got != 5 {
				t.Errorf("%d replicas after the author's new value, want the autoscaler's 5", got)
			}

			// Drift of another field is still handled by the policy; replicas stay.
			f.foreignUpdate(&appsv1.Deployment{}, "app", func(o client.Object) {
				o.(*appsv1.Deployment).Spec.Template.Spec.Containers[0].Image = "nginx:other"
			})
			if err := f.reconcile("app"); err != nil {
				t.Fatalf("reconcile: %v", err)
			}
			d = f.get(&appsv1.Deployment{}, "app").(*appsv1.Deployment)
			image := d.Spec.Template.Spec.Containers[0].Image
			if tc.annotation == kdagv1alpha1.DriftReport {
				c := condition(f.status("app"), kdagv1alpha1.ConditionDrifted)
				if image != "nginx:other" || c == nil || c.Status != metav1.ConditionTrue ||
					!strings.Contains(c.Message, ".spec.template.spec.containers[name=web].image") || strings.Contains(c.Message, ".spec.replicas") {
					t.Errorf("report: image %s, Drifted %+v; want the image left and reported, replicas not", image, c)
				}
			} else if image != "nginx:1.27" {
				t.Errorf("image %s, want the drift repaired to nginx:1.27", image)
			}
			if got := ptr.Deref(d.Spec.Replicas, 0); got != 5 {
				t.Errorf("%d replicas after the other field's drift was handled, want 5", got)
			}
		})
	}
}

// TestIgnoreFields_BadPathIsABuildError: a list element cannot be ignored; the owner is Stalled.
func TestIgnoreFields_BadPathIsABuildError(t *testing.T) {
	rm := funcRM{add: func(w *testapi.Widget, b *controller.Graph) error {
		b.Add(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: w.Name}}, controller.IgnoreFields("spec.containers[name=web].image"))
		return nil
	}}
	f := newFixture(t, rm)
	f.widget("app", testapi.WidgetSpec{MaxReplicas: 1})
	if err := f.reconcile("app"); !isTerminalErr(err) {
		t.Fatalf("reconcile: err = %v, want a terminal build error", err)
	}
	if c := condition(f.status("app"), kdagv1alpha1.ConditionStalled); c == nil || !strings.Contains(c.Message, "IgnoreFields") {
		t.Errorf("Stalled condition %+v, want it naming IgnoreFields", c)
	}
}
