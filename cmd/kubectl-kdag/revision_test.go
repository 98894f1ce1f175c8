package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	giteav1alpha1 "github.com/kdag-dev/kdag/apis/gitea/v1alpha1"
	"github.com/kdag-dev/kdag/controllers"
	"github.com/kdag-dev/kdag/controllers/giteaserver"
	"github.com/kdag-dev/kdag/controllers/postgresql"
	"github.com/kdag-dev/kdag/pkg/controller"
	"github.com/kdag-dev/kdag/pkg/controllertest"
	"github.com/kdag-dev/kdag/pkg/history"
	"github.com/kdag-dev/kdag/pkg/revision"
	"github.com/kdag-dev/kdag/pkg/testing/envtest"
)

// api is an API server with the operator's CRDs, started by the first test that needs it (the
// other tests of this package use fake clients).
var api = controllertest.NewAPIServer(envtest.Options{CRDDirectoryPaths: []string{filepath.Join("..", "..", "config", "crd", "bases")}},
	giteav1alpha1.AddToScheme)

func TestMain(m *testing.M) { api.Main(m) }

// plugin runs the plugin with args and returns its exit code, stdout and stderr.
func plugin(args ...string) (int, string, string) {
	var out, errOut bytes.Buffer
	code := run(context.Background(), args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// TestHistoryAndRollback_RoundTrip (issue 33): the sample deployed by the reference operator on
// envtest has revision 1; an upgrade of its version whose migration has not finished records
// revision 2 (the GiteaServer's spec.version applied); `rollback --dry-run --to 1` shows the live
// plan and writes nothing; `rollback --to 1` brings the Gitea's spec back to revision 1's and its
// children follow (the GiteaServer's spec and the server's Deployment as they were); once an
// upgrade's migration has finished, a rollback below it is refused with the API server's reason
// and writes nothing.
func TestHistoryAndRollback_RoundTrip(t *testing.T) {
	h := controllertest.Start(t, api, controllers.Components(nil, controller.Options{OperatorVersion: "v1.0.0-test"})...)
	kubeconfig := writeKubeconfig(t, api.Env(t))
	ns := []string{"-n", h.Namespace, "--kubeconfig", kubeconfig}
	g := deploySample(t, h)

	code, out, errOut := plugin(append([]string{"history", "gitea/demo"}, ns...)...)
	if code != 0 || !strings.Contains(out, "REVISION  TIME") || !strings.Contains(out, "created PostgreSQL demo-postgresql") ||
		!strings.Contains(out, "v1.0.0-test") {
		t.Fatalf("history after the deploy: code %d\n%s%s", code, out, errOut)
	}
	// The deploy took several reconciles that wrote objects (each child once its blockers were
	// ready): the last of their revisions is the deployed one.
	deployed := lastRevision(t, h, g)
	to := strconv.FormatInt(deployed.Revision, 10)
	server := controllertest.Named[giteav1alpha1.GiteaServer]("demo")
	deployment := controllertest.Named[appsv1.Deployment]("demo")
	h.Get(server)
	h.Get(deployment)
	serverAt1, templateAt1 := server.Spec, deployment.Spec.Template

	// An upgrade whose migration does not finish (its Job is never marked complete).
	h.Update(g, func() { g.Spec.Version = "1.27.4" })
	h.Eventually("the GiteaServer is at 1.27.4", func(context.Context) (bool, error) {
		return h.Get(server) && server.Spec.Version == "1.27.4", nil
	})
	upgrade := waitRevision(t, h, g, deployed.Revision+1)
	if n, ok := findNode(upgrade, "GiteaServer", "demo"); !ok || n.Action != "applied" || !strings.Contains(strings.Join(n.Fields, ","), "spec.version") {
		t.Errorf("revision %d: GiteaServer demo = %+v, want applied with spec.version among its fields", upgrade.Revision, n)
	}
	up := strconv.FormatInt(upgrade.Revision, 10)
	code, out, errOut = plugin(append([]string{"history", "gitea/demo", "--revision", up}, ns...)...)
	if code != 0 || !strings.Contains(out, "Revision "+up+" of Gitea "+h.Namespace+"/demo") || !strings.Contains(out, "version: 1.27.4") ||
		!strings.Contains(out, "spec.version") {
		t.Errorf("history --revision %s: code %d\n%s%s", up, code, out, errOut)
	}

	// While the upgrade's migration runs, a rollback would leave it running under the old
	// server: refused, with the GiteaServer's reason.
	newJob := controllertest.Named[batchv1.Job](giteaserver.MigrationJobName("demo", "1.27.4"))
	h.WaitExists(newJob)
	h.Eventually("the GiteaServer reports the 1.27.4 migration running", func(context.Context) (bool, error) {
		return h.Get(server) && server.Status.Migration != nil && server.Status.Migration.Version == "1.27.4" &&
			server.Status.Migration.State == giteav1alpha1.MigrationRunning, nil
	})
	code, out, errOut = plugin(append([]string{"rollback", "gitea/demo", "--to", to}, ns...)...)
	if code != 1 || !strings.Contains(errOut, "refused, nothing written: the API server would refuse GiteaServer "+h.Namespace+"/demo") ||
		!strings.Contains(errOut, "is running") {
		t.Errorf("rollback while the migration runs: code %d\n%s%s", code, out, errOut)
	}

	// The migration fails: the rollback is what the user needs.
	markFailed(t, h, newJob)
	h.Eventually("the GiteaServer reports the 1.27.4 migration failed", func(context.Context) (bool, error) {
		return h.Get(server) && server.Status.Migration != nil && server.Status.Migration.State == giteav1alpha1.MigrationFailed, nil
	})
	code, out, errOut = plugin(append([]string{"rollback", "gitea/demo", "--to", to, "--dry-run"}, ns...)...)
	if code != 0 || !strings.Contains(out, "dry run, nothing written") || !strings.Contains(out, "Update     GiteaServer "+h.Namespace+"/demo") {
		t.Errorf("rollback --dry-run: code %d\n%s%s", code, out, errOut)
	}
	h.Get(g)
	if g.Spec.Version != "1.27.4" {
		t.Errorf("after the dry run the Gitea is at %s, want 1.27.4 still", g.Spec.Version)
	}

	code, out, errOut = plugin(append([]string{"rollback", "gitea/demo", "--to", to}, ns...)...)
	if code != 0 || !strings.Contains(out, "rolled back to revision "+to) {
		t.Fatalf("rollback --to %s: code %d\n%s%s", to, code, out, errOut)
	}
	h.Get(g)
	first := deployed
	spec, err := revision.Spec(g)
	if err != nil {
		t.Fatal(err)
	}
	if revision.SpecHash(spec) != first.SpecHash {
		t.Errorf("after the rollback the Gitea's spec hash is %s, want revision 1's %s", revision.SpecHash(spec), first.SpecHash)
	}
	h.Eventually("the GiteaServer and its Deployment are as at the deployed revision", func(context.Context) (bool, error) {
		return h.Get(server) && h.Get(deployment) && equality.Semantic.DeepEqual(server.Spec, serverAt1) &&
			equality.Semantic.DeepEqual(deployment.Spec.Template, templateAt1), nil
	})
	h.WaitReady(g)
	back := lastRevision(t, h, g)
	if back.SpecHash != first.SpecHash {
		t.Errorf("revision %d (the rollback's reconcile) has spec hash %s, want revision %s's %s", back.Revision, back.SpecHash, to, first.SpecHash)
	}

	// The upgrade again, this time finished: its migration completed and the server rolled.
	h.Update(g, func() { g.Spec.Version = "1.27.4" })
	h.MarkReady(controllertest.Named[batchv1.Job](giteaserver.MigrationJobName("demo", "1.27.4")))
	defer func() {
		if t.Failed() {
			h.Get(server)
			t.Logf("GiteaServer spec.version %s, status %+v", server.Spec.Version, server.Status)
		}
	}()
	h.Eventually("the server's Deployment runs 1.27.4", func(context.Context) (bool, error) {
		return h.Get(deployment) && strings.Contains(deployment.Spec.Template.Spec.Containers[0].Image, ":1.27.4"), nil
	})
	h.MarkReady(deployment)
	h.WaitReady(g)
	h.Eventually("the Gitea reports 1.27.4 deployed", func(context.Context) (bool, error) {
		return h.Get(g) && g.Status.Version == "1.27.4", nil
	})
	for _, dry := range []bool{true, false} {
		args := append([]string{"rollback", "gitea/demo", "--to", to}, ns...)
		if dry {
			args = append(args, "--dry-run")
		}
		code, out, errOut = plugin(args...)
		if code != 1 || !strings.Contains(errOut, "rollback of Gitea "+h.Namespace+"/demo to revision "+to+" refused, nothing written") ||
			!strings.Contains(errOut, "version cannot move backwards") {
			t.Errorf("rollback across a finished migration (dry run %v): code %d\n%s%s", dry, code, out, errOut)
		}
	}
	h.Get(g)
	if g.Spec.Version != "1.27.4" {
		t.Errorf("after the refused rollback the Gitea is at %s, want 1.27.4", g.Spec.Version)
	}
}

// TestRevisionCommands_UsageErrors: mistakes on the command line exit with 2 and say what to do.
func TestRevisionCommands_UsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"rollback", "gitea/demo"}, "rollback needs --to N"},
		{[]string{"history", "gitea"}, "history takes one owner, TYPE/NAME"},
		{[]string{"history", "gitea/demo", "-o", "wide"}, `unknown output "wide" for history`},
		{[]string{"rollback", "gitea/demo", "--to", "1", "--revision", "2"}, "unknown flag: --revision"},
	} {
		code, _, errOut := plugin(tc.args...)
		if code != 2 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: code %d, stderr %q; want 2 and %q", tc.args, code, errOut, tc.want)
		}
	}
	if code, out, _ := plugin("history", "--help"); code != 0 || !strings.Contains(out, "kubectl kdag rollback TYPE/NAME --to N") {
		t.Errorf("history --help: code %d, stdout %q", code, out)
	}
}

