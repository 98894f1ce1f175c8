package shard

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
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
		shard    = kdagv1alpha1.LabelShard
		assigned = kdagv1alpha1.AnnotationShardAssigned
		next     = kdagv1alpha1.AnnotationShardNext
	)
	now := metav1.Now()
	for _, tc := range []struct {
		name        string
		labels      map[string]string
		annotations map[string]string
		deleting    bool
		want        *move // nil: left alone
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
			labels: map[string]string{kdagv1alpha1.LabelController: "widgets"}},
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
			got, ok := decide(owner, ring, nil)
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
		if mv, ok := decide(o, Ring{}, nil); ok {
			t.Errorf("with no live member, decide moved owner %+v: %+v", o, mv)
		}
	}
}
