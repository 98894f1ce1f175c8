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
