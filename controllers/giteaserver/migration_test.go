package giteaserver

import (
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	giteav1alpha1 "github.com/kdag-dev/kdag/apis/gitea/v1alpha1"
	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/controllertest"
	"github.com/kdag-dev/kdag/pkg/plan"
)

// upgrading is the defaulted GiteaServer at version 1.27.4 whose status records migration of
// prevVersion in state.
func upgrading(prevVersion string, state giteav1alpha1.MigrationState) *giteav1alpha1.GiteaServer {
	return defaulted(func(s *giteav1alpha1.GiteaServer) {
		s.Spec.Version = "1.27.4"
		s.Status.Migration = &giteav1alpha1.MigrationStatus{Version: prevVersion, State: state}
	})
}

// TestAddResources_MigrationsNeverOverlapNorRepeat (issue 20, items 3 and 4): a migration of an
// earlier version still running stays in the graph and the new one waits for it; a migration
// recorded as succeeded is never run again; the server waits for its migration in order only.
func TestAddResources_MigrationsNeverOverlapNorRepeat(t *testing.T) {
	const oldJob, newJob = "demo-migrate-1-27-3", "demo-migrate-1-27-4"
	for _, tc := range []struct {
		name         string
		server       *giteav1alpha1.GiteaServer
		wantOld      bool // the earlier migration's node, Finished, the new one after it
		wantFinished bool // the current migration is Finished
	}{
		{"first deploy", defaulted(func(s *giteav1alpha1.GiteaServer) { s.Spec.Version = "1.27.4" }), false, false},
		{"upgrade while the previous migration runs", upgrading("1.27.3", giteav1alpha1.MigrationRunning), true, false},
		{"upgrade while the previous migration waits to start", upgrading("1.27.3", giteav1alpha1.MigrationPending), true, false},
		{"upgrade after the previous migration succeeded", upgrading("1.27.3", giteav1alpha1.MigrationSucceeded), false, false},
		{"upgrade after the previous migration failed", upgrading("1.27.3", giteav1alpha1.MigrationFailed), false, false},
		{"this version's migration succeeded", upgrading("1.27.4", giteav1alpha1.MigrationSucceeded), false, true},
		{"this version's migration runs", upgrading("1.27.4", giteav1alpha1.MigrationRunning), false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := planOf(t, tc.server)
			old, cur, deploy := node(p, "Job", oldJob), node(p, "Job", newJob), node(p, "Deployment", "demo")
			if (old != nil) != tc.wantOld {
				t.Fatalf("earlier migration Job in the graph: %v, want %v", old != nil, tc.wantOld)
			}
			if old != nil && (!old.CreateOnly || !old.Finished || !slices.Contains(cur.OrderOnly, old.ID)) {
				t.Errorf("earlier migration: create-only %v finished %v, new one after it (order only) %v; want all",
					old.CreateOnly, old.Finished, slices.Contains(cur.OrderOnly, old.ID))
			}
			if cur.Finished != tc.wantFinished {
				t.Errorf("current migration Finished = %v, want %v", cur.Finished, tc.wantFinished)
			}
			if !slices.Contains(deploy.OrderOnly, cur.ID) {
				t.Errorf("the Deployment waits for its migration with %v (order-only %v), want an order-only edge", deploy.Blockers, deploy.OrderOnly)
			}
		})
	}
}

