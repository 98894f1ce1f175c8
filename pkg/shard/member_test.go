package shard

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pkg/errors"
	coordinationv1 "k8s.io/api/coordination/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/testing/poll"
)

// startMember runs a Member of replica "r-a" with a 1 s Lease on c until the test ends; the
// returned channel receives Start's result.
func startMember(t *testing.T, c client.Client) (stop func(), done <-chan error) {
	t.Helper()
	m, err := NewMember("r-a", c, c, WithNamespace("ops"), WithLeaseDuration(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	errc, finished := make(chan error, 1), make(chan struct{})
	go func() { defer close(finished); errc <- m.Start(ctx) }()
	t.Cleanup(func() { cancel(); <-finished })
	return cancel, errc
}

// TestMember_RenewsItsLease: the Lease "<group>-shard-<id>" is created with the member label,
// the holder and the duration, and renewed while the member runs; stopping is not an error.
func TestMember_RenewsItsLease(t *testing.T) {
	c := fake.NewClientBuilder().WithScheme(scheme).Build()
	stop, done := startMember(t, c)
	var first time.Time
	poll.Until(t, "Lease kdag-shard-r-a renewed twice", 5*time.Second, func(ctx context.Context) string {
		l := &coordinationv1.Lease{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: "ops", Name: "kdag-shard-r-a"}, l); err != nil {
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

// TestMember_FencesItself: a member whose renewals fail stops (Start returns an error naming the
// Lease) within the renew deadline, two thirds of the Lease duration, and before the Lease
// expires, so that a manager it runs in stops reconciling before its owners can move.
func TestMember_FencesItself(t *testing.T) {
	var failing atomic.Bool
	var failedAt atomic.Int64
	c := interceptor.NewClient(fake.NewClientBuilder().WithScheme(scheme).Build(), interceptor.Funcs{
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			if failing.Load() {
				failedAt.CompareAndSwap(0, time.Now().UnixNano())
				return errors.New("injected: the API server is unreachable")
			}
			return c.Update(ctx, obj, opts...)
		},
	})
	_, done := startMember(t, c)
	var renewed time.Time
	poll.Until(t, "Lease renewed once", 5*time.Second, func(ctx context.Context) string {
		l := &coordinationv1.Lease{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: "ops", Name: "kdag-shard-r-a"}, l); err != nil {
			return err.Error()
		}
		if l.Spec.AcquireTime == nil || !l.Spec.RenewTime.After(l.Spec.AcquireTime.Time) {
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
		l := &coordinationv1.Lease{}
		if err := c.Get(t.Context(), client.ObjectKey{Namespace: "ops", Name: "kdag-shard-r-a"}, l); err != nil {
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

// TestNewMember_Refuses: what cannot work is refused before anything runs, with why.
func TestNewMember_Refuses(t *testing.T) {
	c := fake.NewClientBuilder().WithScheme(scheme).Build()
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
			if _, err := NewMember(tc.id, c, c, tc.opts...); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("NewMember error = %v, want one containing %q", err, tc.want)
			}
		})
	}
}
