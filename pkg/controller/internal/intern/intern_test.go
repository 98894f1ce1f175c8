package intern

import (
	"maps"
	"reflect"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

// child is a ConfigMap as kdag applies it for owner, i-th of its children, with the managed
// fields the API server records for kdag's apply.
func child(owner types.UID, i int) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "apps", Name: "web-" + strconv.Itoa(i), UID: types.UID("00000000-0000-0000-0000-00000000000" + strconv.Itoa(i%10)),
			ResourceVersion: strconv.Itoa(1000 + i),
			Labels: map[string]string{"kdag.dev/controller": "widgets", "kdag.dev/owner-uid": string(owner),
				"app.kubernetes.io/managed-by": "kdag"},
			Annotations: map[string]string{"kdag.dev/desired-hash": "d" + strconv.Itoa(i), "kdag.dev/dependencies-hash": "e3b0c442"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "testing.kdag.dev/v1alpha1", Kind: "Widget", Name: "web",
				UID: owner, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}},
			Finalizers: []string{"kdag.dev/teardown"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kdag", Operation: metav1.ManagedFieldsOperationApply,
				APIVersion: "v1", FieldsType: "FieldsV1",
				FieldsV1: metav1.NewFieldsV1(`{"f:data":{"f:index":{},"f:payload":{}},"f:metadata":{"f:labels":{}}}`)}},
		},
		Data: map[string]string{"index": strconv.Itoa(i), "payload": "some content"},
	}
}

// decoded returns obj as the API server's protobuf decodes it: every string in its own memory.
func decoded(t testing.TB, obj *corev1.ConfigMap) *corev1.ConfigMap {
	t.Helper()
	data, err := obj.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	out := &corev1.ConfigMap{}
	if err := out.Unmarshal(data); err != nil {
		t.Fatal(err)
	}
	return out
}

func same(a, b string) bool { return len(a) == len(b) && unsafe.StringData(a) == unsafe.StringData(b) }

// sameMap reports whether a and b are one map (not two equal ones).
func sameMap(a, b map[string]string) bool {
	return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}

func TestMetadata_SharesRepeatedMetadata(t *testing.T) {
	a, b := decoded(t, child("owner-1", 1)), decoded(t, child("owner-1", 2))
	want := a.DeepCopy()
	in := New()
	for _, cm := range []*corev1.ConfigMap{a, b} {
		out, err := in.Metadata(cm)
		if err != nil || out != any(cm) {
			t.Fatalf("Metadata = %v, %v; want the object itself, no error", out, err)
		}
	}
	if !equality.Semantic.DeepEqual(a, want) {
		t.Fatalf("Metadata changed the object's values:\n got %+v\nwant %+v", a, want)
	}
	key := func(m map[string]string, k string) string {
		for kk := range m {
			if kk == k {
				return kk
			}
		}
		t.Fatalf("no key %q in %v", k, m)
		return ""
	}
	shared := []struct {
		what string
		a, b string
	}{
		{"namespace", a.Namespace, b.Namespace},
		{"label key", key(a.Labels, "kdag.dev/owner-uid"), key(b.Labels, "kdag.dev/owner-uid")},
		{"label value", a.Labels["kdag.dev/owner-uid"], b.Labels["kdag.dev/owner-uid"]},
		{"annotation key", key(a.Annotations, "kdag.dev/desired-hash"), key(b.Annotations, "kdag.dev/desired-hash")},
		{"finalizer", a.Finalizers[0], b.Finalizers[0]},
		{"owner reference UID", string(a.OwnerReferences[0].UID), string(b.OwnerReferences[0].UID)},
		{"owner reference kind", a.OwnerReferences[0].Kind, b.OwnerReferences[0].Kind},
		{"owner reference API version", a.OwnerReferences[0].APIVersion, b.OwnerReferences[0].APIVersion},
		{"field manager", a.ManagedFields[0].Manager, b.ManagedFields[0].Manager},
		{"operation", string(a.ManagedFields[0].Operation), string(b.ManagedFields[0].Operation)},
	}
	for _, s := range shared {
		if !same(s.a, s.b) {
			t.Errorf("%s %q: two objects hold two copies, want one shared", s.what, s.a)
		}
	}
	if !sameMap(a.Labels, b.Labels) {
		t.Errorf("labels %v: two objects hold two maps, want one shared", a.Labels)
	}
	if sameMap(a.Annotations, b.Annotations) {
		t.Errorf("annotations %v and %v: one map, want each object's own", a.Annotations, b.Annotations)
	}
	if !sameFieldSet(a.ManagedFields[0].FieldsV1, b.ManagedFields[0].FieldsV1) {
		t.Errorf("field set %s: two objects hold two copies, want one shared", a.ManagedFields[0].FieldsV1.GetRawString())
	}
	// What differs per object, or is its content, keeps its own memory.
	own := []struct {
		what string
		a, b string
	}{
		{"annotation value", a.Annotations["kdag.dev/dependencies-hash"], b.Annotations["kdag.dev/dependencies-hash"]},
		{"data value", a.Data["payload"], b.Data["payload"]},
	}
	for _, s := range own {
		if same(s.a, s.b) {
			t.Errorf("%s %q: shared between objects, want each object's own", s.what, s.a)
		}
	}
}

