package controller_test

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/testing/testapi"
)

func TestPrune_DisabledComponentDeletedByOwnerUID(t *testing.T) {
	f := newFixture(t, widgetRM{readyDeployment: true})
	f.widget("app", testapi.WidgetSpec{MaxReplicas: 3, Components: []string{"a", "b"}})
	f.settle("app")
	for _, name := range []string{"extra-a", "extra-b"} {
		f.get(&corev1.ConfigMap{}, name)
	}

	// A ConfigMap that the same controller's label selects (so the cache holds it) but that
	// belongs to another owner: pruning must never touch it.
	foreign := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Namespace: f.ns, Name: "foreign",
		Labels: map[string]string{kdagv1alpha1.LabelController: f.name, kdagv1alpha1.LabelManagedBy: "kdag", kdagv1alpha1.LabelOwnerUID: "00000000-0000-0000-0000-000000000000"},
	}}
	if err := f.cl.Create(context.Background(), foreign); err != nil {
		t.Fatalf("create foreign configmap: %v", err)
	}
	f.waitCachedVersion(&corev1.ConfigMap{}, "foreign", foreign.ResourceVersion)

	f.updateWidget("app", func(w *testapi.Widget) { w.Spec.Components = []string{"a"} })
	f.calls.Reset()
	if err := f.reconcile("app"); err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	writes := f.objectWrites()
	wantDelete := "DELETE /api/v1/namespaces/" + f.ns + "/configmaps/extra-b"
	var deletes []string
	for _, w := range writes {
		if strings.HasPrefix(w, "DELETE ") {
			deletes = append(deletes, w)
		}
	}
	if len(deletes) != 1 || deletes[0] != wantDelete {
		t.Errorf("deletes %v, want exactly [%s]", deletes, wantDelete)
	}
	if !f.notFound(&corev1.ConfigMap{}, "extra-b") {
		t.Errorf("ConfigMap extra-b still exists after its component was switched off")
	}
	f.get(&corev1.ConfigMap{}, "extra-a")
	f.get(&corev1.ConfigMap{}, "foreign")
	ev := f.waitEvent("app", corev1.EventTypeNormal, "Pruned")
	if !strings.Contains(ev.Note, "extra-b") {
		t.Errorf("Pruned event note %q does not name extra-b", ev.Note)
	}

	// Reconciling again deletes nothing more.
	f.settle("app")
	f.get(&corev1.ConfigMap{}, "extra-a")
	f.get(&corev1.ConfigMap{}, "foreign")
}

func TestPrune_NotWhileANodeFails(t *testing.T) {
	f := newFixture(t, widgetRM{readyDeployment: true})
	f.widget("app", testapi.WidgetSpec{MaxReplicas: 3, Components: []string{"a", "b"}})
	f.settle("app")

	// The ConfigMap node fails (500 on its apply) in the reconcile that would prune extra-b.
	f.calls.FailNext("PATCH", "/api/v1/namespaces/"+f.ns+"/configmaps/app-config", 1)
	f.updateWidget("app", func(w *testapi.Widget) {
		w.Spec.Components = []string{"a"}
		w.Spec.Data = map[string]string{"k": "changed"} // makes the ConfigMap node apply
	})
	if err := f.reconcile("app"); err == nil || isTerminalErr(err) {
		t.Fatalf("reconcile with a failing node: err = %v, want a transient error", err)
	}
	f.get(&corev1.ConfigMap{}, "extra-b")

	f.settle("app")
	if !f.notFound(&corev1.ConfigMap{}, "extra-b") {
		t.Errorf("ConfigMap extra-b still exists once every node succeeded")
	}
}
