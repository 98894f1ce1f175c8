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

// TestSample_HistoryAndRollback (issue 33), on the local cluster: the sample's upgrade whose
// migration cannot run yet (its pods wait for a node pool) is rolled back to the deployed
// revision, and the Gitea and its server are as they were; an upgrade whose migration finished
// cannot be rolled back, and the refusal says why.
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
	out, err := revisionCommand(t, ns, "history", "gitea/demo")
	if err != nil || !strings.Contains(out, "created PostgreSQL demo-postgresql") {
		t.Fatalf("history after the deploy: %v\n%s", err, out)
	}
	imageAt := serverImage(get(t, ns, "demo", &appsv1.Deployment{}))

	// An upgrade whose migration cannot run: its pods wait for a node pool no node has.
	mergePatch(t, g, `{"spec":{"version":"1.27.4","nodeSelector":{"kdag-e2e/pool":"`+ns+`"}}}`)
	poll.Until(t, "the upgrade's revision", readyTimeout, func(context.Context) string {
		if r := list(); r[len(r)-1].Revision > deployed.Revision {
			return ""
		}
		return "no new revision"
	})
	out, err = revisionCommand(t, ns, "rollback", "gitea/demo", "--to", to)
	if err != nil || !strings.Contains(out, "rolled back to revision "+to) {
		t.Fatalf("rollback --to %s: %v\n%s", to, err, out)
	}
	g = waitGiteaReady(t, key, readyTimeout)
	if spec, _ := revision.Spec(g); revision.SpecHash(spec) != deployed.SpecHash || g.Spec.Version != "1.27.3" {
		t.Errorf("after the rollback: version %s, spec hash %s; want revision %s's (%s)", g.Spec.Version, revision.SpecHash(spec), to, deployed.SpecHash)
	}
	if img := serverImage(get(t, ns, "demo", &appsv1.Deployment{})); img != imageAt {
		t.Errorf("after the rollback the server runs %s, want %s", img, imageAt)
	}
	if v := get(t, ns, "demo", &giteav1alpha1.GiteaServer{}).Spec.Version; v != "1.27.3" {
		t.Errorf("after the rollback the GiteaServer is at %s, want 1.27.3", v)
	}

	// The upgrade again, finished this time; then no rollback below it.
	mergePatch(t, g, `{"spec":{"version":"1.27.4"}}`)
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
	var refused *history.RefusedError
	if !errors.As(err, &refused) || !strings.Contains(err.Error(), "version cannot move backwards") {
		t.Errorf("rollback across a finished migration: %v\n%s", err, out)
	}
	if v := get(t, ns, "demo", &giteav1alpha1.Gitea{}).Spec.Version; v != "1.27.4" {
		t.Errorf("after the refused rollback the Gitea is at %s, want 1.27.4", v)
	}
}
