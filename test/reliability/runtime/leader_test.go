package runtime_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kdag-dev/kdag/pkg/testing/poll"
	"github.com/kdag-dev/kdag/pkg/testing/testapi"
)

// member is one of the managers competing for the Lease.
type member struct {
	name  string
	m     *runningManager
	crash *crash
	// builds counts the member's reconciles (AddResources calls); early counts those that
	// happened while it did not hold the Lease.
	builds, early atomic.Int64
}

// TestLeaderElection_FollowerTakesOverAfterLeaderDies starts two managers with leader election
// (Lease 2 s, renew deadline 1.5 s, retry 0.3 s, no release on cancel). The leader dies in the
// middle of reconciling 20 owners, without releasing the Lease; the follower must take the
// Lease over once it expires and finish every owner, and must not have reconciled anything
// while the other one led.
func TestLeaderElection_FollowerTakesOverAfterLeaderDies(t *testing.T) {
	const owners = 20
	ns := env.Namespace(t)
	members := []*member{{name: "one"}, {name: "two"}}
	for _, mb := range members {
		mb.crash = newCrash()
		rm := appRM{onBuild: func(*testapi.Widget) {
			mb.builds.Add(1)
			if !mb.m.elected() {
				mb.early.Add(1)
			}
		}}
		mb.m = newManager(t, managerOptions{ns: ns, rm: rm, wraps: mb.crash.wraps(), leaderElection: true, allowStartError: true})
	}
	for _, mb := range members {
		mb.m.start(t)
	}

	var leader, follower *member
	poll.Until(t, "one of the two managers elected", 30*time.Second, func(context.Context) string {
		switch one, two := members[0].m.elected(), members[1].m.elected(); {
		case one && two:
			t.Fatal("both managers hold the Lease")
		case one:
			leader, follower = members[0], members[1]
		case two:
			leader, follower = members[1], members[0]
		default:
			return "neither is elected"
		}
		return ""
	})
	firstHolder := leaseHolder(t, ns)
	if firstHolder == "" {
		t.Fatal("a manager is elected but the Lease has no holder")
	}

	// The leader dies at its 40th of the 80 applies.
	leader.crash.arm(40, leader.m.cancel)
	createWidgets(t, ns, "w", owners, testapi.WidgetSpec{Data: map[string]string{"greeting": "hello"}})
	leader.crash.wait(t, 2*time.Minute)
	killed := time.Now()
	if n := follower.builds.Load(); n > 0 {
		t.Errorf("the follower reconciled %d times while the leader held the Lease", n)
	}
	leader.m.stop()
	// At most 39 of the 80 objects exist: at least half of the owners are left to the follower.
	left, err := notReady(t.Context(), ns, owners)
	if err != nil || len(left) == 0 {
		t.Fatalf("after the leader died: %v, %d owners not Ready; want work left for the follower", err, len(left))
	}

	poll.Until(t, "the follower holds the Lease", 30*time.Second, func(context.Context) string {
		if !follower.m.elected() {
			return "not elected"
		}
		if h := leaseHolder(t, ns); h == firstHolder || h == "" {
			return fmt.Sprintf("Lease holder %q", h)
		}
		return ""
	})
	takeover := time.Since(killed)
	took := waitAllReady(t, ns, owners, 2*time.Minute)
	follower.m.stop()

	if follower.builds.Load() == 0 {
		t.Error("the follower never reconciled, yet every owner is Ready")
	}
	for _, mb := range members {
		if n := mb.early.Load(); n > 0 {
			t.Errorf("manager %s reconciled %d times without holding the Lease", mb.name, n)
		}
	}
	t.Logf("the leader reconciled %d times and died at its 40th apply with %d of %d owners not Ready; the follower "+
		"held the Lease %s later (Lease duration 2s) and made them Ready %s after that, in %d reconciles",
		leader.builds.Load(), len(left), owners, takeover.Round(100*time.Millisecond), took.Round(100*time.Millisecond),
		follower.builds.Load())
}

// leaseHolder returns the holder identity of the managers' Lease in ns, "" if none.
func leaseHolder(t *testing.T, ns string) string {
	t.Helper()
	lease := &coordinationv1.Lease{}
	if err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: leaseName}, lease); err != nil {
		return ""
	}
	return ptr.Deref(lease.Spec.HolderIdentity, "")
}
