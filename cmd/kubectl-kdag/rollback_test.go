package main

import (
	"bytes"
	"context"
	"strings"
	"sync/atomic"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	giteav1alpha1 "github.com/kdag-dev/kdag/apis/gitea/v1alpha1"
	crds "github.com/kdag-dev/kdag/config/crd"
	"github.com/kdag-dev/kdag/controllers"
	"github.com/kdag-dev/kdag/controllers/giteaserver"
	"github.com/kdag-dev/kdag/pkg/controller"
	"github.com/kdag-dev/kdag/pkg/controllertest"
	"github.com/kdag-dev/kdag/pkg/history"
	"github.com/kdag-dev/kdag/pkg/plan"
	"github.com/kdag-dev/kdag/pkg/revision"
)

// TestRollback_OwnerChangedWhileChecked: the owner changes between the rollback's read and its
// writes (the Gitea's controller writes status every few seconds while a migration runs; found on
// the local cluster as "dry run ...: the object has been modified"). A change of its status or
// metadata alone does not stop the rollback: it reads the owner again and goes on. A change of
// its spec does: the rollback writes nothing and says to run it again, and the other writer's
// spec stays.
func TestRollback_OwnerChangedWhileChecked(t *testing.T) {
	h := controllertest.Start(t, api, controllers.Components(nil, controller.Options{OperatorVersion: "v1.0.0-test"})...)
	g := deploySample(t, h)
	deployed := lastRevision(t, h, g)
	// An upgrade whose migration failed: a rollback is allowed.
	h.Update(g, func() { g.Spec.Version = "1.27.4" })
	waitRevision(t, h, g, deployed.Revision+1)
	markFailed(t, h, controllertest.Named[batchv1.Job](giteaserver.MigrationJobName("demo", "1.27.4")))
	server := controllertest.Named[giteav1alpha1.GiteaServer]("demo")
	h.Eventually("the GiteaServer reports the 1.27.4 migration failed", func(context.Context) (bool, error) {
		return h.Get(server) && server.Status.Migration != nil && server.Status.Migration.State == giteav1alpha1.MigrationFailed, nil
	})

	for _, tc := range []struct {
		name string
		// at is the rollback's first request ("dry-run" or "update" of the Gitea) before which
		// the other writer makes its change, patch.
		at      string
		patch   string
		dryRun  bool
		wantErr string // "" : the rollback succeeds
		wantVer string // the Gitea's spec.version afterwards
		wantCPU string // the Gitea's spec.cache.resources.requests.cpu afterwards, when not ""
	}{
		// In this order: the last one rolls the Gitea back.
		{name: "annotation during a dry-run rollback", at: "dry-run", patch: `{"metadata":{"annotations":{"e2e/touched":"1"}}}`, dryRun: true, wantVer: "1.27.4"},
		{name: "spec during the update", at: "update", patch: `{"spec":{"cache":{"resources":{"requests":{"cpu":"60m"}}}}}`,
			wantErr: "run the rollback again", wantVer: "1.27.4", wantCPU: "60m"},
		{name: "annotation during the update", at: "update", patch: `{"metadata":{"annotations":{"e2e/touched":"2"}}}`, wantVer: "1.27.3", wantCPU: "50m"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			owner := &unstructured.Unstructured{}
			owner.SetGroupVersionKind(giteav1alpha1.GroupVersion.WithKind("Gitea"))
			if err := h.Client.Get(t.Context(), client.ObjectKeyFromObject(g), owner); err != nil {
				t.Fatal(err)
			}
			var done atomic.Bool
			other := func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
				dry := false
				for _, o := range opts {
					if o == client.DryRunAll {
						dry = true
					}
				}
				if (tc.at == "dry-run") == dry && obj.GetObjectKind().GroupVersionKind().Kind == "Gitea" && !done.Swap(true) {
					patched := &giteav1alpha1.Gitea{}
					patched.Namespace, patched.Name = g.Namespace, g.Name
					if err := c.Patch(ctx, patched, client.RawPatch(types.MergePatchType, []byte(tc.patch))); err != nil {
						t.Errorf("the other writer's patch: %v", err)
					}
				}
				return c.Update(ctx, obj, opts...)
			}
			ww, err := client.NewWithWatch(api.Env(t).Config, client.Options{Scheme: h.Client.Scheme()})
			if err != nil {
				t.Fatal(err)
			}
			cl := interceptor.NewClient(ww, interceptor.Funcs{Update: other})
			planner, err := plan.New(history.Options{Scheme: operatorScheme(), Components: controllers.Components(nil), CRDs: crds.Bases})
			if err != nil {
				t.Fatal(err)
			}
			rb := &history.Rollback{Planner: planner, Client: cl, Owner: owner, Record: deployed}
			var out bytes.Buffer
			if tc.dryRun {
				err = rb.DryRun(t.Context(), &out)
			} else {
				err = rb.Apply(t.Context(), &out)
			}
			switch {
			case !done.Load():
				t.Fatalf("the other writer never wrote (no %s request)", tc.at)
			case tc.wantErr == "" && err != nil:
				t.Errorf("rollback: %v\n%s", err, out.String())
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("rollback: error %v, want one saying %q\n%s", err, tc.wantErr, out.String())
			}
			h.Get(g)
			if g.Spec.Version != tc.wantVer {
				t.Errorf("after the rollback the Gitea is at %s, want %s", g.Spec.Version, tc.wantVer)
			}
			if cpu := g.Spec.Cache.Resources.Requests.Cpu().String(); tc.wantCPU != "" && cpu != tc.wantCPU {
				t.Errorf("after the rollback the Gitea's cache asks for %s CPU, want %s", cpu, tc.wantCPU)
			}
			if spec, _ := revision.Spec(g); tc.wantVer == "1.27.3" && revision.SpecHash(spec) != deployed.SpecHash {
				t.Errorf("after the rollback the Gitea's spec hash is %s, want revision %d's %s", revision.SpecHash(spec), deployed.Revision, deployed.SpecHash)
			}
		})
	}
}