// TestMetadata_PassesWhatItCannotRead: objects without a typed ObjectMeta pass unchanged, and
// metadata without what it shares stays as it is.
func TestMetadata_PassesWhatItCannotRead(t *testing.T) {
	u := &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"namespace": "apps", "name": "x"}}}
	tomb := cache.DeletedFinalStateUnknown{Key: "apps/x", Obj: child("o", 1)}
	empty := &corev1.ConfigMap{}
	for _, tc := range []struct {
		name string
		in   any
	}{
		{"unstructured", u},
		{"tombstone", tomb},
		{"nil", nil},
		{"empty metadata", empty},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := New().Metadata(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if !equality.Semantic.DeepEqual(out, tc.in) {
				t.Errorf("Metadata(%v) = %v, want it unchanged", tc.in, out)
			}
		})
	}
	if empty.Labels != nil || empty.Annotations != nil {
		t.Errorf("empty metadata got maps: labels %v, annotations %v", empty.Labels, empty.Annotations)
	}
}

// BenchmarkLiveHeap measures the live heap of a cache's worth of kdag's children (objects
// owners × children decoded from protobuf, as an informer holds them) with and without Metadata:
// B/object is the live heap per cached object after a collection.
func BenchmarkLiveHeap(b *testing.B) {
	const owners, children = 100, 10
	for _, tc := range []struct {
		name   string
		intern bool
	}{{"intern=false", false}, {"intern=true", true}} {
		b.Run("objects=1000/"+tc.name, func(b *testing.B) {
			var perObject float64
			for range b.N {
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				objs := make([]*corev1.ConfigMap, 0, owners*children)
				in := New()
				for o := range owners {
					uid := types.UID("7d1f7b8e-2d0c-4b8e-9a51-0000000" + strconv.Itoa(10000+o))
					for i := range children {
						cm := decoded(b, child(uid, i))
						if tc.intern {
							if _, err := in.Metadata(cm); err != nil {
								b.Fatal(err)
							}
						}
						objs = append(objs, cm)
					}
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
				perObject = float64(after.HeapAlloc-before.HeapAlloc) / float64(len(objs))
				runtime.KeepAlive(objs)
			}
			b.ReportMetric(perObject, "B/object")
		})
	}
}

// TestMetadata_SharesOnlyEqualLabels: a label map is shared between objects whose labels are
// equal, never between objects whose labels differ (another owner, one more label, one value
// changed, the same pairs in another map), and the shared map keeps every object's values.
func TestMetadata_SharesOnlyEqualLabels(t *testing.T) {
	in := New()
	labelled := func(l map[string]string) *corev1.ConfigMap {
		cm := decoded(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "x", Labels: l}})
		if _, err := in.Metadata(cm); err != nil {
			t.Fatal(err)
		}
		return cm
	}
	base := map[string]string{"kdag.dev/controller": "widgets", "kdag.dev/owner-uid": "owner-1"}
	first := labelled(maps.Clone(base))
	for _, tc := range []struct {
		name   string
		labels map[string]string
		shared bool
	}{
		{"equal labels", maps.Clone(base), true},
		{"another owner", map[string]string{"kdag.dev/controller": "widgets", "kdag.dev/owner-uid": "owner-2"}, false},
		{"one label more", map[string]string{"kdag.dev/controller": "widgets", "kdag.dev/owner-uid": "owner-1", "tier": "db"}, false},
		{"one label less", map[string]string{"kdag.dev/controller": "widgets"}, false},
		// The pairs' hashes are summed: swapped values must not give the same map.
		{"values swapped", map[string]string{"kdag.dev/controller": "owner-1", "kdag.dev/owner-uid": "widgets"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := maps.Clone(tc.labels)
			cm := labelled(tc.labels)
			if got := sameMap(cm.Labels, first.Labels); got != tc.shared {
				t.Errorf("labels %v shared with %v: %t, want %t", cm.Labels, first.Labels, got, tc.shared)
			}
			if !maps.Equal(cm.Labels, want) {
				t.Errorf("labels = %v, want %v", cm.Labels, want)
			}
		})
	}
	if !maps.Equal(first.Labels, base) {
		t.Errorf("the first object's labels became %v, want %v", first.Labels, base)
	}
}

