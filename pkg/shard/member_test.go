package shard

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pkg/errors"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/testing/poll"
)

// startMember runs a Member of replica "r-a" with a 1 s Lease on cs until the test ends; the
// returned channel receives Start's result.
func startMember(t *testing.T, cs *fake.Clientset) (stop func(), done <-chan error) {
	t.Helper()
	m, err := NewMember("r-a", cs.CoordinationV1(), WithNamespace("ops"), WithLeaseDuration(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	errc, finished := make(chan error, 1), make(chan struct{})
	go func() { defer close(finished); errc <- m.Start(ctx) }()
	t.Cleanup(func() { cancel(); <-finished })
	return cancel, errc
}

// getLease reads the Lease ops/kdag-shard-r-a.
func getLease(ctx context.Context, cs *fake.Clientset) (*coordinationv1.Lease, error) {
	return cs.CoordinationV1().Leases("ops").Get(ctx, "kdag-shard-r-a", metav1.GetOptions{})
}

// TestMember_RenewsItsLease: the Lease "<group>-shard-<id>" is created with the member label,
// the holder and the duration, and renewed while the member runs; stopping is not an error.
func TestMember_RenewsItsLease(t *testing.T) {
	cs := fake.NewClientset()
	stop, done := startMember(t, cs)
	var first time.Time
	poll.Until(t, "Lease kdag-shard-r-a renewed twice", 5*time.Second, func(ctx context.Context) string {
		l, err := getLease(ctx, cs)
		if err != nil {
			return err.Error()
		}
		if l.Labels[kdagv1alpha1.LabelShardMember] != "kdag" || l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != "r-a" ||
			l.Spec.LeaseDurationSeconds == nil || *l.Spec.LeaseDurationSeconds != 1 || l.Spec.RenewTime == nil {
			return "Lease not as expected: " + l.String()
		}
		if first.IsZero() {
			first = l.Spec.RenewTime.Time
		}
		if !l.Spec.RenewTime.After(first) {
			return "not renewed since " + first.String()
		}
		return ""
	})
	stop()
	if err := <-done; err != nil {
		t.Errorf("Start returned %v after its context ended, want nil", err)
	}
}

// TestMember_TakesBackItsDeletedLease: a member whose Lease was deleted (the assigner deletes
// long-expired Leases) creates it again at its next renewal.
func TestMember_TakesBackItsDeletedLease(t *testing.T) {
	cs := fake.NewClientset()
	startMember(t, cs)
	var uid string
	poll.Until(t, "Lease kdag-shard-r-a created", 5*time.Second, func(ctx context.Context) string {
		l, err := getLease(ctx, cs)
		if err != nil {
			return err.Error()
		}
		l.UID = "first"
		if _, err := cs.CoordinationV1().Leases("ops").Update(ctx, l, metav1.UpdateOptions{}); err != nil {
			return err.Error()
		}
		uid = string(l.UID)
		return ""
	})
	if err := cs.CoordinationV1().Leases("ops").Delete(t.Context(), "kdag-shard-r-a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "Lease kdag-shard-r-a created again", 5*time.Second, func(ctx context.Context) string {
		l, err := getLease(ctx, cs)
		if err != nil {
			return err.Error()
		}
		if string(l.UID) == uid || l.Labels[kdagv1alpha1.LabelShardMember] != "kdag" {
			return "not created again: " + l.String()
		}
		return ""
	})
}

// TestMember_FencesItself: a member whose renewals fail stops (Start returns an error naming the
// Lease) within the renew deadline, two thirds of the Lease duration, and before the Lease
// expires, so that a manager it runs in stops reconciling before its owners can move.
func TestMember_FencesItself(t *testing.T) {
	var failing atomic.Bool
	var failedAt atomic.Int64
	cs := fake.NewClientset()
	cs.PrependReactor("update", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		if failing.Load() {
			failedAt.CompareAndSwap(0, time.Now().UnixNano())
			return true, nil, errors.New("injected: the API server is unreachable")
		}
		return false, nil, nil
	})
	_, done := startMember(t, cs)
	var renewed time.Time
	poll.Until(t, "Lease renewed once", 5*time.Second, func(ctx context.Context) string {
		l, err := getLease(ctx, cs)
		if err != nil {
			return err.Error()
		}
		if l.Spec.AcquireTime == nil || l.Spec.RenewTime == nil || !l.Spec.RenewTime.After(l.Spec.AcquireTime.Time) {
			return "not renewed yet"
		}
		renewed = l.Spec.RenewTime.Time
		return ""
	})
	failing.Store(true)
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "kdag-shard-r-a") || !strings.Contains(err.Error(), "not renewed") {
			t.Fatalf("Start returned %v, want an error saying the Lease kdag-shard-r-a was not renewed", err)
		}
		// The last renewal that landed may be later than the one seen above.
		l, err := getLease(t.Context(), cs)
		if err != nil {
			t.Fatal(err)
		}
		if stoppedAt, expires := time.Now(), expiry(l); !stoppedAt.Before(expires) {
			t.Errorf("the member stopped at %s, after its Lease expired at %s", stoppedAt, expires)
		}
		if failedAt.Load() == 0 {
			t.Errorf("no renewal failed, yet the member stopped")
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("the member still runs 5s after its renewals started failing (last renewal seen %s)", renewed)
	}
}

// TestMember_FencesWithoutALease: a member that cannot create its Lease at all stops within the
// renew deadline of its start, rather than reconcile as a replica no one counts.
func TestMember_FencesWithoutALease(t *testing.T) {
	cs := fake.NewClientset()
	cs.PrependReactor("create", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("injected: the API server is unreachable")
	})
	started := time.Now()
	_, done := startMember(t, cs)
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "not held") {
			t.Fatalf("Start returned %v, want an error saying the Lease was not held", err)
		}
		if d := time.Since(started); d >= time.Second {
			t.Errorf("the member stopped %s after its start, not within its Lease duration (1s)", d)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the member still runs 5s after its start without a Lease")
	}
}

// TestNewMember_Refuses: what cannot work is refused before anything runs, with why.
func TestNewMember_Refuses(t *testing.T) {
	leases := fake.NewClientset().CoordinationV1()
	for _, tc := range []struct {
		name, id string
		opts     []Option
		want     string
	}{
		{"no namespace", "r-a", nil, "no namespace"},
		{"no ID", "", []Option{WithNamespace("ops")}, "needs an ID"},
		{"an ID that is no shard name", "Pod_1", []Option{WithNamespace("ops")}, "not a valid shard name"},
		{"a Lease duration in fractions of seconds", "r-a", []Option{WithNamespace("ops"), WithLeaseDuration(1500 * time.Millisecond)}, "whole number of seconds"},
		{"an invalid group", "r-a", []Option{WithNamespace("ops"), WithGroup("Kdag")}, "not a DNS-1123 label"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := NewMember(tc.id, leases, tc.opts...); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("NewMember error = %v, want one containing %q", err, tc.want)
			}
		})
	}
}
