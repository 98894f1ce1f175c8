package crash_test

import (
	"context"
	"fmt"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	giteav1alpha1 "github.com/kdag-dev/kdag/apis/gitea/v1alpha1"
	"github.com/kdag-dev/kdag/controllers"
	"github.com/kdag-dev/kdag/controllers/postgresql"
	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/controller"
	"github.com/kdag-dev/kdag/pkg/controllertest"
	"github.com/kdag-dev/kdag/pkg/shard"
)

// The scenarios of this file explore every fifth crash point (every tenth under -race:
// raceFactor), the shard move every eighth (its runs take twice as long), to keep make test
// within CI's budget; KDAG_CRASH_STRIDE=1 explores every one, and docs/reliability.md has the
// figures of such runs.

// setDeletionPolicy sets the storage deletionPolicy of the Gitea demo's repositories and managed
// database to p, waits until it is Ready for that change, and checks that both claims and both
// generated Secrets are kept (kdag.dev/resource-policy: keep) with Retain and not with Delete.
func setDeletionPolicy(t *testing.T, h *controllertest.Harness, p giteav1alpha1.StorageDeletionPolicy) {
	t.Helper()
	g := controllertest.Named[giteav1alpha1.Gitea]("demo")
	h.Update(g, func() {
		g.Spec.Storage.DeletionPolicy = p
		if g.Spec.Database.Managed == nil {
			g.Spec.Database.Managed = &giteav1alpha1.ManagedDatabaseSpec{}
		}
		g.Spec.Database.Managed.Storage.DeletionPolicy = p
	})
	if p == giteav1alpha1.StorageDelete {
		// With Delete, the database gets a kept claim for the dump its teardown makes.
		h.MarkReady(controllertest.Named[corev1.PersistentVolumeClaim](postgresql.DumpClaimName(pgName)))
	}
	h.WaitReady(g)
	for _, obj := range dataObjects() {
		if !h.Get(obj) {
			t.Errorf("%T %s: missing with deletionPolicy %s", obj, obj.GetName(), p)
			continue
		}
		kept := obj.GetAnnotations()[kdagv1alpha1.AnnotationResourcePolicy] == kdagv1alpha1.ResourcePolicyKeep
		if kept != (p == giteav1alpha1.StorageRetain) {
			t.Errorf("%T %s: kept %v with deletionPolicy %s (the Gitea is Ready)", obj, obj.GetName(), kept, p)
		}
	}
}

// dataObjects are the claims and generated Secrets that follow the storage deletionPolicy.
func dataObjects() []client.Object {
	return []client.Object{
		controllertest.Named[corev1.PersistentVolumeClaim](postgresql.DataClaimName(pgName)),
		controllertest.Named[corev1.PersistentVolumeClaim]("demo-data"),
		controllertest.Named[corev1.Secret](postgresql.CredentialsSecretName(pgName)),
		controllertest.Named[corev1.Secret]("demo-secrets"),
	}
}

// TestGitea_DeletionPolicySwitches (issue 30, part 2): the deployed sample's storage
// deletionPolicy goes Retain → Delete → Retain (the claims and generated Secrets lose their keep
// annotation, then get it back), then the Gitea is deleted: its claims and Secrets stay with
// their UIDs and data. The operator killed at each of its writes in turn.
func TestGitea_DeletionPolicySwitches(t *testing.T) {
	controllertest.ExploreCrashes(t, api, crashes(t, 5,
		func(t *testing.T, h *controllertest.Harness) { deploy(t, h) },
		func(t *testing.T, h *controllertest.Harness) {
			before := data(h)
			setDeletionPolicy(t, h, giteav1alpha1.StorageDelete)
			setDeletionPolicy(t, h, giteav1alpha1.StorageRetain)
			h.Delete(controllertest.Named[giteav1alpha1.Gitea]("demo"))
			h.WaitGone(controllertest.Named[giteav1alpha1.Gitea]("demo"))
			h.CollectGarbage()
			after := data(h)
			for key, was := range before {
				if after[key] != was {
					t.Errorf("%s: %s after the Gitea was deleted with Retain, was %s", key, after[key], was)
				}
			}
		}))
}

