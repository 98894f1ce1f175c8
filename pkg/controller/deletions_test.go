package controller

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/kdag-dev/kdag/pkg/graph"
	"github.com/kdag-dev/kdag/pkg/testing/testapi"
)

// TestReconcile_OwnerThisProcessDeletedCreatesNothing: an owner that a reconciler of this process
// deleted (a parent's prune of a child owner), read from a cache that does not show the deletion
// yet, gets no object created: it is requeued instead, and its deletion event brings it back.
// Found by the crash explorer (TestGitea_CacheDisabledThenEnabled): a Valkey its Gitea had just
// pruned got a new Deployment, deleted again a moment later. An owner deleted by no one here,
// and a built-in object's deletion, change nothing.
func TestReconcile_OwnerThisProcessDeletedCreatesNothing(t *testing.T) {
	for _, tc := range []struct {
		name    string
		deleted graph.NodeID // what this process deleted with the owner's UID; zero: nothing
		blocked bool
	}{
		{name: "deleted by this process, not seen by the cache", deleted: graph.NodeID{Group: testapi.GroupVersion.Group, Kind: "Widget"}, blocked: true},
		{name: "deleted by no one", blocked: false},
		{name: "a built-in object of that UID", deleted: graph.NodeID{Kind: "ConfigMap"}, blocked: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, widgetRM{readyDeployment: true})
			w := f.widget("app", testapi.WidgetSpec{})
			if tc.deleted.Kind != "" {
				tc.deleted.Namespace, tc.deleted.Name = f.ns, "app"
				f.c.opts.deletions.record(tc.deleted, w.UID)
			}
			f.calls.Reset()
			res, err := f.c.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Namespace: f.ns, Name: "app"}})
			if err != nil {
				t.Fatalf("reconcile: %v", err)
			}
			writes, _ := f.calls.snapshot()
			created := !f.notFound(&corev1.ConfigMap{}, "app-config")
			switch {
			case tc.blocked && (len(writes) > 0 || created):
				t.Errorf("writes %v (app-config created: %v): want none for an owner this process deleted", writes, created)
			case tc.blocked && (res.RequeueAfter <= 0 || res.RequeueAfter > time.Minute):
				t.Errorf("RequeueAfter %s, want a short requeue", res.RequeueAfter)
			case !tc.blocked && !created:
				t.Errorf("app-config not created (writes %v): the reconcile was held back", writes)
			}
		})
	}
}

// deletedMidway is widgetRM with the owner's deletion by this process recorded while its graph is
// built: a parent's prune made while the owner's own reconcile runs.
type deletedMidway struct {
	widgetRM
	deletions *deletions
	kind      graph.NodeID
}

func (rm deletedMidway) AddResources(ctx context.Context, owner *testapi.Widget, b *Graph) error {
	if rm.kind.Kind != "" {
		id := rm.kind
		id.Namespace, id.Name = owner.Namespace, owner.Name
		rm.deletions.record(id, owner.UID)
	}
	return rm.widgetRM.AddResources(ctx, owner, b)
}

// TestReconcile_OwnerDeletedWhileReconciledCreatesNothing: a reconcile that was already running
// when this process deleted its owner (a Gitea's prune of a Valkey while the Valkey's reconcile
// runs; the crash explorer found it in TestGitea_CacheDisabledThenEnabled after the check at the
// start of Reconcile was in) creates none of the owner's objects and writes no status: it is
// requeued, and the deletion event brings it back. A built-in object's deletion of that UID, and
// no deletion, hold nothing back.
func TestReconcile_OwnerDeletedWhileReconciledCreatesNothing(t *testing.T) {
	for _, tc := range []struct {
		name    string
		deleted graph.NodeID
		blocked bool
	}{
		{name: "deleted by this process mid-reconcile", deleted: graph.NodeID{Group: testapi.GroupVersion.Group, Kind: "Widget"}, blocked: true},
		{name: "deleted by no one", blocked: false},
		{name: "a built-in object of that UID", deleted: graph.NodeID{Kind: "ConfigMap"}, blocked: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newDeletions()
			f := newFixture(t, deletedMidway{widgetRM: widgetRM{readyDeployment: true}, deletions: d, kind: tc.deleted}, withDeletions(d))
			f.widget("app", testapi.WidgetSpec{})
			f.calls.Reset()
			res, err := f.c.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Namespace: f.ns, Name: "app"}})
			if err != nil {
				t.Fatalf("reconcile: %v", err)
			}
			writes, _ := f.calls.snapshot()
			created := !f.notFound(&corev1.ConfigMap{}, "app-config")
			switch {
			case tc.blocked && (len(writes) > 0 || created):
				t.Errorf("writes %v (app-config created: %v): want none for an owner deleted while it was reconciled", writes, created)
			case tc.blocked && (res.RequeueAfter <= 0 || res.RequeueAfter > time.Minute):
				t.Errorf("RequeueAfter %s, want a short requeue", res.RequeueAfter)
			case !tc.blocked && !created:
				t.Errorf("app-config not created (writes %v): the reconcile was held back", writes)
			}
		})
	}
}
