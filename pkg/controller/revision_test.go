package controller_test

import (
	"context"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/controller"
	"github.com/kdag-dev/kdag/pkg/revision"
	"github.com/kdag-dev/kdag/pkg/testing/poll"
	"github.com/kdag-dev/kdag/pkg/testing/testapi"
)

// revisionRM's graph: a ConfigMap with the Widget's data, a Secret whose password is made from
// the Widget's data "index" (its value is in no owner spec), and, with the component "extra", a second ConfigMap.
func revisionRM() funcRM {
	return funcRM{add: func(w *testapi.Widget, b *controller.Graph) error {
		b.Add(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: w.Name + "-config"}, Data: w.Spec.Data})
		b.Add(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: w.Name + "-secret"},
			StringData: map[string]string{"password": "s3cr3t-" + w.Spec.Data["index"]}})
		if slices.Contains(w.Spec.Components, "extra") {
			b.Add(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: w.Name + "-extra"}})
		}
		return nil
	}}
}

// revisionsOf reads the Widget's revisions from the API server, oldest first, decoded.
func (f *fixture) revisionsOf(name string) []*revision.Record {
	f.t.Helper()
	w := f.get(&testapi.Widget{}, name)
	list := &appsv1.ControllerRevisionList{}
	if err := f.cl.List(context.Background(), list, client.InNamespace(f.ns),
		client.MatchingLabels{kdagv1alpha1.LabelOwnerUID: string(w.GetUID())}); err != nil {
		f.t.Fatal(err)
	}
	var out []*revision.Record
	for i := range list.Items {
		cr := &list.Items[i]
		if ref := metav1.GetControllerOf(cr); ref == nil || ref.UID != w.GetUID() {
			f.t.Errorf("revision %s: controller owner reference %v, want the Widget", cr.Name, ref)
		}
		if want := revision.Name("Widget", name, cr.Revision); cr.Name != want {
			f.t.Errorf("revision %d is named %s, want %s", cr.Revision, cr.Name, want)
		}
		if strings.Contains(string(cr.Data.Raw), "s3cr3t") {
			f.t.Errorf("revision %s holds a Secret value: %s", cr.Name, cr.Data.Raw)
		}
		rec, err := revision.Decode(cr)
		if err != nil {
			f.t.Fatal(err)
		}
		out = append(out, rec)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Revision < out[j].Revision })
	return out
}

// nodeChange returns the change of the revision's node of kind and name.
func nodeChange(rec *revision.Record, kind, name string) (revision.NodeChange, bool) {
	for _, n := range rec.Nodes {
		if n.Kind == kind && n.Name == name {
			return n, true
		}
	}
	return revision.NodeChange{}, false
}