// TestGitea_DeletedWithDeletePolicy (issue 30, part 2): the deployed sample's storage
// deletionPolicy switched to Delete, then the Gitea deleted: the database's teardown dumps it
// into its kept dump claim, then its claims and generated Secrets go with it (the garbage
// collector's part done by the test). The operator killed at each of its
// writes in turn.
func TestGitea_DeletedWithDeletePolicy(t *testing.T) {
	controllertest.ExploreCrashes(t, api, crashes(t, 5,
		func(t *testing.T, h *controllertest.Harness) { deploy(t, h) },
		func(t *testing.T, h *controllertest.Harness) {
			setDeletionPolicy(t, h, giteav1alpha1.StorageDelete)
			h.Delete(controllertest.Named[giteav1alpha1.Gitea]("demo"))
			h.WaitGone(controllertest.Named[giteav1alpha1.Gitea]("demo"))
			// The garbage collector's first step, by hand: the database goes, and its teardown
			// dumps it first (a BeforeDelete Job, marked complete here) before its data goes.
			pg := controllertest.Named[giteav1alpha1.PostgreSQL](pgName)
			h.Delete(pg)
			h.MarkReady(controllertest.Named[batchv1.Job](postgresql.DumpJobName(pgName)))
			h.WaitGone(pg)
			h.CollectGarbage()
			if claim := controllertest.Named[corev1.PersistentVolumeClaim](postgresql.DumpClaimName(pgName)); !h.Get(claim) || claim.DeletionTimestamp != nil {
				t.Errorf("the dump's claim %s: gone after the database's deletion, want it kept", claim.Name)
			}
			// A claim deleted stays while kubernetes.io/pvc-protection holds it: no controller
			// releases it on envtest.
			for _, obj := range dataObjects() {
				if h.Get(obj) && obj.GetDeletionTimestamp() == nil {
					t.Errorf("%T %s: still there (UID %s) after the Gitea was deleted with deletionPolicy Delete", obj, obj.GetName(), obj.GetUID())
				}
			}
		}))
}

// TestGitea_CacheDisabledThenEnabled (issue 30, part 2): the deployed sample's Valkey cache is
// disabled (the server rolls without it, then the Valkey is pruned) and enabled again (a new
// Valkey, then the server rolls back onto it). The operator killed at each of its writes in turn.
func TestGitea_CacheDisabledThenEnabled(t *testing.T) {
	controllertest.ExploreCrashes(t, api, crashes(t, 5,
		func(t *testing.T, h *controllertest.Harness) { deploy(t, h) },
		func(t *testing.T, h *controllertest.Harness) {
			g := controllertest.Named[giteav1alpha1.Gitea]("demo")
			server := controllertest.Named[appsv1.Deployment]("demo")
			h.Get(server)
			rolled := server.Generation
			roll := func(what string) {
				h.Eventually("the server rolls "+what, func(context.Context) (bool, error) {
					return h.Get(server) && server.Generation > rolled, nil
				})
				rolled = server.Generation
				h.MarkReady(server)
			}

			h.Update(g, func() { g.Spec.Cache.Enabled = ptr.To(false) })
			roll("without the cache")
			h.WaitGone(controllertest.Named[giteav1alpha1.Valkey]("demo-valkey"))
			h.CollectGarbage()
			h.WaitReady(g)
			for _, obj := range []client.Object{controllertest.Named[appsv1.Deployment]("demo-valkey"), controllertest.Named[corev1.ConfigMap]("demo-valkey-config")} {
				if h.Get(obj) {
					t.Errorf("%T %s: still there with the cache disabled", obj, obj.GetName())
				}
			}

			h.Update(g, func() { g.Spec.Cache.Enabled = ptr.To(true) })
			h.MarkReady(controllertest.Named[appsv1.Deployment]("demo-valkey"))
			roll("onto the cache")
			h.WaitReady(g)
			s := controllertest.Named[giteav1alpha1.GiteaServer]("demo")
			if h.Get(s); s.Spec.Cache == nil || s.Spec.Cache.Address == "" {
				t.Errorf("GiteaServer demo: spec.cache %+v with the cache enabled again, want its address", s.Spec.Cache)
			}
		}))
}

// The shards of the shard move: static shards (package shard's layer), one manager each.
const fromShard, toShard = "a", "b"

