package controller_test

import (
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kdag-dev/kdag/pkg/controller"
	"github.com/kdag-dev/kdag/pkg/testing/testapi"
)

// TestRender_RememberedNodesStillFollowChanges (issue 16 item 2): the memory that spares an
// unchanged node its rendering never hides a change: an author that hands the Graph the same
// object pointer every time and edits it in place, a blocker's content that changes, and another
// writer's edit are all applied; a settled owner writes nothing.
func TestRender_RememberedNodesStillFollowChanges(t *testing.T) {
	shared := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "shared"}, Data: map[string]string{"k": "1"}}
	var blockerValue atomic.Value
	blockerValue.Store("a")
	rm := funcRM{add: func(w *testapi.Widget, b *controller.Graph) error {
		blocker := b.Add(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "blocker"}, Data: map[string]string{"v": blockerValue.Load().(string)}})
		b.Add(shared, controller.DependsOn(blocker)) // the same pointer on every reconcile
		return nil
	}}
	f := newFixture(t, rm)
	f.widget("w", testapi.WidgetSpec{})
	f.settle("w")
	if writes := f.settle("w"); len(writes) != 0 {
		t.Fatalf("settled owner wrote %v", writes)
	}
	dependentsHash := func() string {
		return f.get(&corev1.ConfigMap{}, "shared").GetAnnotations()["kdag.dev/dependencies-hash"]
	}
	before := dependentsHash()

	for _, step := range []struct {
		name  string
		edit  func()
		check func() bool
	}{
		{"the author edits the shared object in place", func() { shared.Data["k"] = "2" },
			func() bool { return f.get(&corev1.ConfigMap{}, "shared").(*corev1.ConfigMap).Data["k"] == "2" }},
		{"a blocker's content changes", func() { blockerValue.Store("b") },
			func() bool { return dependentsHash() != before }},
		{"another writer edits the object", func() {
			f.foreignUpdate(&corev1.ConfigMap{}, "shared", func(o client.Object) { o.(*corev1.ConfigMap).Data["k"] = "edited" })
		}, func() bool { return f.get(&corev1.ConfigMap{}, "shared").(*corev1.ConfigMap).Data["k"] == "2" }},
	} {
		step.edit()
		if writes := f.settle("w"); len(writes) == 0 {
			t.Errorf("%s: no write", step.name)
		}
		if !step.check() {
			t.Errorf("%s: not applied", step.name)
		}
	}
}