// deploySample creates config/samples/gitea.yaml and marks its workloads ready as they appear, as
// the controllers envtest lacks would, until the Gitea is Ready.
func deploySample(t *testing.T, h *controllertest.Harness) *giteav1alpha1.Gitea {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "config", "samples", "gitea.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	g := &giteav1alpha1.Gitea{}
	if err := yaml.UnmarshalStrict(raw, g); err != nil {
		t.Fatal(err)
	}
	h.Create(g)
	for _, obj := range []client.Object{
		controllertest.Named[corev1.PersistentVolumeClaim](postgresql.DataClaimName("demo-postgresql")),
		controllertest.Named[appsv1.StatefulSet]("demo-postgresql"),
		controllertest.Named[appsv1.Deployment]("demo-valkey"),
		controllertest.Named[corev1.PersistentVolumeClaim]("demo-data"),
		controllertest.Named[batchv1.Job](giteaserver.MigrationJobName("demo", "1.27.3")),
		controllertest.Named[appsv1.Deployment]("demo"),
	} {
		h.MarkReady(obj)
	}
	h.WaitReady(g)
	return g
}

// waitRevision waits until the owner has revision n and returns it.
func waitRevision(t *testing.T, h *controllertest.Harness, owner client.Object, n int64) *revision.Record {
	t.Helper()
	var found *revision.Record
	h.Eventually(fmt.Sprintf("revision %d", n), func(ctx context.Context) (bool, error) {
		records, err := history.List(ctx, h.Client, owner)
		if err != nil {
			return false, err
		}
		for _, r := range records {
			if r.Revision == n {
				found = r
				return true, nil
			}
		}
		return false, nil
	})
	return found
}

