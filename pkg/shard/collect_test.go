package shard

import (
	"context"
	"testing"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
)

// staleLeases is the assigner's cache in TestAssigner_DeletesLongExpiredMemberLeases: it lists
// the Leases as they were when the test read them.
type staleLeases struct {
	client.Reader
	leases coordinationv1.LeaseList
}

func (s staleLeases) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if l, ok := list.(*coordinationv1.LeaseList); ok {
		s.leases.DeepCopyInto(l)
		return nil
	}
	return s.Reader.List(ctx, list, opts...)
}

// TestAssigner_DeletesLongExpiredMemberLeases: a pass of the assigner deletes the member Leases
// expired for more than leaseCollectAfter Lease durations (each its own), and keeps a live one,
// a recently expired one, one renewed on the API server since the assigner's cache read it (the
// delete's resourceVersion precondition), and Leases that are not kdag's member Leases (another name,
// another group, no label, a holder that does not match the name). It looks again when the
// recently expired one becomes old enough.
func TestAssigner_DeletesLongExpiredMemberLeases(t *testing.T) {
	env := api.Env(t)
	ns := env.Namespace(t)
	now := time.Now()
	member := map[string]string{kdagv1alpha1.LabelShardMember: "kdag"}
	lease := func(name, holder string, lbls map[string]string, renewed time.Duration, seconds int32) *coordinationv1.Lease {
		return &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: lbls},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(holder), LeaseDurationSeconds: ptr.To(seconds),
				RenewTime: ptr.To(metav1.NewMicroTime(now.Add(-renewed)))},
		}
	}
	for _, tc := range []struct {
		lease *coordinationv1.Lease
		gone  bool
	}{
		{lease: lease("kdag-shard-live", "live", member, 0, 300)},
		{lease: lease("kdag-shard-recent", "recent", member, 25*time.Second, 15)}, // expired 10 s ago, < 15 s
		{lease: lease("kdag-shard-old", "old", member, 80*time.Second, 15), gone: true},
		{lease: lease("kdag-shard-long", "long", member, 110*time.Second, 60)}, // expired 50 s ago, < 60 s
		{lease: lease("kdag-shard-renewed", "renewed", member, 80*time.Second, 15)},
		{lease: lease("kdag-shard-other", "other", map[string]string{kdagv1alpha1.LabelShardMember: "other"}, 80*time.Second, 15)},
		{lease: lease("kdag-shard-unlabelled", "unlabelled", nil, 80*time.Second, 15)},
		{lease: lease("kdag-shard-mismatch", "someone-else", member, 80*time.Second, 15)},
		{lease: lease("not-a-member", "not-a-member", member, 80*time.Second, 15)},
	} {
		if err := env.Client.Create(t.Context(), tc.lease); err != nil {
			t.Fatal(err)
		}
		defer func() {
			err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(tc.lease), &coordinationv1.Lease{})
			switch {
			case tc.gone && !apierrors.IsNotFound(err):
				t.Errorf("Lease %s: still there (error %v), want it deleted", tc.lease.Name, err)
			case !tc.gone && err != nil:
				t.Errorf("Lease %s: %v, want it kept", tc.lease.Name, err)
			}
		}()
	}
	cached := staleLeases{Reader: env.Client}
	if err := env.Client.List(t.Context(), &cached.leases, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	renewed := &coordinationv1.Lease{}
	if err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "kdag-shard-renewed"}, renewed); err != nil {
		t.Fatal(err)
	}
	renewed.Spec.RenewTime = ptr.To(metav1.NewMicroTime(time.Now()))
	if err := env.Client.Update(t.Context(), renewed); err != nil {
		t.Fatal(err)
	}
	o, err := newOptions([]Option{WithNamespace(ns)})
	if err != nil {
		t.Fatal(err)
	}
	o.now = func() time.Time { return now }
	a := &Assigner{writer: env.Client, reader: env.Client, o: o, log: logr.Discard()}
	// The recently expired Lease is old enough 5 s from now, the long one 10 s from now; the
	// live one expires in 300 s.
	if next := a.pass(t.Context(), cached); next < 5*time.Second || next > 6*time.Second {
		t.Errorf("the pass looks again in %s, want 5s, when kdag-shard-recent may go", next)
	}
}
