package controller_test

import (
	"slices"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/controller"
	"github.com/kdag-dev/kdag/pkg/testing/requests"
	"github.com/kdag-dev/kdag/pkg/testing/testapi"
)

// besideRM: a ConfigMap "<name>-config", owned by reference, and a kept ConfigMap
// "<name>-kept", which only kdag can orphan when the owner goes: the owner needs kdag's
// finalizer before the kept one exists, not before the other.
var besideRM = funcRM{add: func(w *testapi.Widget, b *controller.Graph) error {
	b.Add(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: w.Name + "-config"}})
	b.Add(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: w.Name + "-kept"}}, controller.Keep())
	return nil
}}

// TestFinalizer_WrittenBesideTheFirstObjects (issue 32): on a first deploy the owner's finalizer
// is written while the graph runs. The object the garbage collector deletes with the owner is
// applied while the finalizer's write is still on its way; the kept object, which needs the
// finalizer, only once the finalizer is in place. A failed finalizer write creates nothing that
// needs it and fails the reconcile, which the next one repairs.
func TestFinalizer_WrittenBesideTheFirstObjects(t *testing.T) {
	t.Run("written beside", func(t *testing.T) {
		f := newFixture(t, besideRM)
		widgetPath := "/apis/testing.kdag.dev/v1alpha1/namespaces/" + f.ns + "/widgets/app"
		configPath := "/api/v1/namespaces/" + f.ns + "/configmaps/app-config"
		keptPath := "/api/v1/namespaces/" + f.ns + "/configmaps/app-kept"
		seen := func(path string) bool {
			return slices.ContainsFunc(f.calls.Requests(), func(r requests.Request) bool { return r.String() == "PATCH "+path })
		}
		var configBeside, keptBefore atomic.Bool
		// Hold the finalizer's response until the owned ConfigMap's apply has come (10 s at most).
		f.calls.AfterNext("PATCH", widgetPath, func() {
			deadline := time.Now().Add(10 * time.Second)
			for !seen(configPath) && time.Now().Before(deadline) {
				time.Sleep(5 * time.Millisecond)
			}
			configBeside.Store(seen(configPath))
			keptBefore.Store(seen(keptPath))
		})
		f.widget("app", testapi.WidgetSpec{MaxReplicas: 1})
		f.calls.Reset()
		if err := f.reconcile("app"); err != nil {
			t.Fatal(err)
		}
		if !configBeside.Load() {
			t.Error("ConfigMap app-config was applied only after the owner's finalizer: want it applied while the finalizer is written")
		}
		if keptBefore.Load() {
			t.Error("kept ConfigMap app-kept was applied before the owner held kdag's finalizer")
		}
		if got := f.get(&testapi.Widget{}, "app"); !controllerutil.ContainsFinalizer(got, kdagv1alpha1.Finalizer) {
			t.Errorf("owner finalizers %v, want %s", got.GetFinalizers(), kdagv1alpha1.Finalizer)
		}
		for _, name := range []string{"app-config", "app-kept"} {
			if f.notFound(&corev1.ConfigMap{}, name) {
				t.Errorf("ConfigMap %s was not created", name)
			}
		}
	})
	t.Run("finalizer refused", func(t *testing.T) {
		f := newFixture(t, besideRM)
		f.widget("app", testapi.WidgetSpec{MaxReplicas: 1})
		f.calls.FailNextWith("PATCH", "/apis/testing.kdag.dev/v1alpha1/namespaces/"+f.ns+"/widgets/app", 1, 500, metav1.StatusReasonInternalError)
		if err := f.reconcile("app"); err == nil {
			t.Error("the reconcile whose finalizer write failed returned no error")
		}
		if !f.notFound(&corev1.ConfigMap{}, "app-kept") {
			t.Error("kept ConfigMap app-kept was created although the owner's finalizer could not be added")
		}
		if got := f.get(&testapi.Widget{}, "app"); controllerutil.ContainsFinalizer(got, kdagv1alpha1.Finalizer) {
			t.Errorf("owner finalizers %v after the refused write", got.GetFinalizers())
		}
		f.settle("app")
		if got := f.get(&testapi.Widget{}, "app"); !controllerutil.ContainsFinalizer(got, kdagv1alpha1.Finalizer) {
			t.Errorf("owner finalizers %v after the next reconciles, want %s", got.GetFinalizers(), kdagv1alpha1.Finalizer)
		}
		if f.notFound(&corev1.ConfigMap{}, "app-kept") {
			t.Error("kept ConfigMap app-kept was not created once the finalizer was in place")
		}
		if !isTrue(f.status("app"), kdagv1alpha1.ConditionReady) {
			t.Errorf("owner not Ready after the next reconciles: %+v", f.status("app").Conditions)
		}
	})
}
