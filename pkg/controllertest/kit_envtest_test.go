package controllertest

import (
	"context"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/controller"
	"github.com/kdag-dev/kdag/pkg/testing/poll"
	"github.com/kdag-dev/kdag/pkg/testing/testapi"
)

// configRM builds one ConfigMap "<name>-config" holding the Widget's spec.data.
type configRM struct{}

func (configRM) OwnedTypes() []client.Object { return []client.Object{&corev1.ConfigMap{}} }

func (configRM) AddResources(_ context.Context, w *testapi.Widget, b *controller.Graph) error {
	b.Add(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: w.Name + "-config"}, Data: w.Spec.Data})
	return nil
}

func widget(name string, data map[string]string) *testapi.Widget {
	return &testapi.Widget{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: testapi.WidgetSpec{MaxReplicas: 10, Data: data}}
}

// TestHarness_WaitAppliedThenUpdate: once WaitApplied returns, what kdag applied for the
// owner's generation is on the API server, read without polling; Update writes a new
// generation, and WaitApplied waits for that one.
func TestHarness_WaitAppliedThenUpdate(t *testing.T) {
	h := Start(t, api, controller.For("widgets", configRM{}))
	w := widget("app", map[string]string{"k": "v1"})
	h.Create(w)
	for _, want := range []string{"v1", "v2"} {
		if want == "v2" {
			h.Update(w, func() { w.Spec.Data["k"] = "v2" })
			if w.Generation != 2 {
				t.Fatalf("generation after Update = %d, want 2", w.Generation)
			}
		}
		h.WaitApplied(w)
		if w.Status.ObservedGeneration != w.Generation {
			t.Errorf("WaitApplied returned the owner at observedGeneration %d, generation %d", w.Status.ObservedGeneration, w.Generation)
		}
		cm := Named[corev1.ConfigMap]("app-config")
		if !h.Get(cm) {
			t.Fatal("ConfigMap app-config not applied")
		}
		if diff := cmp.Diff(map[string]string{"k": want}, cm.Data); diff != "" {
			t.Errorf("ConfigMap data once generation %d is applied (-want +got):\n%s", w.Generation, diff)
		}
	}
}

// TestHarness_UpdateRetriesOnConflict: a write by someone else between Update's read and
// write makes the API server refuse it (409); Update reads again and changes the new version.
func TestHarness_UpdateRetriesOnConflict(t *testing.T) {
	h := Start(t, api)
	w := h.Create(widget("app", map[string]string{})).(*testapi.Widget)
	calls := 0
	h.Update(w, func() {
		calls++
		if calls == 1 { // someone else writes first
			other := &testapi.Widget{}
			if err := h.Client.Get(t.Context(), client.ObjectKeyFromObject(w), other); err != nil {
				t.Fatal(err)
			}
			other.Spec.Data = map[string]string{"theirs": "x"}
			if err := h.Client.Update(t.Context(), other); err != nil {
				t.Fatal(err)
			}
		}
		if w.Spec.Data == nil {
			w.Spec.Data = map[string]string{}
		}
		w.Spec.Data["mine"] = "y"
	})
	if calls != 2 {
		t.Errorf("change called %d times, want 2 (once more after the conflict)", calls)
	}
	got := Named[testapi.Widget]("app")
	h.Get(got)
	if diff := cmp.Diff(map[string]string{"theirs": "x", "mine": "y"}, got.Spec.Data); diff != "" {
		t.Errorf("spec.data (-want +got):\n%s", diff)
	}
}

// TestHarness_Faults: a fault the test scripts reaches the manager's request; kdag retries and
// applies the owner all the same, and the log of the harness's manager holds its run.
func TestHarness_Faults(t *testing.T) {
	h := Start(t, api, controller.For("widgets", configRM{}))
	path := "/api/v1/namespaces/" + h.Namespace + "/configmaps/app-config"
	h.Faults.FailNext(http.MethodPatch, path, 1)
	w := h.Create(widget("app", nil))
	h.WaitApplied(w)
	var failed, done int
	for _, r := range h.requests.Requests() {
		if r.Method == http.MethodPatch && r.Path == path {
			switch r.Code {
			case http.StatusInternalServerError:
				failed++
			case http.StatusOK, http.StatusCreated:
				done++
			}
		}
	}
	if failed != 1 || done == 0 {
		t.Errorf("PATCH %s: %d failed, %d done; want 1 failed (the fault), then done", path, failed, done)
	}
	raw, err := os.ReadFile(h.log.Path())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(raw), "Starting Controller") {
		t.Errorf("the manager log %s does not hold the manager's start:\n%s", h.log.Path(), raw)
	}
}