// TestRevisions_RecordedOnlyOnChange (issue 33): the first reconcile records revision 1 (every
// object created, the Widget's spec, generation, operator version); reconciles that write
// nothing record nothing and make no request; a spec change records revision 2 with the node
// applied and its changed field paths, a Secret's key named but never its value; a component
// switched off records the pruned object.
func TestRevisions_RecordedOnlyOnChange(t *testing.T) {
	f := newFixture(t, revisionRM(), controller.Options{OperatorVersion: "v9.9.9"})
	f.widget("app", testapi.WidgetSpec{MaxReplicas: 1, Data: map[string]string{"index": "1"},
		Components: []string{"extra"}})
	f.settle("app")
	revs := f.revisionsOf("app")
	if len(revs) != 1 {
		t.Fatalf("after the first deploy: %d revisions, want 1", len(revs))
	}
	first := revs[0]
	if first.Revision != 1 || first.Generation != 1 || first.OperatorVersion != "v9.9.9" || first.Owner.Kind != "Widget" ||
		first.Owner.Name != "app" || first.SpecHash != revision.SpecHash(first.Spec) || first.SpecHash == "" {
		t.Errorf("revision 1 = %+v", first)
	}
	if data, _ := first.Spec["spec"].(map[string]any)["data"].(map[string]any); data["index"] != "1" {
		t.Errorf("revision 1 spec = %v, want the Widget's spec", first.Spec)
	}
	for _, name := range []string{"app-config", "app-secret", "app-extra"} {
		kind := "ConfigMap"
		if name == "app-secret" {
			kind = "Secret"
		}
		if n, ok := nodeChange(first, kind, name); !ok || n.Action != "created" {
			t.Errorf("revision 1: %s %s = %+v, %v; want created", kind, name, n, ok)
		}
	}

	// Settled: nothing written, nothing recorded, no request at all.
	f.calls.Reset()
	for range 3 {
		if err := f.reconcile("app"); err != nil {
			t.Fatal(err)
		}
	}
	if writes, reads := f.calls.snapshot(); len(writes)+len(reads) != 0 {
		t.Errorf("reconciles of a settled owner made writes %v and uncached reads %v, want none", writes, reads)
	}
	if n := len(f.revisionsOf("app")); n != 1 {
		t.Errorf("after no-op reconciles: %d revisions, want 1", n)
	}

	// A change of the spec: revision 2 names the fields each write changed.
	f.updateWidget("app", func(w *testapi.Widget) {
		w.Spec.Data = map[string]string{"index": "2", "new": "x"}
	})
	f.settle("app")
	revs = f.revisionsOf("app")
	if len(revs) != 2 {
		t.Fatalf("after a spec change: %d revisions, want 2", len(revs))
	}
	second := revs[1]
	if second.Revision != 2 || second.Generation != 2 || second.SpecHash == first.SpecHash {
		t.Errorf("revision 2: number %d generation %d hash %s (revision 1's %s)", second.Revision, second.Generation, second.SpecHash, first.SpecHash)
	}
	cm, _ := nodeChange(second, "ConfigMap", "app-config")
	if want := []string{"data.index", "data.new"}; cm.Action != "applied" || !slices.Equal(cm.Fields, want) {
		t.Errorf("revision 2: ConfigMap app-config = %+v, want applied with fields %v", cm, want)
	}
	secret, _ := nodeChange(second, "Secret", "app-secret")
	if secret.Action != "applied" || !slices.Contains(secret.Fields, "data.password") {
		t.Errorf("revision 2: Secret app-secret = %+v, want applied with the field data.password", secret)
	}
	if _, ok := nodeChange(second, "ConfigMap", "app-extra"); ok {
		t.Errorf("revision 2 lists ConfigMap app-extra, which the reconcile did not write: %+v", second.Nodes)
	}

	// A component switched off: the pruned object is recorded.
	f.updateWidget("app", func(w *testapi.Widget) { w.Spec.Components = nil })
	f.settle("app")
	revs = f.revisionsOf("app")
	if len(revs) != 3 {
		t.Fatalf("after a prune: %d revisions, want 3", len(revs))
	}
	if n, ok := nodeChange(revs[2], "ConfigMap", "app-extra"); !ok || n.Action != "pruned" {
		t.Errorf("revision 3: ConfigMap app-extra = %+v, %v; want pruned", n, ok)
	}
}

