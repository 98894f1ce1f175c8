package crash_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	giteav1alpha1 "github.com/kdag-dev/kdag/apis/gitea/v1alpha1"
	"github.com/kdag-dev/kdag/controllers"
	"github.com/kdag-dev/kdag/controllers/giteaserver"
	"github.com/kdag-dev/kdag/controllers/postgresql"
	"github.com/kdag-dev/kdag/pkg/controller"
	"github.com/kdag-dev/kdag/pkg/controllertest"
)

// The sample's objects: it is named demo, its database demo-postgresql, at Gitea 1.27.3.
const (
	pgName      = "demo-postgresql"
	fromVersion = "1.27.3"
	toVersion   = "1.27.4"
)

// sample reads config/samples/gitea.yaml, the smallest Gitea (every field defaulted).
func sample(t *testing.T) *giteav1alpha1.Gitea {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "config", "samples", "gitea.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	g := &giteav1alpha1.Gitea{}
	if err := yaml.UnmarshalStrict(raw, g); err != nil {
		t.Fatalf("config/samples/gitea.yaml: %v", err)
	}
	return g
}

// deploy creates the sample and marks its workloads ready as they appear, in the order the
// graph creates them (each once the one before is ready), as the controllers envtest lacks would:
// the database's claim and StatefulSet, the cache, the server's claim, its migration Job and its
// Deployment. It returns once the Gitea is Ready.
func deploy(t *testing.T, h *controllertest.Harness) *giteav1alpha1.Gitea {
	return deployGitea(t, h, sample(t))
}

// deployGitea is deploy with g, a Gitea named demo.
func deployGitea(t *testing.T, h *controllertest.Harness, g *giteav1alpha1.Gitea) *giteav1alpha1.Gitea {
	h.Create(g)
	for _, obj := range []client.Object{
		controllertest.Named[corev1.PersistentVolumeClaim](postgresql.DataClaimName(pgName)),
		controllertest.Named[appsv1.StatefulSet](pgName),
		controllertest.Named[appsv1.Deployment]("demo-valkey"),
		controllertest.Named[corev1.PersistentVolumeClaim]("demo-data"),
		controllertest.Named[batchv1.Job](giteaserver.MigrationJobName("demo", fromVersion)),
		controllertest.Named[appsv1.Deployment]("demo"),
	} {
		h.MarkReady(obj)
	}
	h.WaitReady(g)
	return g
}

// data is what must survive a Gitea's deletion with deletionPolicy Retain: the claims and the
// generated Secrets, by "Kind/name", with their UIDs and, for Secrets, data.
func data(h *controllertest.Harness) map[string]string {
	out := map[string]string{}
	for key, obj := range map[string]client.Object{
		"PersistentVolumeClaim/" + postgresql.DataClaimName(pgName): controllertest.Named[corev1.PersistentVolumeClaim](postgresql.DataClaimName(pgName)),
		"PersistentVolumeClaim/demo-data":                           controllertest.Named[corev1.PersistentVolumeClaim]("demo-data"),
		"Secret/" + postgresql.CredentialsSecretName(pgName):        controllertest.Named[corev1.Secret](postgresql.CredentialsSecretName(pgName)),
		"Secret/demo-secrets":                                       controllertest.Named[corev1.Secret]("demo-secrets"),
	} {
		if !h.Get(obj) {
			out[key] = "missing"
			continue
		}
		out[key] = "UID " + string(obj.GetUID())
		if s, ok := obj.(*corev1.Secret); ok {
			b, _ := yaml.Marshal(s.Data)
			out[key] += ", data " + string(bytes.TrimSpace(b))
		}
	}
	return out
}

