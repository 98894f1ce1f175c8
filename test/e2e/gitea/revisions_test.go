package gitea

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/controller-runtime/pkg/client"

	giteav1alpha1 "github.com/kdag-dev/kdag/apis/gitea/v1alpha1"
	crds "github.com/kdag-dev/kdag/config/crd"
	"github.com/kdag-dev/kdag/controllers"
	"github.com/kdag-dev/kdag/pkg/history"
	"github.com/kdag-dev/kdag/pkg/revision"
	"github.com/kdag-dev/kdag/pkg/testing/poll"
)

// revisionCommand runs `kubectl kdag history|rollback` (pkg/history, as the plugin runs it)
// against the local cluster in ns and returns its output and error.
func revisionCommand(t *testing.T, ns string, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	err := history.Run(t.Context(), args[0], append(args[1:], "-n", ns), &out, history.Options{
		Scheme: scheme, Components: controllers.Components(nil), CRDs: crds.Bases, RESTConfig: local.Config,
	})
	return out.String(), err
}

// TestSample_HistoryAndRollback (issue 33), on the local cluster: a change of the sample's server
// resources is rolled back to the deployed revision, and the Gitea and its server's Deployment are
// as they were; an upgrade whose migration runs (its pods wait for a node pool) cannot be rolled
// back, nor one whose migration finished, and each refusal says why and writes nothing.
func TestSample_HistoryAndRollback(t *testing.T) {
	ns := local.Namespace(t)
	startManager(t, ns, "e2e")
	key := applySample(t, ns, "gitea.yaml")
	g := waitGiteaReady(t, key, readyTimeout)
	list := func() []*revision.Record {
		records, err := history.List(t.Context(), cl, g)
		if err != nil {
			t.Fatal(err)
		}
		return records
	}
	records := list()
	deployed := records[len(records)-1]
	to := strconv.FormatInt(deployed.Revision, 10)
	resourcesAt := get(t, ns, "demo", &appsv1.Deployment{}).Spec.Template.Spec.Containers[0].Resources

	mergePatch(t, g, `{"spec":{"resources":{"requests":{"cpu":"200m","memory":"256Mi"}}}}`)
	poll.Until(t, "the change's revision", readyTimeout, func(context.Context) string {
		if r := list(); r[len(r)-1].Revision > deployed.Revision {
			return ""
		}
		return "no new revision"
	})
	g = waitGiteaReady(t, key, readyTimeout)
	out, err := revisionCommand(t, ns, "history", "gitea/demo")
	t.Logf("kubectl kdag history gitea/demo:\n%s", out)
	if err != nil || !strings.Contains(out, "created PostgreSQL demo-postgresql") || !strings.Contains(out, "spec.resources.requests.cpu") {
		t.Fatalf("history: %v\n%s", err, out)
	}
	out, err = revisionCommand(t, ns, "history", "gitea/demo", "--revision", strconv.FormatInt(list()[len(list())-1].Revision, 10))
	t.Logf("kubectl kdag history gitea/demo --revision N:\n%s", out)
	if err != nil {
		t.Fatalf("history --revision: %v\n%s", err, out)
	}
	out, err = revisionCommand(t, ns, "rollback", "gitea/demo", "--to", to, "--dry-run")
	t.Logf("kubectl kdag rollback gitea/demo --to %s --dry-run:\n%s", to, out)
	if err != nil || !strings.Contains(out, "Update     GiteaServer "+ns+"/demo") {
		t.Fatalf("rollback --dry-run: %v\n%s", err, out)
	}
	out, err = revisionCommand(t, ns, "rollback", "gitea/demo", "--to", to)
	t.Logf("kubectl kdag rollback gitea/demo --to %s:\n%s", to, out)
	if err != nil || !strings.Contains(out, "rolled back to revision "+to) {
		t.Fatalf("rollback --to %s: %v\n%s", to, err, out)
	}
	poll.Until(t, "the server's resources as deployed", readyTimeout, func(context.Context) string {
		if r := get(t, ns, "demo", &appsv1.Deployment{}).Spec.Template.Spec.Containers[0].Resources; !equality.Semantic.DeepEqual(r, resourcesAt) {
			return fmt.Sprintf("resources %v", r)
		}
		return ""
	})
	g = waitGiteaReady(t, key, readyTimeout)
	if spec, _ := revision.Spec(g); revision.SpecHash(spec) != deployed.SpecHash {
		t.Errorf("after the rollback the Gitea's spec hash is %s, want revision %s's %s", revision.SpecHash(spec), to, deployed.SpecHash)
	}

	// An upgrade whose migration runs but cannot finish yet: its pods wait for a node pool.
	mergePatch(t, g, `{"spec":{"version":"1.27.4","nodeSelector":{"kdag-e2e/pool":"`+ns+`"}}}`)
	srv := &giteav1alpha1.GiteaServer{}
	poll.Until(t, "the 1.27.4 migration runs", readyTimeout, func(ctx context.Context) string {
		if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: "demo"}, srv); err != nil {
			return err.Error()
		}
		if m := srv.Status.Migration; m == nil || m.Version != "1.27.4" || m.State != giteav1alpha1.MigrationRunning {
			return fmt.Sprintf("migration %+v", m)
		}
		return ""
	})
	out, err = revisionCommand(t, ns, "rollback", "gitea/demo", "--to", to)
	t.Logf("rollback while the migration runs: %v\n%s", err, out)
	var refused *history.RefusedError
	if !errors.As(err, &refused) || !strings.Contains(err.Error(), "is running") {
		t.Errorf("rollback while the migration runs: %v\n%s", err, out)
	}

	// The node pool appears: the migration finishes and the server rolls; no way back below it.
	nodePool(t, ns)
	poll.Until(t, "status.version 1.27.4", readyTimeout, func(ctx context.Context) string {
		if err := cl.Get(ctx, key, g); err != nil {
			return err.Error()
		}
		if g.Status.Version != "1.27.4" {
			return fmt.Sprintf("status.version %q", g.Status.Version)
		}
		return ""
	})
	out, err = revisionCommand(t, ns, "rollback", "gitea/demo", "--to", to)
	t.Logf("rollback across a finished migration: %v\n%s", err, out)
	if !errors.As(err, &refused) || !strings.Contains(err.Error(), "version cannot move backwards") {
		t.Errorf("rollback across a finished migration: %v\n%s", err, out)
	}
	if v := get(t, ns, "demo", &giteav1alpha1.Gitea{}).Spec.Version; v != "1.27.4" {
		t.Errorf("after the refused rollbacks the Gitea is at %s, want 1.27.4", v)
	}
}
