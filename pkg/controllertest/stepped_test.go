package controllertest

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kdag-dev/kdag/pkg/controller"
)

// TestStepped_ReconcilesOnlyWhenAsked: the watch events of a stepped harness reach the
// queue but not the reconciler; Reconcile runs exactly one reconcile on what the cache holds,
// whose writes, reads and events the harness reports.
func TestStepped_ReconcilesOnlyWhenAsked(t *testing.T) {
	h := StartWith(t, api, Options{Stepped: true}, controller.For("widgets", configRM{}))
	w := widget("app", map[string]string{"k": "v1"})
	h.Create(w)
	h.Eventually("the queue handed the owner's creation", func(context.Context) (bool, error) { return h.dropped.Load() > 0, nil })
	cm := Named[corev1.ConfigMap]("app-config")
	if h.Get(cm) {
		t.Fatal("ConfigMap app-config applied before the test asked for a reconcile")
	}

	h.ResetWrites()
	if _, err := h.Reconcile(t.Context(), w); err != nil {
		t.Fatalf("first reconcile: %v", err)
	}
	if !h.Get(cm) || cm.Data["k"] != "v1" {
		t.Fatalf("ConfigMap app-config after the first reconcile: %v, want data k=v1", cm.Data)
	}
	want := []string{"PATCH configmaps/app-config", "PATCH widgets/app/status"}
	if diff := cmp.Diff(want, withoutRevisions(h.Writes())); diff != "" {
		t.Errorf("the first reconcile's writes (-want +got):\n%s", diff)
	}
	created := h.WaitEvent(w, corev1.EventTypeNormal, "Created")
	if created.Regarding.Name != "app" || len(h.Events("Created")) == 0 {
		t.Errorf("Created event %+v, want one about Widget app", created)
	}

	// A change made now is in the cache when Update returns; nothing applies it but Reconcile.
	dropped := h.dropped.Load()
	h.Update(w, func() { w.Spec.Data["k"] = "v2" })
	h.Eventually("the queue handed the owner's change", func(context.Context) (bool, error) { return h.dropped.Load() > dropped, nil })
	if h.Get(cm); cm.Data["k"] != "v1" {
		t.Fatalf("ConfigMap data %v before the second reconcile, want k=v1 still", cm.Data)
	}
	if _, err := h.Reconcile(t.Context(), w); err != nil {
		t.Fatalf("second reconcile: %v", err)
	}
	if h.Get(cm); cm.Data["k"] != "v2" {
		t.Errorf("ConfigMap data %v after the second reconcile, want k=v2", cm.Data)
	}

	// A reconcile with nothing to do reads only the cache; a read of the API server shows.
	h.ResetWrites()
	if _, err := h.Reconcile(t.Context(), w); err != nil {
		t.Fatalf("third reconcile: %v", err)
	}
	if writes, reads := h.Writes(), h.Reads(); len(writes) != 0 || len(reads) != 0 {
		t.Errorf("a reconcile with nothing to do: writes %q, reads %q; want none", writes, reads)
	}
	if err := h.current.Manager.Manager.GetAPIReader().Get(t.Context(), client.ObjectKeyFromObject(cm), &corev1.ConfigMap{}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"GET /api/v1/namespaces/" + h.Namespace + "/configmaps/app-config"}, h.Reads()); diff != "" {
		t.Errorf("reads after one uncached GET (-want +got):\n%s", diff)
	}
}

// TestStepped_ReconcileOnStartFails: a harness that Start started reconciles from its
// queue; asking it for a reconcile is a mistake the test hears of.
func TestStepped_ReconcileOnStartFails(t *testing.T) {
	h := Start(t, api, controller.For("widgets", configRM{}))
	w := h.Create(widget("app", nil))
	ft := &fatalTB{}
	h.t = ft
	func() {
		defer func() { _ = recover() }()
		_, _ = h.Reconcile(t.Context(), w)
	}()
	if !ft.failed {
		t.Error("Reconcile on a harness of Start did not fail the test")
	}
}

// withoutRevisions leaves out the writes of kdag's ControllerRevisions.
func withoutRevisions(writes []string) []string {
	return slices.DeleteFunc(writes, func(w string) bool { return strings.Contains(w, "controllerrevisions") })
}

// fatalTB is a fakeTB whose Fatalf marks it failed and ends the call (a panic the test recovers).
type fatalTB struct{ fakeTB }

func (f *fatalTB) Fatalf(string, ...any) {
	f.failed = true
	panic("Fatalf")
}
