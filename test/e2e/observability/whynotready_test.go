package observability

import (
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/controller-runtime/pkg/client"

	giteav1alpha1 "github.com/kdag-dev/kdag/apis/gitea/v1alpha1"
	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/tracing"
)

// upgradeVersion is the Gitea version the test upgrades the sample to (the sample runs
// giteav1alpha1.DefaultGiteaVersion); the upgrade's migration holds Ready back for a while.
const upgradeVersion = "1.27.4"

var traceIDPattern = regexp.MustCompile(`^[0-9a-f]{32}$`)

// TestGiteaObservability_WhyNotReady (issue 15 item 3) answers "why is it not Ready yet?" the way a
// user would, with the reference operator tracing to Jaeger: the Ready sample's
// status.lastReconcile.traceID is a trace in Jaeger rooted in that Gitea's reconcile; during an
// upgrade (spec.version), the status names the node it waits for, and `kubectl kdag tree` (the
// built plugin, run against the cluster) says what it waits for and marks the last reconcile's
// critical path; `kubectl kdag trace` prints that reconcile's Jaeger URL, whose trace is in Jaeger.
func TestGiteaObservability_WhyNotReady(t *testing.T) {
	switch {
	case errors.Is(jaegerErr, errJaegerSkipped):
		t.Skip(jaegerErr)
	case jaegerInstance == nil:
		t.Fatal(jaegerErr)
	}
	plugin, kubeconfig := buildPlugin(t)
	logs := captureLogs(t)
	service := "kdag-e2e-why-" + strconv.FormatUint(rand.Uint64(), 36)
	isolateOTelEnv(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", jaegerInstance.otlpGRPC)
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc") // the endpoint is the gRPC receiver (the default is http/protobuf)
	t.Setenv("OTEL_EXPORTER_OTLP_INSECURE", "true")
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "200")
	shutdownTracing, err := tracing.Setup(t.Context(), tracing.WithServiceName(service))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = shutdownTracing(context.Background()) })

	mgr := startManager(t)
	ns := local.Namespace(t)
	key := client.ObjectKeyFromObject(applySample(t, ns))
	waitGiteaReady(t, key, 2*time.Minute, logs)
	g := &giteav1alpha1.Gitea{}
	if err := cl.Get(t.Context(), key, g); err != nil {
		t.Fatal(err)
	}
	if g.Status.WaitingFor != nil {
		t.Errorf("Ready Gitea: status.waitingFor = %+v, want none", g.Status.WaitingFor)
	}
	if l := g.Status.LastReconcile; l == nil || !traceIDPattern.MatchString(l.TraceID) {
		t.Fatalf("Ready Gitea: status.lastReconcile = %+v, want a trace ID of 32 hex digits", l)
	}
	readyTrace := g.Status.LastReconcile.TraceID
	t.Logf("Ready: status.lastReconcile.traceID %s", readyTrace)

	// Upgrade, watching every write of the Gitea from the Ready one on: the first status of the
	// new generation is not Ready (the GiteaServer has no status for its new spec yet).
	gitea := dynamicGitea(t, ns)
	w, err := gitea.Watch(t.Context(), metav1.ListOptions{FieldSelector: "metadata.name=" + sampleName, ResourceVersion: g.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	readyGeneration := g.Generation
	patch := []byte(`{"spec":{"version":"` + upgradeVersion + `"}}`)
	if err := cl.Patch(t.Context(), g, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatal(err)
	}
	waiting := waitNotReady(t, w, readyGeneration, time.Minute)
	// Freeze the status: the operator stops before the upgrade can finish.
	mgr.stop()
	wf := waiting.Status.WaitingFor
	t.Logf("upgrading: status.waitingFor %s %s/%s %s since %s; lastReconcile %+v", wf.Kind, wf.Namespace, wf.Name, wf.State, wf.Since, waiting.Status.LastReconcile)
	if wf.Kind == "" || wf.Name == "" || wf.State == "" || wf.Since.IsZero() {
		t.Errorf("status.waitingFor = %+v, want a node's kind, name, state and since", wf)
	}
	if l := waiting.Status.LastReconcile; l == nil || !traceIDPattern.MatchString(l.TraceID) {
		t.Fatalf("upgrading: status.lastReconcile = %+v, want a trace ID of 32 hex digits", l)
	}
	if err := cl.Get(t.Context(), key, g); err != nil {
		t.Fatal(err)
	}
	if meta.IsStatusConditionTrue(g.Status.Conditions, kdagv1alpha1.ConditionReady) || g.Status.WaitingFor == nil {
		t.Fatalf("the upgrade finished before the operator stopped: Ready %v, waitingFor %+v; the plugin has nothing to explain",
			meta.FindStatusCondition(g.Status.Conditions, kdagv1alpha1.ConditionReady), g.Status.WaitingFor)
	}
	wf = g.Status.WaitingFor
	last := g.Status.LastReconcile
	if last == nil || !traceIDPattern.MatchString(last.TraceID) || len(last.CriticalPath) == 0 {
		t.Fatalf("not Ready Gitea: status.lastReconcile = %+v, want a trace ID and a critical path", last)
	}

	// kubectl kdag tree: the owner's row says what it waits for and the last reconcile's trace;
	// the critical path is marked and explained.
	tree := runPlugin(t, plugin, "tree", "gitea/"+sampleName, "-n", ns, "--kubeconfig", kubeconfig)
	t.Logf("kubectl kdag tree gitea/%s:\n%s", sampleName, tree)
	lines := strings.Split(tree, "\n")
	if len(lines) < 2 || !strings.HasPrefix(lines[1], "Gitea/"+sampleName+" ") ||
		!strings.Contains(lines[1], "waiting for "+wf.Kind+" "+wf.Namespace+"/"+wf.Name+" for ") ||
		!strings.Contains(lines[1], "trace "+last.TraceID) {
		t.Errorf("the Gitea's row does not say it is waiting for %s %s/%s and the trace %s", wf.Kind, wf.Namespace, wf.Name, last.TraceID)
	}
	for _, p := range last.CriticalPath {
		if !regexp.MustCompile(`─` + regexp.QuoteMeta(p.Kind+"/"+p.Name) + ` \*\s+\S+\s+\S+\s+run `).MatchString(tree) {
			t.Errorf("critical path node %s/%s is not marked with * and its run time", p.Kind, p.Name)
		}
	}
	if !strings.Contains(tree, "\n* on the critical path of its owner's last reconcile") {
		t.Errorf("no legend line for the critical-path marker")
	}

	// kubectl kdag trace: the Jaeger URL of that reconcile; -o id, the ID alone.
	url := runPlugin(t, plugin, "trace", "gitea/"+sampleName, "-n", ns, "--kubeconfig", kubeconfig, "--jaeger-url", jaegerInstance.queryURL+"/")
	if want := jaegerInstance.queryURL + "/trace/" + last.TraceID + "\n"; url != want {
		t.Errorf("kubectl kdag trace printed %q, want %q", url, want)
	}
	if id := runPlugin(t, plugin, "trace", "gitea/"+sampleName, "-n", ns, "--kubeconfig", kubeconfig, "-o", "id"); id != last.TraceID+"\n" {
		t.Errorf("kubectl kdag trace -o id printed %q, want %s", id, last.TraceID)
	}

	flushCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := shutdownTracing(flushCtx); err != nil {
		t.Fatalf("flushing the spans to Jaeger: %v", err)
	}
	traces, _, err := jaegerInstance.queryTraces(t.Context(), service)
	if err != nil {
		t.Fatal(err)
	}
	ix := newTraceIndex(traces)
	for what, id := range map[string]string{
		"the Ready status'":            readyTrace,
		"the watched upgrade's":        waiting.Status.LastReconcile.TraceID,
		"the frozen not-Ready status'": last.TraceID,
	} {
		checkReconcileTrace(t, ix, what, id, ns)
	}
}

// buildPlugin builds cmd/kubectl-kdag into a temporary directory and writes the cluster's
// kubeconfig next to it; it returns both paths.
func buildPlugin(t *testing.T) (plugin, kubeconfig string) {
	t.Helper()
	dir := t.TempDir()
	plugin, kubeconfig = filepath.Join(dir, "kubectl-kdag"), filepath.Join(dir, "kubeconfig")
	cmd := exec.CommandContext(t.Context(), "go", "build", "-o", plugin, "./cmd/kubectl-kdag")
	cmd.Dir = repoRoot
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/kubectl-kdag: %v\n%s", err, out)
	}
	if err := local.WriteKubeconfig(kubeconfig); err != nil {
		t.Fatal(err)
	}
	return plugin, kubeconfig
}