// TestMetadata_RemembersRecentLabelsOnly: an Interner holds at most recentLabelSets label maps
// of its own; the oldest goes first, and the next object with its labels gets a new map.
func TestMetadata_RemembersRecentLabelsOnly(t *testing.T) {
	in := New()
	labels := func(i int) *corev1.ConfigMap {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"kdag.dev/owner-uid": "owner-" + strconv.Itoa(i)}}}
		if _, err := in.Metadata(cm); err != nil {
			t.Fatal(err)
		}
		return cm
	}
	first := labels(0)
	for i := 1; i < 2*recentLabelSets; i++ {
		labels(i)
	}
	if n := len(in.labels); n > recentLabelSets {
		t.Errorf("the Interner holds %d label maps, want at most %d", n, recentLabelSets)
	}
	if again := labels(0); sameMap(again.Labels, first.Labels) {
		t.Errorf("labels %v shared after %d others came: want a new map once forgotten", again.Labels, 2*recentLabelSets)
	}
	// The most recent ones are still shared.
	last := 2*recentLabelSets - 1
	if a, b := labels(last), labels(last); !sameMap(a.Labels, b.Labels) {
		t.Errorf("labels %v of the last object: not shared", a.Labels)
	}
}

// TestMetadata_SharesLabelsAcrossInformers: the transforms of several informers run at once on
// one Interner (run with -race); objects with equal labels end with one map all the same, each
// equal to what the object came with.
func TestMetadata_SharesLabelsAcrossInformers(t *testing.T) {
	in := New()
	const informers, objects, owners = 4, 50, 3
	got := make([][]*corev1.ConfigMap, informers)
	var wg sync.WaitGroup
	for w := range informers {
		wg.Go(func() {
			for i := range objects {
				cm := decoded(t, child(types.UID("owner-"+strconv.Itoa(i%owners)), i))
				if _, err := in.Metadata(cm); err != nil {
					t.Error(err)
					return
				}
				got[w] = append(got[w], cm)
			}
		})
	}
	wg.Wait()
	first := map[string]map[string]string{}
	for _, cms := range got {
		for _, cm := range cms {
			uid := cm.Labels["kdag.dev/owner-uid"]
			if want := child(types.UID(uid), 0).Labels; !maps.Equal(cm.Labels, want) {
				t.Fatalf("labels = %v, want %v", cm.Labels, want)
			}
			if f, ok := first[uid]; !ok {
				first[uid] = cm.Labels
			} else if !sameMap(f, cm.Labels) {
				t.Errorf("two objects of owner %s hold two label maps, want one shared", uid)
			}
		}
	}
	if len(first) != owners {
		t.Errorf("%d owners' label sets, want %d", len(first), owners)
	}
}