// markFailed waits until job exists and writes the status its controller writes once it has
// failed (envtest runs no Job controller).
func markFailed(t *testing.T, h *controllertest.Harness, job *batchv1.Job) {
	t.Helper()
	h.WaitExists(job)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := h.Client.Get(context.Background(), client.ObjectKeyFromObject(job), job); err != nil {
			return err
		}
		now := metav1.Now()
		job.Status = batchv1.JobStatus{StartTime: &now, Failed: 3, Conditions: []batchv1.JobCondition{
			{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue, Reason: batchv1.JobReasonBackoffLimitExceeded, LastTransitionTime: now},
			{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: batchv1.JobReasonBackoffLimitExceeded, LastTransitionTime: now},
		}}
		return h.Client.Status().Update(context.Background(), job)
	})
	if err != nil {
		t.Fatalf("mark Job %s failed: %v", job.Name, err)
	}
}

// lastRevision returns the owner's newest revision.
func lastRevision(t *testing.T, h *controllertest.Harness, owner client.Object) *revision.Record {
	t.Helper()
	records, err := history.List(context.Background(), h.Client, owner)
	if err != nil || len(records) == 0 {
		t.Fatalf("revisions of %s: %v, %v", owner.GetName(), records, err)
	}
	return records[len(records)-1]
}

// findNode returns the change of the revision's node of kind and name.
func findNode(r *revision.Record, kind, name string) (revision.NodeChange, bool) {
	for _, n := range r.Nodes {
		if n.Kind == kind && n.Name == name {
			return n, true
		}
	}
	return revision.NodeChange{}, false
}

// writeKubeconfig writes a kubeconfig that reaches env's API server as its admin.
func writeKubeconfig(t *testing.T, env *envtest.Environment) string {
	t.Helper()
	cfg := env.Config
	kc := clientcmdapi.NewConfig()
	kc.Clusters["envtest"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken}
	kc.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "admin"}
	kc.CurrentContext = "envtest"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return path
}
