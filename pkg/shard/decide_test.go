package shard

import (
	"cmp"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/testing/testapi"
)

// TestDecide: what the assigner writes to one owner, given its metadata and the live members.
func TestDecide(t *testing.T) {
	ring := NewRing("r-a", "r-b", "r-c")
	// pick finds an owner name whose member is want and returns it.
	pick := func(want string) string {
		for i := range 1000 {
			name := "w-" + string(rune('a'+i%26)) + string(rune('a'+i/26%26))
			if ring.Owner("ns/"+name) == want {
				return name
			}
		}
		t.Fatalf("no owner name for %s", want)
		return ""
	}
	name := pick("r-a") // its member is r-a
	const (
		ctl      = kdagv1alpha1.LabelController
		shard    = kdagv1alpha1.LabelShard
		assigned = kdagv1alpha1.AnnotationShardAssigned
		next     = kdagv1alpha1.AnnotationShardNext
	)
	now := metav1.Now()
	// dynParent is a live parent that the assigner gave to shard.
	dynParent := func(shard string) *metav1.ObjectMeta {
		return &metav1.ObjectMeta{Namespace: "ns", Name: "parent", Labels: map[string]string{kdagv1alpha1.LabelShard: shard},
			Annotations: map[string]string{assigned: shard}}
	}
	for _, tc := range []struct {
		name        string
		labels      map[string]string
		annotations map[string]string
		deleting    bool
		// parent is what the parent lookup returns for a child owner (nil: none, an orphan);
		// parentUnknown makes it say that it cannot tell.
		parent        *metav1.ObjectMeta
		parentUnknown bool
		want          *move // nil: left alone
	}{
		{name: "no label: labelled with its member", want: &move{kind: moveLabel, to: "r-a"}},
		{name: "no label, an assignment left from before: labelled",
			annotations: map[string]string{assigned: "r-x"}, want: &move{kind: moveLabel, to: "r-a"}},
		{name: "with its member: nothing",
			labels: map[string]string{shard: "r-a"}, annotations: map[string]string{assigned: "r-a"}},
		{name: "with a live replica that is not its member: asked to hand over",
			labels: map[string]string{shard: "r-b"}, annotations: map[string]string{assigned: "r-b"},
			want: &move{kind: moveAsk, from: "r-b", to: "r-a"}},
		{name: "already asked: nothing more",
			labels: map[string]string{shard: "r-b"}, annotations: map[string]string{assigned: "r-b", next: "r-a"}},
		{name: "asked for another shard that has left: asked again for its member",
			labels: map[string]string{shard: "r-b"}, annotations: map[string]string{assigned: "r-b", next: "r-x"},
			want: &move{kind: moveAsk, from: "r-b", to: "r-a"}},
		{name: "with a dead replica: relabelled directly",
			labels: map[string]string{shard: "r-x"}, annotations: map[string]string{assigned: "r-x"},
			want: &move{kind: moveLabel, from: "r-x", to: "r-a"}},
		{name: "with a dead replica that was asked to hand over: relabelled directly",
			labels: map[string]string{shard: "r-x"}, annotations: map[string]string{assigned: "r-x", next: "r-b"},
			want: &move{kind: moveLabel, from: "r-x", to: "r-a"}},
		{name: "back with its member while asked to move: the request withdrawn",
			labels: map[string]string{shard: "r-a"}, annotations: map[string]string{assigned: "r-a", next: "r-b"},
			want: &move{kind: moveWithdraw, from: "r-a", to: "r-a"}},
		{name: "a static shard: left alone", labels: map[string]string{shard: "eu"}},
		{name: "a static shard that is a live replica's name: left alone", labels: map[string]string{shard: "r-b"}},
		{name: "relabelled by a user: now static, left alone",
			labels: map[string]string{shard: "eu"}, annotations: map[string]string{assigned: "r-b"}},
		{name: "an empty label: static, left alone", labels: map[string]string{shard: ""}},
		{name: "a child owner: its parent's apply sets its shard",
			labels: map[string]string{kdagv1alpha1.LabelController: "widgets"}, parent: dynParent("r-b")},
		{name: "a child owner of a dead replica whose parent lives: left to the parent's apply",
			labels: map[string]string{ctl: "widgets", shard: "r-x"}, parent: dynParent("r-x")},
		{name: "a child owner whose parent the lookup cannot tell: left alone",
			labels: map[string]string{ctl: "widgets", shard: "r-x"}, parentUnknown: true},
		{name: "an orphaned child owner of a dead replica: relabelled as a dynamic owner",
			labels: map[string]string{ctl: "widgets", shard: "r-x"}, want: &move{kind: moveLabel, from: "r-x", to: "r-a"}},
		{name: "an orphaned child owner of a live replica that is not its member: asked to hand over",
			labels: map[string]string{ctl: "widgets", shard: "r-b"}, want: &move{kind: moveAsk, from: "r-b", to: "r-a"}},
		{name: "an orphaned child owner with its member: nothing",
			labels: map[string]string{ctl: "widgets", shard: "r-a"}},
		{name: "an orphaned child owner without a label: labelled",
			labels: map[string]string{ctl: "widgets"}, want: &move{kind: moveLabel, to: "r-a"}},
		{name: "an orphaned child owner a user relabelled after the assigner: static, left alone",
			labels: map[string]string{ctl: "widgets", shard: "eu"}, annotations: map[string]string{assigned: "r-b"}},
		{name: "an orphaned child owner with an empty label: static, left alone",
			labels: map[string]string{ctl: "widgets", shard: ""}},
		{name: "a child owner being deleted, of a dead replica, its dynamic parent alive: relabelled, so that it is torn down",
			deleting: true, labels: map[string]string{ctl: "widgets", shard: "r-x"}, parent: dynParent("r-x"),
			want: &move{kind: moveLabel, from: "r-x", to: "r-a"}},
		{name: "a child owner being deleted, of a dead replica, its parent moved on: relabelled",
			deleting: true, labels: map[string]string{ctl: "widgets", shard: "r-x"}, parent: dynParent("r-b"),
			want: &move{kind: moveLabel, from: "r-x", to: "r-a"}},
		{name: "a child owner being deleted, of a dead replica, moved by the assigner once: relabelled",
			deleting: true, labels: map[string]string{ctl: "widgets", shard: "r-x"}, annotations: map[string]string{assigned: "r-y"},
			parent: dynParent("r-x"), want: &move{kind: moveLabel, from: "r-x", to: "r-a"}},
		{name: "a child owner being deleted, of a live replica: left to that replica",
			deleting: true, labels: map[string]string{ctl: "widgets", shard: "r-b"}, parent: dynParent("r-b")},
		{name: "a child owner being deleted, its parent statically sharded: left alone",
			deleting: true, labels: map[string]string{ctl: "widgets", shard: "eu"},
			parent: &metav1.ObjectMeta{Name: "parent", Labels: map[string]string{shard: "eu"}}},
		{name: "an orphaned child owner being deleted, of a dead replica: relabelled",
			deleting: true, labels: map[string]string{ctl: "widgets", shard: "r-x"}, want: &move{kind: moveLabel, from: "r-x", to: "r-a"}},
		{name: "being deleted, with its member: its replica tears it down", deleting: true,
			labels: map[string]string{shard: "r-a"}, annotations: map[string]string{assigned: "r-a"}},
		{name: "being deleted, with a live replica that is not its member: that replica tears it down, no hand-over asked",
			deleting: true, labels: map[string]string{shard: "r-b"}, annotations: map[string]string{assigned: "r-b"}},
		{name: "being deleted, asked to hand over before: left as it is (a deleting owner is never handed over)",
			deleting: true, labels: map[string]string{shard: "r-b"}, annotations: map[string]string{assigned: "r-b", next: "r-c"}},
		{name: "being deleted, with a dead replica: relabelled for its member, which tears it down", deleting: true,
			labels: map[string]string{shard: "r-x"}, annotations: map[string]string{assigned: "r-x"},
			want: &move{kind: moveLabel, from: "r-x", to: "r-a"}},
		{name: "being deleted, with a dead replica that was asked to hand over: relabelled", deleting: true,
			labels: map[string]string{shard: "r-x"}, annotations: map[string]string{assigned: "r-x", next: "r-b"},
			want: &move{kind: moveLabel, from: "r-x", to: "r-a"}},
		{name: "being deleted, no label: labelled for its member, which tears it down", deleting: true,
			want: &move{kind: moveLabel, to: "r-a"}},
		{name: "being deleted, a static shard: left alone", deleting: true, labels: map[string]string{shard: "eu"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			owner := &metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: tc.labels, Annotations: tc.annotations}
			if tc.deleting {
				owner.DeletionTimestamp = &now
			}
			lookups := 0
			parents := func(child metav1.Object) (metav1.Object, bool) {
				lookups++
				if tc.parent == nil { // a nil *ObjectMeta in a metav1.Object is not nil
					return nil, !tc.parentUnknown
				}
				return tc.parent, !tc.parentUnknown
			}
			got, ok := decide(owner, ring, parents)
			if _, child := tc.labels[ctl]; !child && lookups > 0 {
				t.Errorf("decide looked up the parent of a top-level owner")
			}
			switch {
			case tc.want == nil && ok:
				t.Errorf("decide = %+v, want the owner left alone", got)
			case tc.want != nil && !ok:
				t.Errorf("decide left the owner alone, want %+v", *tc.want)
			case tc.want != nil && got != *tc.want:
				t.Errorf("decide = %+v, want %+v", got, *tc.want)
			}
		})
	}
	for _, o := range []*metav1.ObjectMeta{
		{Namespace: "ns", Name: name},
		{Namespace: "ns", Name: name, Labels: map[string]string{shard: "r-x"}, Annotations: map[string]string{assigned: "r-x"},
			DeletionTimestamp: &now},
	} {
		if mv, ok := decide(o, Ring{}, func(metav1.Object) (metav1.Object, bool) { return nil, true }); ok {
			t.Errorf("with no live member, decide moved owner %+v: %+v", o, mv)
		}
	}
}