// runPlugin runs the plugin with args and returns its standard output; it fails the test unless
// the plugin exits 0 with nothing on standard error.
func runPlugin(t *testing.T, plugin string, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), plugin, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil || stderr.Len() > 0 {
		t.Fatalf("kubectl-kdag %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, out, stderr.String())
	}
	return string(out)
}

// dynamicGitea returns the dynamic client of the Giteas in ns.
func dynamicGitea(t *testing.T, ns string) dynamic.ResourceInterface {
	t.Helper()
	dyn, err := dynamic.NewForConfig(local.Config)
	if err != nil {
		t.Fatal(err)
	}
	return dyn.Resource(giteav1alpha1.GroupVersion.WithResource("giteas")).Namespace(ns)
}

// waitNotReady reads w's events until a Gitea of a generation after readyGeneration has a status
// of that generation that is not Ready and names the node it waits for, and returns it.
func waitNotReady(t *testing.T, w watch.Interface, readyGeneration int64, timeout time.Duration) *giteav1alpha1.Gitea {
	t.Helper()
	deadline := time.After(timeout)
	var last []byte
	for {
		select {
		case <-deadline:
			t.Fatalf("no status of the upgraded Gitea that is not Ready and names a node within %s; last seen status:\n%s", timeout, last)
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatal("the watch of the Gitea ended")
			}
			u, isObj := ev.Object.(*unstructured.Unstructured)
			if !isObj || ev.Type != watch.Modified {
				continue
			}
			g := &giteav1alpha1.Gitea{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, g); err != nil {
				t.Fatal(err)
			}
			last, _ = json.MarshalIndent(g.Status, "", "  ")
			if g.Generation > readyGeneration && g.Status.ObservedGeneration == g.Generation &&
				!meta.IsStatusConditionTrue(g.Status.Conditions, kdagv1alpha1.ConditionReady) && g.Status.WaitingFor != nil {
				return g
			}
		}
	}
}

// checkReconcileTrace asserts that Jaeger holds the trace id (what names it in errors) and that its
// root is a reconcile span of the sample Gitea in ns.
func checkReconcileTrace(t *testing.T, ix *traceIndex, what, id, ns string) {
	t.Helper()
	for i := range ix.traces {
		tr := &ix.traces[i]
		if tr.TraceID != id {
			continue
		}
		r := root(tr)
		if r == nil || r.OperationName != spanReconcile || r.tag(tagController) != "gitea" || r.tag(tagNamespace) != ns || r.tag(tagName) != sampleName {
			t.Errorf("%s trace %s: roots %v, want one %q span of controller gitea for %s/%s", what, id, rootNames(tr), spanReconcile, ns, sampleName)
			return
		}
		t.Logf("%s trace %s is in Jaeger: %d spans under the reconcile of gitea %s/%s", what, id, len(tr.Spans), ns, sampleName)
		return
	}
	t.Errorf("%s trace %s is not in Jaeger (%d traces of the service)", what, id, len(ix.traces))
}