// TestGitea_ShardMove (issue 30, part 2): the deployed sample, in shard a, moves to shard b,
// and shard b relabels every object of it, its child owners' included, without deleting,
// re-creating or rewriting any. Two ways: handed over as the dynamic shards' assigner asks for it
// (kdag.dev/shard-next: b on the Gitea; shard a's manager relabels the Gitea and records the
// assignment), and relabelled by a user (kdag.dev/shard=b, static shards). One manager per
// shard; the crash points are the writes of both, and the one that makes the crash point's
// write dies. The relabelling is the hand-over without shard a's write: it explores every
// sixteenth crash point (every thirty-second under -race).
func TestGitea_ShardMove(t *testing.T) {
	for _, tc := range []struct {
		name   string
		stride int
		move   func(g *giteav1alpha1.Gitea)
		// handedOver: shard a recorded the assignment (kdag.dev/shard-assigned) and removed the
		// request.
		handedOver bool
	}{
		{"handed over", 8, func(g *giteav1alpha1.Gitea) {
			if g.Annotations == nil {
				g.Annotations = map[string]string{}
			}
			g.Annotations[kdagv1alpha1.AnnotationShardNext] = toShard
		}, true},
		{"relabelled", 16, func(g *giteav1alpha1.Gitea) { g.Labels[kdagv1alpha1.LabelShard] = toShard }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := crashes(t, tc.stride,
				func(t *testing.T, h *controllertest.Harness) {
					g := sample(t)
					g.Labels = map[string]string{kdagv1alpha1.LabelShard: fromShard}
					deployGitea(t, h, g)
				},
				func(t *testing.T, h *controllertest.Harness) {
					g := controllertest.Named[giteav1alpha1.Gitea]("demo")
					h.Update(g, func() { tc.move(g) })
					var left []string
					defer func() {
						if t.Failed() {
							t.Logf("not in shard %s: %v", toShard, left)
						}
					}()
					h.Eventually("every object of the Gitea is in shard "+toShard, func(ctx context.Context) (bool, error) {
						var err error
						left, err = notInShard(ctx, h, toShard)
						return len(left) == 0, err
					})
					h.WaitReady(g)
					_, asked := g.Annotations[kdagv1alpha1.AnnotationShardNext]
					if tc.handedOver && (asked || g.Annotations[kdagv1alpha1.AnnotationShardAssigned] != toShard) {
						t.Errorf("Gitea demo annotations %v after the hand-over, want %s=%s and no %s", g.Annotations,
							kdagv1alpha1.AnnotationShardAssigned, toShard, kdagv1alpha1.AnnotationShardNext)
					}
				})
			c.NewComponents = nil
			c.Shards = []string{fromShard, toShard}
			c.ShardComponents = func(string) []controller.Component { return controllers.Components(nil) }
			c.ShardLayer = &controllertest.ShardLayer{
				SelectCache: shard.SelectCache,
				ControllerOptions: func(mgr ctrl.Manager, name string) controller.Options {
					return (&shard.Options{Shard: name}).ControllerOptions(mgr)
				},
			}
			controllertest.ExploreCrashes(t, api, c)
		})
	}
}

// gvkOf returns the version of kind the operator uses: v1 of the core, apps and batch groups, or
// the reference API's.
func gvkOf(kind string) (schema.GroupVersionKind, error) {
	for gvk := range scheme.AllKnownTypes() {
		if gvk.Kind == kind && (gvk.GroupVersion() == giteav1alpha1.GroupVersion ||
			gvk.Version == "v1" && (gvk.Group == "" || gvk.Group == "apps" || gvk.Group == "batch")) {
			return gvk, nil
		}
	}
	return schema.GroupVersionKind{}, fmt.Errorf("kind %s is not in the test's scheme", kind)
}

// shardedKinds are the kinds of a Gitea's objects, owners included.
var shardedKinds = []string{"Gitea", "PostgreSQL", "Valkey", "GiteaServer", "Secret", "ConfigMap", "Service",
	"Deployment", "StatefulSet", "Job", "PersistentVolumeClaim"}

// notInShard returns the objects of h's namespace that kdag made (kdag.dev/controller) or that
// are owners, "Kind/name", whose kdag.dev/shard label is not shard.
func notInShard(ctx context.Context, h *controllertest.Harness, shard string) ([]string, error) {
	var left []string
	for _, kind := range shardedKinds {
		gvk, err := gvkOf(kind)
		if err != nil {
			return nil, err
		}
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(kind + "List"))
		if err := h.Client.List(ctx, list, client.InNamespace(h.Namespace)); err != nil {
			return nil, err
		}
		for _, o := range list.Items {
			_, ours := o.GetLabels()[kdagv1alpha1.LabelController]
			if gvk.Group != giteav1alpha1.GroupVersion.Group && !ours {
				continue // not kdag's: the service account's token, a ConfigMap of the namespace
			}
			if got := o.GetLabels()[kdagv1alpha1.LabelShard]; got != shard {
				left = append(left, fmt.Sprintf("%s/%s (shard %q)", kind, o.GetName(), got))
			}
		}
	}
	return left, nil
}