// TestParents: the parent lookup of a pass finds a child owner's parent among the owners the
// assigner's cache holds by the child's kdag.dev/controller and kdag.dev/owner-uid labels, and
// takes a child for an orphan only once it is older than the Lease duration.
func TestParents(t *testing.T) {
	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	widget := testapi.GroupVersion.WithKind("Widget")
	a := &Assigner{controllers: map[string]schema.GroupVersionKind{"widgets": widget}, o: options{leaseDuration: 15 * time.Second}}
	parent := metadataOf(widget)
	parent.Namespace, parent.Name, parent.UID = "ns", "parent", "p-1"
	other := metadataOf(schema.GroupVersionKind{Group: "other.example.com", Version: "v1", Kind: "Gadget"})
	other.Namespace, other.Name, other.UID = "ns", "gadget", "g-1"
	owners := map[types.UID]*metav1.PartialObjectMetadata{parent.UID: parent, other.UID: other}
	const (
		ctl = kdagv1alpha1.LabelController
		uid = kdagv1alpha1.LabelOwnerUID
	)
	for _, tc := range []struct {
		name      string
		labels    map[string]string
		age       time.Duration
		want      *metav1.PartialObjectMetadata // nil: none
		wantKnown bool
		wantNext  time.Duration // the pass's next look, from an hour; 0: not lowered
	}{
		{name: "its parent is held", labels: map[string]string{ctl: "widgets", uid: "p-1"}, age: time.Hour,
			want: parent, wantKnown: true},
		{name: "a young child's parent is held", labels: map[string]string{ctl: "widgets", uid: "p-1"}, age: time.Second,
			want: parent, wantKnown: true},
		{name: "its parent is gone: an orphan", labels: map[string]string{ctl: "widgets", uid: "p-gone"}, age: time.Minute,
			wantKnown: true},
		{name: "its parent is not held yet, and the child is young: cannot tell, looked at again when it is old enough",
			labels: map[string]string{ctl: "widgets", uid: "p-gone"}, age: 5 * time.Second, wantNext: 10 * time.Second},
		{name: "the UID is of an owner of another kind: an orphan", labels: map[string]string{ctl: "widgets", uid: "g-1"},
			age: time.Hour, wantKnown: true},
		{name: "a controller the assigner does not know: cannot tell", labels: map[string]string{ctl: "gadgets", uid: "g-1"},
			age: time.Hour},
		{name: "no owner UID label: cannot tell", labels: map[string]string{ctl: "widgets"}, age: time.Hour},
	} {
		t.Run(tc.name, func(t *testing.T) {
			next := time.Hour
			child := &metav1.ObjectMeta{Namespace: "ns", Name: "child", Labels: tc.labels,
				CreationTimestamp: metav1.NewTime(now.Add(-tc.age))}
			got, known := a.parents(owners, now, &next)(child)
			if known != tc.wantKnown {
				t.Errorf("known = %v, want %v", known, tc.wantKnown)
			}
			switch {
			case tc.want == nil && got != nil:
				t.Errorf("parent = %s/%s, want none", got.GetNamespace(), got.GetName())
			case tc.want != nil && got != metav1.Object(tc.want):
				t.Errorf("parent = %v, want %s/%s", got, tc.want.Namespace, tc.want.Name)
			}
			if want := cmp.Or(tc.wantNext, time.Hour); next < want || next > want+time.Second {
				t.Errorf("next look in %s, want %s", next, want)
			}
		})
	}
}
