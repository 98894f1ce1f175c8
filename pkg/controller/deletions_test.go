package controller_test

import (
	"context"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kdag-dev/kdag/pkg/controller"
	"github.com/kdag-dev/kdag/pkg/graph"
	"github.com/kdag-dev/kdag/pkg/testing/poll"
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

// goneMidway is widgetRM whose graph build runs act first (when set): a deletion of the owner
// made after its reconcile read it, as the garbage collector makes one that the owner's cache
// has not seen yet.
type goneMidway struct {
	widgetRM
	act *atomic.Pointer[func(*testapi.Widget)]
}

func (rm goneMidway) AddResources(ctx context.Context, owner *testapi.Widget, b *controller.Graph) error {
	if act := rm.act.Load(); act != nil {
		(*act)(owner)
	}
	return rm.widgetRM.AddResources(ctx, owner, b)
}

// TestReconcile_GoneOwnerGetsNothingCreatedAgain: objects of an owner that its last status lists
// as applied and that are gone now are created again only when the owner, as the API server
// holds it, is still the one the reconcile read: not when it is gone, being deleted, or replaced
// by another object of its name, whatever the reconcile's copy shows. Found by the crash explorer
// (TestGitea_DeletedWithDeletePolicy after write 21): the garbage collector deleted a Valkey
// whose Gitea was gone, then the Valkey's Deployment; the Valkey's reconcile, from a cache that
// still held the Valkey, created the Deployment again, garbage at once. The check is one uncached
// metadata read of the owner per reconcile, however many objects are created again, and none on
// a first deploy.
func TestReconcile_GoneOwnerGetsNothingCreatedAgain(t *testing.T) {
	for _, tc := range []struct {
		name string
		// act is what happens to the owner once its reconcile has read it.
		act     func(f *fixture, w *testapi.Widget)
		created bool
	}{
		{name: "still there", act: func(*fixture, *testapi.Widget) {}, created: true},
		{name: "deleted", act: func(f *fixture, w *testapi.Widget) {
			f.Delete(&testapi.Widget{ObjectMeta: metav1.ObjectMeta{Name: w.Name}})
		}},
		{name: "being deleted", act: func(f *fixture, w *testapi.Widget) {
			f.update(&testapi.Widget{}, w.Name, func(o client.Object) {
				o.SetFinalizers(append(o.GetFinalizers(), "test.kdag.dev/hold"))
			})
			f.Delete(&testapi.Widget{ObjectMeta: metav1.ObjectMeta{Name: w.Name}})
		}},
		{name: "replaced by another of its name", act: func(f *fixture, w *testapi.Widget) {
			old := &testapi.Widget{ObjectMeta: metav1.ObjectMeta{Name: w.Name}}
			f.Delete(old)
			f.WaitGone(old)
			f.widget(w.Name, testapi.WidgetSpec{})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			act := &atomic.Pointer[func(*testapi.Widget)]{}
			f := newFixture(t, goneMidway{widgetRM: widgetRM{readyDeployment: true}, act: act})
			t.Cleanup(func() {
				// The test's finalizer released, without Harness.Update: that waits for the cache
				// to hold the update, and this one deletes the Widget.
				key := client.ObjectKey{Namespace: f.ns, Name: "app"}
				err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
					w := &testapi.Widget{}
					if err := f.Client.Get(context.Background(), key, w); err != nil || len(w.Finalizers) == 0 {
						return client.IgnoreNotFound(err)
					}
					w.Finalizers = nil
					return client.IgnoreNotFound(f.Client.Update(context.Background(), w))
				})
				if err != nil {
					t.Errorf("release the Widget's finalizer: %v", err)
				}
			})
			ownerReads := func() int {
				_, reads := f.calls.snapshot()
				return len(slices.DeleteFunc(reads, func(r string) bool { return !strings.HasSuffix(r, "/widgets/app") }))
			}
			f.widget("app", testapi.WidgetSpec{})
			f.calls.Reset()
			if err := f.reconcile("app"); err != nil {
				t.Fatalf("first reconcile: %v", err)
			}
			if n := ownerReads(); n != 0 {
				t.Errorf("first deploy: %d uncached reads of the owner, want 0", n)
			}
			f.settle("app")

			// Two of its objects deleted (the garbage collector's work), the cache shows it.
			gone := []client.Object{&corev1.ConfigMap{}, &corev1.Service{}}
			for i, name := range []string{"app-config", "app"} {
				gone[i].SetName(name)
				gone[i].SetNamespace(f.ns)
				f.Delete(gone[i])
				f.WaitGone(gone[i])
				poll.True(t, name+" gone from the cache", waitTimeout, func(context.Context) bool {
					return f.cached(gone[i].DeepCopyObject().(client.Object), name) != nil
				})
			}
			do := func(w *testapi.Widget) { tc.act(f, w) }
			act.Store(&do)
			f.calls.Reset()
			res, err := f.reconcileResult("app")
			act.Store(nil)
			if err != nil {
				t.Fatalf("reconcile: %v", err)
			}
			writes := f.objectWrites()
			if n := ownerReads(); n != 1 {
				t.Errorf("%d uncached reads of the owner while two objects were to be created again, want 1", n)
			}
			for _, obj := range gone {
				fresh := obj.DeepCopyObject().(client.Object)
				created := f.Get(fresh)
				switch {
				case tc.created && !created:
					t.Errorf("%T %s not created again for its owner, still there (writes %v)", obj, obj.GetName(), writes)
				case !tc.created && created:
					t.Errorf("%T %s created again (UID %s, owners %v) for an owner %s", obj, obj.GetName(),
						fresh.GetUID(), fresh.GetOwnerReferences(), tc.name)
				}
			}
			if !tc.created {
				if len(writes) > 0 {
					t.Errorf("writes %v: want none for an owner %s", writes, tc.name)
				}
				if res.RequeueAfter <= 0 || res.RequeueAfter > time.Minute {
					t.Errorf("RequeueAfter %s, want a short requeue until the cache shows the deletion", res.RequeueAfter)
				}
			}
		})
	}
}