// TestRevisions_Bounded (issue 33): an owner keeps at most kdag.dev/revision-history-limit
// revisions, the newest, numbered on; 0 deletes them on the next reconcile that writes; a bad
// value keeps the default and says so in a Warning event.
func TestRevisions_Bounded(t *testing.T) {
	f := newFixture(t, revisionRM())
	w := f.widget("app", testapi.WidgetSpec{MaxReplicas: 1, Data: map[string]string{"index": "0"}})
	f.update(w, "app", func(o client.Object) {
		o.SetAnnotations(map[string]string{revision.AnnotationHistoryLimit: "2"})
	})
	f.settle("app")
	for i := 1; i <= 4; i++ {
		f.updateWidget("app", func(w *testapi.Widget) { w.Spec.Data = map[string]string{"index": strconv.Itoa(i)} })
		f.settle("app")
	}
	var numbers []int64
	for _, r := range f.revisionsOf("app") {
		numbers = append(numbers, r.Revision)
	}
	if want := []int64{4, 5}; !slices.Equal(numbers, want) {
		t.Errorf("revisions kept with limit 2: %v, want %v", numbers, want)
	}

	f.update(f.get(&testapi.Widget{}, "app"), "app", func(o client.Object) {
		o.SetAnnotations(map[string]string{revision.AnnotationHistoryLimit: "many"})
	})
	f.updateWidget("app", func(w *testapi.Widget) { w.Spec.Data = map[string]string{"index": "bad"} })
	f.settle("app")
	if n := len(f.revisionsOf("app")); n != 3 {
		t.Errorf("revisions with an invalid limit: %d, want 3 (the default limit keeps them all)", n)
	}
	f.waitEvent("app", corev1.EventTypeWarning, "InvalidRevisionHistoryLimit")

	f.update(f.get(&testapi.Widget{}, "app"), "app", func(o client.Object) {
		o.SetAnnotations(map[string]string{revision.AnnotationHistoryLimit: "0"})
	})
	f.updateWidget("app", func(w *testapi.Widget) { w.Spec.Data = map[string]string{"index": "last"} })
	f.settle("app")
	if n := len(f.revisionsOf("app")); n != 0 {
		t.Errorf("revisions with limit 0: %d, want none", n)
	}
}

// TestRevisions_ListedFromTheOwnerIndex: the reconciler finds an owner's revisions in the cache
// by a lookup in its owner index, not by matching the labels of every owner's revisions in the
// namespace (a scan per recorded revision, owners² over a deploy: BenchmarkScale). The lookup
// returns that owner's revisions of this controller only: neither another owner's nor a
// revision another controller labelled with the owner's UID.
func TestRevisions_ListedFromTheOwnerIndex(t *testing.T) {
	f := newFixture(t, revisionRM())
	for _, name := range []string{"a", "b"} {
		f.widget(name, testapi.WidgetSpec{MaxReplicas: 1, Data: map[string]string{"index": name}})
		f.settle(name)
	}
	a := f.get(&testapi.Widget{}, "a")
	foreign := &appsv1.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "someone-elses", Labels: map[string]string{
			kdagv1alpha1.LabelOwnerUID: string(a.GetUID()), kdagv1alpha1.LabelController: "someone-else"}},
		Revision: 7, Data: runtime.RawExtension{Raw: []byte(`{}`)},
	}
	if err := f.cl.Create(context.Background(), foreign); err != nil {
		t.Fatal(err)
	}
	rec := f.Reconciler(&testapi.Widget{})
	cached, _ := controller.Clients(rec)
	poll.True(t, "the cache holds the other controller's revision", waitTimeout, func(ctx context.Context) bool {
		return cached.Get(ctx, client.ObjectKeyFromObject(foreign), &appsv1.ControllerRevision{}) == nil
	})

	revs, indexed, err := controller.CachedRevisions(context.Background(), rec, a)
	if err != nil {
		t.Fatal(err)
	}
	if !indexed {
		t.Error("the owners' revisions are listed by matching labels, want a lookup in the cache's owner index")
	}
	var names []string
	for _, r := range revs {
		names = append(names, r.Name)
	}
	if want := []string{revision.Name("Widget", "a", 1)}; !slices.Equal(names, want) {
		t.Errorf("Widget a's revisions from the cache: %v, want %v", names, want)
	}

	// The next revision is numbered after the owner's own, not the other controller's 7.
	f.updateWidget("a", func(w *testapi.Widget) { w.Spec.Data = map[string]string{"index": "a2"} })
	f.settle("a")
	list := &appsv1.ControllerRevisionList{}
	if err := f.cl.List(context.Background(), list, client.InNamespace(f.ns), client.MatchingLabels{
		kdagv1alpha1.LabelOwnerUID: string(a.GetUID()), kdagv1alpha1.LabelController: f.name}); err != nil {
		t.Fatal(err)
	}
	var numbers []int64
	for _, r := range list.Items {
		numbers = append(numbers, r.Revision)
	}
	slices.Sort(numbers)
	if want := []int64{1, 2}; !slices.Equal(numbers, want) {
		t.Errorf("Widget a's revisions after a change: %v, want %v", numbers, want)
	}
}