// TestStartManager: the one manager starter of e2e tests runs components as main does; the
// cache is limited to the namespace given.
func TestStartManager(t *testing.T) {
	env := api.Env(t)
	ns := env.Namespace(t)
	m := StartManager(t, env.Config, env.Scheme, []controller.Component{controller.For("widgets", configRM{})}, ManagerOptions{Namespace: ns})
	w := widget("app", map[string]string{"k": "v"})
	w.Namespace = ns
	if err := env.Client.Create(t.Context(), w); err != nil {
		t.Fatal(err)
	}
	poll.True(t, "ConfigMap app-config applied", Timeout, func(ctx context.Context) bool {
		return env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "app-config"}, &corev1.ConfigMap{}) == nil
	})
	if err := m.Stop(); err != nil {
		t.Errorf("Stop: %v", err)
	}
	if err := m.Stop(); err != nil {
		t.Errorf("Stop again: %v", err)
	}
}

// TestDefaulted_AsTheAPIServer: Defaulted fills in what the API server fills in when it
// creates the same object (a server-side dry run), for a typed object (whose zero-valued
// fields without omitempty are sent, so not defaulted) and an unstructured one.
func TestDefaulted_AsTheAPIServer(t *testing.T) {
	env := api.Env(t)
	ns := env.Namespace(t)
	u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"data": map[string]any{"k": "v"}}}}
	u.SetGroupVersionKind(testapi.GroupVersion.WithKind("Widget"))
	u.SetNamespace(ns)
	u.SetName("unstructured")
	for _, obj := range []client.Object{
		&testapi.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "typed"}, Spec: testapi.WidgetSpec{MinReplicas: 1, MaxReplicas: 3}},
		u,
	} {
		got := Defaulted(t, api, obj)
		server := obj.DeepCopyObject().(client.Object)
		if err := env.Client.Create(t.Context(), server, client.DryRunAll); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(spec(t, server), spec(t, got)); diff != "" {
			t.Errorf("%s: spec (-server +Defaulted):\n%s", obj.GetName(), diff)
		}
	}
	if got := spec(t, Defaulted(t, api, u)); got["maxReplicas"] != int64(10) {
		t.Errorf("unstructured Widget without maxReplicas: defaulted to %v, want the CRD's default 10", got["maxReplicas"])
	}
}

func spec(t *testing.T, obj client.Object) map[string]any {
	t.Helper()
	u, err := toUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	s, _, _ := unstructured.NestedMap(u, "spec")
	return s
}

// TestNotApplied: WaitApplied's condition.
func TestNotApplied(t *testing.T) {
	status := func(observed int64, graph *kdagv1alpha1.GraphSummary) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{}}
		u.SetGeneration(2)
		st := map[string]any{"observedGeneration": observed}
		if graph != nil {
			g, err := toUnstructured(graph)
			if err != nil {
				t.Fatal(err)
			}
			st["graph"] = g
		}
		u.Object["status"] = st
		return u
	}
	tests := []struct {
		name string
		u    *unstructured.Unstructured
		want string // in the reason; "" when applied
	}{
		{"an older generation", status(1, &kdagv1alpha1.GraphSummary{Total: 1, Ready: 1}), "observedGeneration 1, generation 2"},
		{"no graph", status(2, nil), "no status.graph"},
		{"a failed node", status(2, &kdagv1alpha1.GraphSummary{Total: 2, Ready: 1, Failed: 1}), "1 of 2 nodes not applied"},
		{"a blocked node", status(2, &kdagv1alpha1.GraphSummary{Total: 2, Ready: 1, Blocked: 1}), "1 of 2 nodes not applied"},
		{"a waiting node was applied", status(2, &kdagv1alpha1.GraphSummary{Total: 2, Ready: 1, Waiting: 1}), ""},
		{"all ready", status(2, &kdagv1alpha1.GraphSummary{Total: 2, Ready: 2}), ""},
	}
	for _, tc := range tests {
		got := notApplied(tc.u)
		if tc.want == "" && got != "" || !strings.Contains(got, tc.want) {
			t.Errorf("%s: notApplied = %q, want %q", tc.name, got, tc.want)
		}
	}
}