// crashes is the exploration of a Gitea scenario: the reference operator's four components, at
// every stride-th crash point (twice that under -race: raceFactor). KDAG_CRASH_STRIDE overrides
// the stride (1: every crash point), KDAG_CRASH_MODE the mode: "before" (the write never sent)
// or "conflict" (answered 409), KDAG_CRASH_AGAIN=n kills the recovering manager too, at its
// n-th write (Crashes.Again), and KDAG_CRASH_PARALLEL=n runs n crash runs at once
// (Crashes.Parallel).
func crashes(t *testing.T, stride int, setup, scenario func(t *testing.T, h *controllertest.Harness)) controllertest.Crashes {
	stride = envInt(t, "KDAG_CRASH_STRIDE", stride*raceFactor, 1, "a positive number")
	modes := map[string]controllertest.CrashMode{"": controllertest.CrashAfterWrite, "after": controllertest.CrashAfterWrite,
		"before": controllertest.CrashBeforeWrite, "conflict": controllertest.ConflictAtWrite}
	mode, ok := modes[os.Getenv("KDAG_CRASH_MODE")]
	if !ok {
		t.Fatalf("KDAG_CRASH_MODE=%q: want after, before or conflict", os.Getenv("KDAG_CRASH_MODE"))
	}
	again := envInt(t, "KDAG_CRASH_AGAIN", 0, 0, "the recovering manager's write to crash at (0: none)")
	parallel := envInt(t, "KDAG_CRASH_PARALLEL", 1, 1, "how many crash runs go at once (1: one after another)")
	return controllertest.Crashes{
		Again: again, Parallel: parallel,
		// Each manager its own components, as a restarted operator.
		NewComponents: func() []controller.Component { return controllers.Components(nil) },
		Setup:         setup, Scenario: scenario, Stride: stride, Mode: mode,
		// A status write follows a graph run within milliseconds.
		Quiet: 300 * time.Millisecond,
	}
}

// envInt returns the environment variable name as a number of at least least, def when it is
// unset; a value that is not such a number fails t, saying it wants what.
func envInt(t *testing.T, name string, def, least int, what string) int {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < least {
		t.Fatalf("%s=%q: want %s", name, s, what)
	}
	return n
}

// TestGitea_FirstDeploy (issue 30, part 2a): the sample deployed from nothing, the operator
// killed at each of its writes in turn.
func TestGitea_FirstDeploy(t *testing.T) {
	controllertest.ExploreCrashes(t, api, crashes(t, 1, nil, func(t *testing.T, h *controllertest.Harness) {
		deploy(t, h)
		for _, name := range []string{postgresql.CredentialsSecretName(pgName), "demo-secrets"} {
			if s := controllertest.Named[corev1.Secret](name); !h.Get(s) || len(s.Data) == 0 {
				t.Errorf("generated Secret %s: missing or empty", name)
			}
		}
	}))
}

// TestGitea_FirstDeploy_CrashWhileRecovering (issue 30, crashes during the recovery): the first
// deploy, the operator killed at every fifth of its writes, and the fresh operator that takes
// over killed too, at its second write; a third one finishes.
func TestGitea_FirstDeploy_CrashWhileRecovering(t *testing.T) {
	c := crashes(t, 5, nil, func(t *testing.T, h *controllertest.Harness) { deploy(t, h) })
	if c.Again == 0 {
		c.Again = 2
	}
	controllertest.ExploreCrashes(t, api, c)
}

// TestGitea_Upgrade (issue 30, part 2b): the deployed sample moves to the next version: its
// migration Job runs, then the server rolls; the operator killed at each of its writes in turn.
func TestGitea_Upgrade(t *testing.T) {
	controllertest.ExploreCrashes(t, api, crashes(t, 1,
		func(t *testing.T, h *controllertest.Harness) { deploy(t, h) },
		func(t *testing.T, h *controllertest.Harness) {
			g := controllertest.Named[giteav1alpha1.Gitea]("demo")
			h.Update(g, func() { g.Spec.Version = toVersion })
			h.MarkReady(controllertest.Named[batchv1.Job](giteaserver.MigrationJobName("demo", toVersion)))
			server := controllertest.Named[appsv1.Deployment]("demo")
			h.Eventually("the server rolls to "+toVersion, func(context.Context) (bool, error) {
				return h.Get(server) && server.Generation > 1, nil
			})
			h.MarkReady(server)
			h.WaitReady(g)
			s := controllertest.Named[giteav1alpha1.GiteaServer]("demo")
			h.Get(s)
			if m := s.Status.Migration; m == nil || m.Version != toVersion || m.State != giteav1alpha1.MigrationSucceeded {
				t.Errorf("GiteaServer demo status.migration %+v, want %s %s", m, toVersion, giteav1alpha1.MigrationSucceeded)
			}
		}))
}