// TestCacheOptions_RevisionsWithoutData: the manager's cache holds kdag's revisions without
// their data and managed fields (the reconciler reads their numbers; the data is the bulk of
// each), and leaves every other kind's objects whole.
func TestCacheOptions_RevisionsWithoutData(t *testing.T) {
	opts := controller.CacheOptions(scheme, controller.For("widgets", revisionRM()))
	var by *cache.ByObject
	for obj, b := range opts.ByObject {
		if _, ok := obj.(*appsv1.ControllerRevision); ok {
			by = &b
		}
	}
	if by == nil || by.Transform == nil {
		t.Fatalf("CacheOptions: ControllerRevision entry %+v, want one with a transform", by)
	}
	managed := []metav1.ManagedFieldsEntry{{Manager: "kdag"}}
	cr := &appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Name: "widget-w-3", ManagedFields: managed},
		Revision: 3, Data: runtime.RawExtension{Raw: []byte(`{"spec":{"data":{"a":"b"}}}`)}}
	got, err := by.Transform(cr)
	if err != nil {
		t.Fatal(err)
	}
	if out := got.(*appsv1.ControllerRevision); out.Data.Raw != nil || out.ManagedFields != nil || out.Revision != 3 || out.Name != "widget-w-3" {
		t.Errorf("cached revision: data %q, managed fields %v, revision %d, name %q; want no data, no managed fields, revision 3, its name",
			out.Data.Raw, out.ManagedFields, out.Revision, out.Name)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{ManagedFields: managed}, Data: map[string]string{"a": "b"}}
	if got, err := by.Transform(cm); err != nil || got.(*corev1.ConfigMap).Data["a"] != "b" || got.(*corev1.ConfigMap).ManagedFields == nil {
		t.Errorf("a ConfigMap through the revisions' transform: %v, %v; want it unchanged", got, err)
	}
}

// TestRevisions_WrittenBesideTheStatus: the revision of a deploy and the owner's status are sent
// together, so that the revision costs no round trip on the owner's way to Ready (issue 32). The
// revision's create is held until the status write is back; were the two sent one after the
// other, the status would never come while it is held.
func TestRevisions_WrittenBesideTheStatus(t *testing.T) {
	f := newFixture(t, revisionRM())
	statusPath := "/apis/testing.kdag.dev/v1alpha1/namespaces/" + f.ns + "/widgets/app/status"
	statusSeen := func() bool {
		for _, r := range f.calls.Requests() {
			if r.Write() && r.String() == "PATCH "+statusPath {
				return true
			}
		}
		return false
	}
	var besideStatus atomic.Bool
	f.calls.AfterNext("POST", "/apis/apps/v1/namespaces/"+f.ns+"/controllerrevisions", func() {
		deadline := time.Now().Add(10 * time.Second)
		for !statusSeen() && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		besideStatus.Store(statusSeen())
	})
	f.widget("app", testapi.WidgetSpec{MaxReplicas: 1, Data: map[string]string{"index": "1"}})
	f.calls.Reset()
	if err := f.reconcile("app"); err != nil {
		t.Fatal(err)
	}
	if !besideStatus.Load() {
		t.Error("the status was written only after the revision: want both sent together")
	}
	// The reconcile ends once both are written.
	if revs := f.revisionsOf("app"); len(revs) != 1 {
		t.Errorf("after the reconcile: %d revisions, want 1", len(revs))
	}
	if !meta.IsStatusConditionTrue(f.status("app").Conditions, kdagv1alpha1.ConditionReady) {
		t.Errorf("status after the deploy: %+v, want Ready", f.status("app").Conditions)
	}
}
