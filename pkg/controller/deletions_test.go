package controller_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kdag-dev/kdag/pkg/controller"
	"github.com/kdag-dev/kdag/pkg/graph"
	"github.com/kdag-dev/kdag/pkg/testing/testapi"
)

// deletedMidway is widgetRM with the owner's deletion by this process recorded while its graph is
// built: a parent's prune made while the owner's own reconcile runs. A zero kind records nothing.
type deletedMidway struct {
	widgetRM
	deletions *controller.Deletions
	kind      graph.NodeID
}

func (rm deletedMidway) AddResources(ctx context.Context, owner *testapi.Widget, b *controller.Graph) error {
	if rm.kind.Kind != "" {
		id := rm.kind
		id.Namespace, id.Name = owner.Namespace, owner.Name
		controller.RecordDeletion(rm.deletions, id, owner.UID)
	}
	return rm.widgetRM.AddResources(ctx, owner, b)
}

// TestReconcile_OwnerThisProcessDeletedCreatesNothing: an owner that a reconciler of this process
// deleted (a parent's prune of a child owner) gets no object created and no status written: it is
// requeued instead, and its deletion event brings it back. Found twice by the crash explorer
// (TestGitea_CacheDisabledThenEnabled after write 11): a Valkey its Gitea had just pruned got a
// new Deployment, deleted again a moment later, first from a reconcile that read the Valkey from
// a cache that did not show the deletion yet, then from one that was already running when the
// prune was made. An owner deleted by no one here, and a built-in object's deletion, change
// nothing.
func TestReconcile_OwnerThisProcessDeletedCreatesNothing(t *testing.T) {
	widget := graph.NodeID{Group: testapi.GroupVersion.Group, Kind: "Widget"}
	for _, tc := range []struct {
		name    string
		deleted graph.NodeID // what this process deleted with the owner's UID; zero: nothing
		midway  bool         // deleted while the owner's graph is built, not before the reconcile
		blocked bool
	}{
		{name: "deleted before, not seen by the cache", deleted: widget, blocked: true},
		{name: "deleted while reconciled", deleted: widget, midway: true, blocked: true},
		{name: "deleted by no one", blocked: false},
		{name: "a built-in object of that UID", deleted: graph.NodeID{Kind: "ConfigMap"}, blocked: false},
		{name: "a built-in object of that UID, while reconciled", deleted: graph.NodeID{Kind: "ConfigMap"}, midway: true, blocked: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := controller.NewDeletions()
			rm := deletedMidway{widgetRM: widgetRM{readyDeployment: true}, deletions: d}
			if tc.midway {
				rm.kind = tc.deleted
			}
			f := newFixture(t, rm, controller.WithDeletions(d))
			w := f.widget("app", testapi.WidgetSpec{})
			if !tc.midway && tc.deleted.Kind != "" {
				tc.deleted.Namespace, tc.deleted.Name = f.ns, "app"
				controller.RecordDeletion(d, tc.deleted, w.UID)
			}
			f.calls.Reset()
			res, err := f.reconcileResult("app")
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