// TestGitea_DeletedAndCreatedAgainKeepsItsData (issue 30, part 2c): the deployed sample (storage
// deletionPolicy Retain, the default, for the database and the repositories) is deleted, its
// children collected as the garbage collector would, and created again under the same name: the
// claims and the generated Secrets keep their UIDs and data; the operator killed at each of its
// writes in turn.
func TestGitea_DeletedAndCreatedAgainKeepsItsData(t *testing.T) {
	// Every other crash point: the scenario has about 50 writes of 4.5 s each.
	controllertest.ExploreCrashes(t, api, crashes(t, 2,
		func(t *testing.T, h *controllertest.Harness) {
			g := deploy(t, h)
			pg := controllertest.Named[giteav1alpha1.PostgreSQL](pgName)
			if !h.Get(pg) || g.Spec.Storage.DeletionPolicy != giteav1alpha1.StorageRetain || pg.Spec.Storage.DeletionPolicy != giteav1alpha1.StorageRetain {
				t.Fatalf("storage deletionPolicy: %q for the repositories, %q for the database; want Retain for both",
					g.Spec.Storage.DeletionPolicy, pg.Spec.Storage.DeletionPolicy)
			}
		},
		func(t *testing.T, h *controllertest.Harness) {
			before := data(h)
			h.Delete(controllertest.Named[giteav1alpha1.Gitea]("demo"))
			h.WaitGone(controllertest.Named[giteav1alpha1.Gitea]("demo"))
			h.CollectGarbage()
			deploy(t, h)
			after := data(h)
			for key, was := range before {
				if after[key] != was {
					t.Errorf("%s: %s after the Gitea was created again, was %s", key, after[key], was)
				}
			}
		}))
}

// TestPostgreSQL_StorageGrows (issue 30, beyond part 2's first scenarios): a running database's
// spec.storage.size grows on a StorageClass that allows volume expansion: kdag raises the claim's
// request and re-creates the StatefulSet (controller.Recreate, propagation Orphan), the operator
// killed at each of its writes in turn. The StatefulSet is re-created once, as in the clean run:
// a crash between its deletion and its creation must not make it twice.
func TestPostgreSQL_StorageGrows(t *testing.T) {
	c := crashes(t, 1,
		func(t *testing.T, h *controllertest.Harness) {
			class := &storagev1.StorageClass{
				ObjectMeta:           metav1.ObjectMeta{Name: "growth-" + h.Namespace},
				Provisioner:          "example.com/fake",
				AllowVolumeExpansion: ptr.To(true),
			}
			h.Create(class)
			t.Cleanup(func() { _ = h.Client.Delete(context.Background(), class) })
			pg := &giteav1alpha1.PostgreSQL{ObjectMeta: metav1.ObjectMeta{Name: "db"}}
			pg.Spec.Storage.StorageClassName = ptr.To(class.Name)
			h.Create(pg)
			h.MarkReady(controllertest.Named[corev1.PersistentVolumeClaim](postgresql.DataClaimName("db")))
			h.MarkReady(controllertest.Named[appsv1.StatefulSet]("db"))
			h.WaitReady(pg)
		},
		func(t *testing.T, h *controllertest.Harness) {
			sts := controllertest.Named[appsv1.StatefulSet]("db")
			h.Get(sts)
			old := sts.UID
			pg := controllertest.Named[giteav1alpha1.PostgreSQL]("db")
			want := resource.MustParse("20Gi")
			h.Update(pg, func() { pg.Spec.Storage.Size = want })
			// The garbage collector's part of the orphan deletion: it releases the pods, then the
			// StatefulSet.
			h.Eventually("the StatefulSet is created again", func(ctx context.Context) (bool, error) {
				cur := &appsv1.StatefulSet{}
				if err := h.Client.Get(ctx, client.ObjectKeyFromObject(sts), cur); err != nil {
					return false, client.IgnoreNotFound(err)
				}
				if cur.DeletionTimestamp != nil {
					cur.Finalizers = slices.DeleteFunc(cur.Finalizers, func(f string) bool { return f == metav1.FinalizerOrphanDependents })
					return false, client.IgnoreNotFound(h.Client.Update(ctx, cur))
				}
				return cur.UID != old, nil
			})
			h.MarkReady(sts)
			h.WaitReady(pg)
			claim := controllertest.Named[corev1.PersistentVolumeClaim](postgresql.DataClaimName("db"))
			h.Get(claim)
			h.Get(sts)
			if got := claim.Spec.Resources.Requests[corev1.ResourceStorage]; got.Cmp(want) != 0 {
				t.Errorf("claim requests %s, want %s", got.String(), want.String())
			}
			if got := sts.Spec.VolumeClaimTemplates[0].Spec.Resources.Requests[corev1.ResourceStorage]; got.Cmp(want) != 0 {
				t.Errorf("StatefulSet claim template requests %s, want %s", got.String(), want.String())
			}
		})
	c.NewComponents = func() []controller.Component {
		return []controller.Component{controller.For("postgresql", postgresql.ResourceManager{})}
	}
	controllertest.ExploreCrashes(t, api, c)
}