// TestReportStatus_MigrationFollowsTheGraph: while an earlier migration runs, the status reports
// it; a success recorded for this version stays when its Job is gone.
func TestReportStatus_MigrationFollowsTheGraph(t *testing.T) {
	oldJob, curJob := aJob("demo-migrate-1-27-3"), aJob("demo-migrate-1-27-4")
	graph := func() *controllertest.Graph { return controllertest.NewGraph(t, scheme) }
	for _, tc := range []struct {
		name        string
		server      *giteav1alpha1.GiteaServer
		graph       *controllertest.Graph
		wantVersion string
		wantState   giteav1alpha1.MigrationState
	}{
		{"the earlier migration still runs", upgrading("1.27.3", giteav1alpha1.MigrationRunning),
			graph().With(oldJob, kdagv1alpha1.NodeWaiting).WithoutObject(curJob, kdagv1alpha1.NodeBlocked), "1.27.3", giteav1alpha1.MigrationRunning},
		{"the earlier migration finished: the new one is pending", upgrading("1.27.3", giteav1alpha1.MigrationRunning),
			graph().With(oldJob, kdagv1alpha1.NodeReady).WithoutObject(curJob, kdagv1alpha1.NodeBlocked), "1.27.4", giteav1alpha1.MigrationPending},
		{"success recorded, Job gone", upgrading("1.27.4", giteav1alpha1.MigrationSucceeded),
			graph().WithoutObject(curJob, kdagv1alpha1.NodeReady), "1.27.4", giteav1alpha1.MigrationSucceeded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := reportStatus(tc.server, false, tc.graph); err != nil {
				t.Fatal(err)
			}
			m := tc.server.Status.Migration
			if m == nil || m.Version != tc.wantVersion || m.State != tc.wantState {
				t.Errorf("migration %+v, want version %s %s", m, tc.wantVersion, tc.wantState)
			}
		})
	}
}

// TestEnv_ExtraEnvOverridesOperatorVariables (issue 20, item 7): extraEnv replaces the operator's
// variable of the same name in place (server and Jobs), and adds the others; no name twice.
func TestEnv_ExtraEnvOverridesOperatorVariables(t *testing.T) {
	s := defaulted(func(s *giteav1alpha1.GiteaServer) {
		s.Spec.ExtraEnv = []corev1.EnvVar{{Name: "GITEA_WORK_DIR", Value: "/data"}, {Name: "HOME", Value: "/data/home"}, {Name: "EXTRA", Value: "1"}}
	})
	p := planOf(t, s)
	for _, n := range p.Nodes {
		var containers []corev1.Container
		switch n.ID.Kind {
		case "Deployment":
			containers = deploymentOf(t, n).Spec.Template.Spec.Containers
		case "Job":
			containers = jobOf(t, n).Spec.Template.Spec.Containers
		default:
			continue
		}
		env := containers[0].Env
		seen := map[string]int{}
		for _, e := range env {
			seen[e.Name]++
		}
		for name, count := range seen {
			if count > 1 {
				t.Errorf("%s: %s %d times", n.ID, name, count)
			}
		}
		get := func(name string) string {
			for _, e := range env {
				if e.Name == name {
					return e.Value
				}
			}
			return "<absent>"
		}
		if get("GITEA_WORK_DIR") != "/data" || get("HOME") != "/data/home" || get("EXTRA") != "1" {
			t.Errorf("%s: GITEA_WORK_DIR %q HOME %q EXTRA %q, want the user's", n.ID, get("GITEA_WORK_DIR"), get("HOME"), get("EXTRA"))
		}
		if i := slices.IndexFunc(env, func(e corev1.EnvVar) bool { return e.Name == "GITEA_WORK_DIR" }); i < 0 || env[len(env)-1].Name != "EXTRA" {
			t.Errorf("%s: overrides not in place: %v", n.ID, env)
		}
	}
}

func deploymentOf(t *testing.T, n plan.PlannedNode) *appsv1.Deployment {
	t.Helper()
	d, ok := n.Object.(*appsv1.Deployment)
	if !ok {
		t.Fatalf("%s is a %T", n.ID, n.Object)
	}
	return d
}

func jobOf(t *testing.T, n plan.PlannedNode) *batchv1.Job {
	t.Helper()
	j, ok := n.Object.(*batchv1.Job)
	if !ok {
		t.Fatalf("%s is a %T", n.ID, n.Object)
	}
	return j
}
