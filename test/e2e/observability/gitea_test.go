package observability

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	giteav1alpha1 "github.com/kdag-dev/kdag/apis/gitea/v1alpha1"
	"github.com/kdag-dev/kdag/controllers"
	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/controllertest"
	"github.com/kdag-dev/kdag/pkg/testing/poll"
	"github.com/kdag-dev/kdag/pkg/tracing"
)

// The sample and the names the operator derives from it (controllers/gitea/children.go,
// controllers/postgresql/names.go).
const (
	sampleName     = "demo"
	postgresName   = "demo-postgresql"
	valkeyName     = "demo-valkey"
	serverName     = "demo"
	passwordSecret = "demo-postgresql-credentials"
)

// Span names and attributes of pkg/controller/observe.go.
const (
	spanReconcile  = "reconcile"
	spanBuildGraph = "build graph"
	spanRunGraph   = "run graph"
	spanNode       = "node"
	spanApply      = "apply"
	spanPrune      = "prune"
	tagController  = "kdag.controller"
	tagNamespace   = "k8s.namespace.name"
	tagName        = "k8s.object.name"
	tagGVK         = "k8s.gvk"
	tagAction      = "kdag.node.action"
	tagOutcome     = "kdag.node.outcome"
	tagBlockedBy   = "kdag.node.blocked_by"
	tagPruned      = "kdag.prune.deleted"
	tagSpanKind    = "span.kind" // Jaeger's rendering of an OpenTelemetry span kind
)

// TestGiteaObservability runs the reference operator in-process on the sample Gitea, with traces
// exported to Jaeger over OTLP, until the application is Ready; then switches its cache off, so that
// the Valkey child is pruned (the one reconcile log line kdag writes on a healthy path). It then
// checks what an operator would look at: the metrics endpoint, the log's trace correlation and the
// traces in Jaeger.
func TestGiteaObservability(t *testing.T) {
	logs := captureLogs(t)
	service := "kdag-e2e-" + strconv.FormatUint(rand.Uint64(), 36)

	shutdownTracing := func(context.Context) error { return nil }
	if jaegerInstance != nil {
		isolateOTelEnv(t)
		// Read by the OTLP exporter and the SDK's batch processor when Setup creates them.
		t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", jaegerInstance.otlpGRPC)
		t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc") // the endpoint is the gRPC receiver (the default is http/protobuf)
		t.Setenv("OTEL_EXPORTER_OTLP_INSECURE", "true")
		t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "200")
		shutdown, err := tracing.Setup(t.Context(), tracing.WithServiceName(service))
		if err != nil {
			t.Fatal(err)
		}
		shutdownTracing = shutdown
		t.Cleanup(func() { _ = shutdown(context.Background()) }) // once: a no-op after the flush below
	}

	started := time.Now()
	mgr := startManager(t)
	ns := local.Namespace(t)
	gitea := applySample(t, ns)
	key := client.ObjectKeyFromObject(gitea)
	waitGiteaReady(t, key, 2*time.Minute, logs)
	t.Logf("Gitea %s Ready in %s", key, time.Since(started).Round(time.Millisecond))

	secret := &corev1.Secret{}
	if err := cl.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: passwordSecret}, secret); err != nil {
		t.Fatal(err)
	}
	password := string(secret.Data[giteav1alpha1.DatabaseSecretPasswordKey])
	if len(password) < 8 {
		t.Fatalf("Secret %s has password %q: want a generated one", passwordSecret, password)
	}

	// Cache off: the Gitea reconcile prunes the Valkey and logs it, with its trace context.
	patch := []byte(`{"spec":{"cache":{"enabled":false}}}`)
	if err := cl.Patch(t.Context(), gitea, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatal(err)
	}
	poll.True(t, "Valkey "+valkeyName+" pruned", time.Minute, func(ctx context.Context) bool {
		err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: valkeyName}, &giteav1alpha1.Valkey{})
		return apierrors.IsNotFound(err)
	})
	waitGiteaReady(t, key, time.Minute, logs)
	var pruned map[string]any
	poll.True(t, "the \"pruned\" log line", 10*time.Second, func(context.Context) bool {
		pruned = logs.find(func(l map[string]any) bool {
			return l["msg"] == "pruned" && l["controller"] == "gitea" && strings.Contains(fmt.Sprint(l["node"]), valkeyName)
		})
		return pruned != nil
	})

	scrape, err := get(t.Context(), mgr.httpClient, mgr.metricsURL)
	if err != nil {
		t.Fatal(err)
	}
	mgr.stop()
	flushCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := shutdownTracing(flushCtx); err != nil {
		t.Fatalf("flushing the spans to Jaeger: %v", err)
	}
	t.Logf("reconciled, scraped and flushed in %s", time.Since(started).Round(time.Millisecond))

	t.Run("Metrics", func(t *testing.T) { checkMetrics(t, string(scrape)) })

	t.Run("Logs", func(t *testing.T) {
		if jaegerInstance == nil {
			t.Skip("tracing is off without Jaeger: logs carry no trace context")
		}
		if id, _ := pruned[tracing.LogKeyTraceID].(string); len(id) != 32 {
			t.Errorf("reconcile log line %v: want a %s of 32 hex digits", pruned, tracing.LogKeyTraceID)
		}
		if id, _ := pruned[tracing.LogKeySpanID].(string); len(id) != 16 {
			t.Errorf("reconcile log line %v: want a %s of 16 hex digits", pruned, tracing.LogKeySpanID)
		}
	})

	t.Run("Traces", func(t *testing.T) {
		switch {
		case errors.Is(jaegerErr, errJaegerSkipped):
			t.Skip(jaegerErr)
		case jaegerInstance == nil:
			t.Fatal(jaegerErr)
		}
		start := time.Now()
		traces, raw, err := jaegerInstance.queryTraces(t.Context(), service)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("Jaeger returned %d traces of %s (%d bytes) in %s", len(traces), service, len(raw), time.Since(start).Round(time.Millisecond))
		if path := os.Getenv("KDAG_E2E_JAEGER_DUMP"); path != "" {
			if err := os.WriteFile(path, raw, 0o600); err != nil {
				t.Error(err)
			}
		}
		prunedTrace, _ := pruned[tracing.LogKeyTraceID].(string)
		checkTraces(t, newTraceIndex(traces), ns, prunedTrace)
		checkNoSecret(t, raw, password)
	})
}

// manager is the operator's manager running in the test process.
type manager struct {
	metricsURL string
	httpClient *http.Client
	stop       func()
}

// startManager runs the reference operator as main.go does: the Gitea scheme, the cache options,
// every controller, the API client instrumented for tracing; its metrics on a free loopback port.
func startManager(t *testing.T) *manager {
	t.Helper()
	ports, err := freePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	metricsAddr := "127.0.0.1:" + strconv.Itoa(ports[0])
	mgr := controllertest.StartManager(t, local.Config, scheme, controllers.Components(nil), controllertest.ManagerOptions{
		MetricsAddr: metricsAddr,
		Wraps:       []func(http.RoundTripper) http.RoundTripper{tracing.WrapTransport},
		Logger:      ctrl.Log, // the test reads the log lines (captureLogs)
	})
	m := &manager{metricsURL: "http://" + metricsAddr + "/metrics", httpClient: newHTTPClient()}
	var once sync.Once
	m.stop = func() {
		once.Do(func() {
			_ = mgr.Stop() // the test's cleanup reports its error
			m.httpClient.CloseIdleConnections()
		})
	}
	t.Cleanup(m.stop)
	return m
}

// isolateOTelEnv unsets the environment's OTEL_* variables for the test, so that only what the test
// sets configures the exporter.
func isolateOTelEnv(t *testing.T) {
	t.Helper()
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "OTEL_") {
			t.Setenv(k, "") // restores the value after the test
			if err := os.Unsetenv(k); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// applySample creates config/samples/gitea.yaml in ns.
func applySample(t *testing.T, ns string) *unstructured.Unstructured {
	t.Helper()
	docs, err := yamlDocuments(repoRoot + "/config/samples/gitea.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) != 1 {
		t.Fatalf("config/samples/gitea.yaml: %d documents, want 1", len(docs))
	}
	obj := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(docs[0], &obj.Object); err != nil {
		t.Fatal(err)
	}
	if obj.GetName() != sampleName {
		t.Fatalf("the sample is named %q, want %q (the names the test expects derive from it)", obj.GetName(), sampleName)
	}
	obj.SetNamespace(ns)
	if err := cl.Create(t.Context(), obj); err != nil {
		t.Fatal(err)
	}
	return obj
}

// waitGiteaReady waits until the Gitea is Ready for its current generation.
func waitGiteaReady(t *testing.T, key client.ObjectKey, timeout time.Duration, logs *logCapture) {
	t.Helper()
	g := &giteav1alpha1.Gitea{}
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		return cl.Get(ctx, key, g) == nil &&
			g.Status.ObservedGeneration == g.Generation &&
			meta.IsStatusConditionTrue(g.Status.Conditions, kdagv1alpha1.ConditionReady), nil
	})
	if err != nil {
		status, _ := json.MarshalIndent(g.Status, "", "  ")
		t.Fatalf("Gitea %s not Ready (generation %d) within %s; status:\n%s\nlast log lines:\n%s",
			key, g.Generation, timeout, status, logs.tail(40))
	}
}

// logCapture keeps the manager's log lines (controller-runtime's logger, process-wide) as decoded
// JSON objects.
type logCapture struct {
	mu    sync.Mutex
	lines []map[string]any
	raw   []string
}

// captureLogs points controller-runtime's logger (and so kdag's) at a new capture. The logger is
// process-wide and outlives the test; lines logged after it are still captured, never written to a
// finished test.
func captureLogs(t *testing.T) *logCapture {
	t.Helper()
	c := &logCapture{}
	ctrl.SetLogger(funcr.NewJSON(func(obj string) {
		line := map[string]any{}
		_ = json.Unmarshal([]byte(obj), &line)
		c.mu.Lock()
		c.lines = append(c.lines, line)
		c.raw = append(c.raw, obj)
		c.mu.Unlock()
	}, funcr.Options{Verbosity: 1}))
	return c
}

// find returns the first line match accepts, nil when none does.
func (c *logCapture) find(match func(map[string]any) bool) map[string]any {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, l := range c.lines {
		if match(l) {
			return l
		}
	}
	return nil
}

func (c *logCapture) tail(n int) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return strings.Join(c.raw[max(0, len(c.raw)-n):], "\n")
}

// checkMetrics asserts the kdag series of a scrape of the manager's metrics endpoint after the
// sample was reconciled to Ready and its Valkey pruned.
func checkMetrics(t *testing.T, text string) {
	e, err := parseExposition(text)
	if err != nil {
		t.Fatal(err)
	}
	if names := e.names("kdag_"); len(names) == 0 {
		t.Fatalf("no kdag_ series in the scrape:\n%.2000s", text)
	} else {
		t.Logf("kdag series: %v", names)
	}
	for name, typ := range map[string]string{
		"kdag_graph_run_duration_seconds": "histogram",
		"kdag_node_duration_seconds":      "histogram",
		"kdag_nodes_total":                "counter",
		"kdag_nodes_waiting":              "gauge",
		"kdag_prune_deletions_total":      "counter",
	} {
		if got := e.types[name]; got != typ {
			t.Errorf("# TYPE %s is %q, want %s", name, got, typ)
		}
	}
	positive := func(name string, labels map[string]string) {
		t.Helper()
		v, ok := e.sum(name, labels)
		if !ok || v <= 0 {
			t.Errorf("%s%v = %v (present: %v), want > 0; series of %s: %v", name, labels, v, ok, name, e.find(name, nil))
		}
	}
	for _, c := range []string{"gitea", "postgresql", "valkey", "giteaserver"} {
		positive("kdag_graph_run_duration_seconds_count", map[string]string{"controller": c})
	}
	// Objects that are ready as soon as they exist (Secrets, ConfigMaps, Services).
	positive("kdag_nodes_total", map[string]string{"controller": "giteaserver", "action": "created", "outcome": string(kdagv1alpha1.NodeReady)})
	// The children, not ready when created: their dependents waited.
	positive("kdag_nodes_total", map[string]string{"controller": "gitea", "action": "created", "outcome": string(kdagv1alpha1.NodeWaiting)})
	positive("kdag_nodes_total", map[string]string{"controller": "gitea", "action": "skipped", "outcome": string(kdagv1alpha1.NodeReady)})
	positive("kdag_node_duration_seconds_bucket", map[string]string{"controller": "gitea", "kind": "GiteaServer", "action": "created", "le": "+Inf"})
	positive("kdag_node_duration_seconds_count", map[string]string{"controller": "postgresql", "kind": "StatefulSet"})
	if v, ok := e.sum("kdag_prune_deletions_total", map[string]string{"controller": "gitea", "kind": "Valkey"}); !ok || v != 1 {
		t.Errorf("kdag_prune_deletions_total{controller=gitea,kind=Valkey} = %v (present: %v), want 1", v, ok)
	}
	// Every controller reported its waiting nodes; the Gitea is Ready, so none of its wait.
	for _, c := range []string{"gitea", "postgresql", "giteaserver"} {
		if len(e.find("kdag_nodes_waiting", map[string]string{"controller": c})) != 1 {
			t.Errorf("no kdag_nodes_waiting{controller=%q}: %v", c, e.find("kdag_nodes_waiting", nil))
		}
	}
	if v, _ := e.sum("kdag_nodes_waiting", map[string]string{"controller": "gitea"}); v != 0 {
		t.Errorf("kdag_nodes_waiting{controller=gitea} = %v after Ready, want 0", v)
	}
}

// traceIndex finds the spans of Jaeger's answer.
type traceIndex struct {
	traces []jaegerTrace
	byID   map[string]*jaegerSpan // traceID/spanID -> span
}

func newTraceIndex(traces []jaegerTrace) *traceIndex {
	ix := &traceIndex{traces: traces, byID: map[string]*jaegerSpan{}}
	for i := range traces {
		for j := range traces[i].Spans {
			s := &traces[i].Spans[j]
			ix.byID[s.TraceID+"/"+s.SpanID] = s
		}
	}
	return ix
}

func (ix *traceIndex) span(traceID, spanID string) *jaegerSpan { return ix.byID[traceID+"/"+spanID] }

// root returns the trace's root span (no parent), nil when there is none or several.
func root(tr *jaegerTrace) *jaegerSpan {
	var found *jaegerSpan
	for i := range tr.Spans {
		if tr.Spans[i].parent() == "" {
			if found != nil {
				return nil
			}
			found = &tr.Spans[i]
		}
	}
	return found
}

// children returns the spans of tr whose parent is parent, named name ("" for any).
func children(tr *jaegerTrace, parent *jaegerSpan, name string) []*jaegerSpan {
	var out []*jaegerSpan
	for i := range tr.Spans {
		s := &tr.Spans[i]
		if s.parent() == parent.SpanID && (name == "" || s.OperationName == name) {
			out = append(out, s)
		}
	}
	return out
}

// reconcileTraces returns the traces whose root is a reconcile of controller for the object name
// in ns.
func (ix *traceIndex) reconcileTraces(controller, ns, name string) []*jaegerTrace {
	var out []*jaegerTrace
	for i := range ix.traces {
		tr := &ix.traces[i]
		if r := root(tr); r != nil && r.OperationName == spanReconcile && r.tag(tagController) == controller &&
			r.tag(tagNamespace) == ns && r.tag(tagName) == name {
			out = append(out, tr)
		}
	}
	return out
}

// giteaRun is one Gitea reconcile's trace with its graph's spans.
type giteaRun struct {
	trace           *jaegerTrace
	root, run       *jaegerSpan
	nodes           map[string]*jaegerSpan // k8s.object.name -> node span
	buildGraphCount int
}

func (ix *traceIndex) giteaRuns(ns string) []giteaRun {
	var out []giteaRun
	for _, tr := range ix.reconcileTraces("gitea", ns, sampleName) {
		r := giteaRun{trace: tr, root: root(tr), nodes: map[string]*jaegerSpan{}}
		r.buildGraphCount = len(children(tr, r.root, spanBuildGraph))
		if runs := children(tr, r.root, spanRunGraph); len(runs) == 1 {
			r.run = runs[0]
			for _, n := range children(tr, r.run, spanNode) {
				r.nodes[n.tag(tagName)] = n
			}
		}
		out = append(out, r)
	}
	return out
}

// checkTraces asserts the traces of the Gitea's reconciles and of its children's.
func checkTraces(t *testing.T, ix *traceIndex, ns, prunedTraceID string) {
	// Every trace is one reconcile: the API requests of informers and leader election, which have no
	// span in their context, start none (tracing.WrapTransport's filter).
	for i := range ix.traces {
		if r := root(&ix.traces[i]); r == nil || r.OperationName != spanReconcile {
			t.Errorf("trace %s is not rooted in a single %q span: roots %v", ix.traces[i].TraceID, spanReconcile, rootNames(&ix.traces[i]))
		}
	}
	runs := ix.giteaRuns(ns)
	if len(runs) == 0 {
		t.Fatalf("no trace rooted in a gitea reconcile of %s/%s among %d traces", ns, sampleName, len(ix.traces))
	}
	for _, r := range runs {
		if r.buildGraphCount != 1 || r.run == nil {
			t.Errorf("trace %s: reconcile has %d %q and run graph %v, want one of each as its children",
				r.trace.TraceID, r.buildGraphCount, spanBuildGraph, r.run != nil)
		}
	}

	// The first reconcile: the database and the cache are created and not ready yet, so the server
	// is blocked; its node still has a (zero-length) span saying by what.
	blocked := false
	for _, r := range runs {
		if s := r.nodes[serverName]; s != nil && s.tag(tagOutcome) == string(kdagv1alpha1.NodeBlocked) && s.tag(tagBlockedBy) != "" &&
			r.nodes[postgresName] != nil && r.nodes[postgresName].tag(tagAction) == "created" {
			blocked = true
		}
	}
	if !blocked {
		t.Errorf("no gitea reconcile that created %s with node %s Blocked (and %s set)", postgresName, serverName, tagBlockedBy)
	}

	// The reconcile that created the GiteaServer once both blockers were Ready: one trace with the
	// three node spans, the server's linked to its blockers' spans of the same run.
	var created *giteaRun
	for i := range runs {
		if s := runs[i].nodes[serverName]; s != nil && s.tag(tagAction) == "created" {
			created = &runs[i]
		}
	}
	if created == nil {
		t.Fatalf("no gitea reconcile trace in which node %s was created; node spans per trace: %v", serverName, describeRuns(runs))
	}
	t.Logf("the reconcile that created GiteaServer %s: trace %s, %d spans", serverName, created.trace.TraceID, len(created.trace.Spans))
	server := created.nodes[serverName]
	for _, name := range []string{postgresName, valkeyName} {
		blocker := created.nodes[name]
		if blocker == nil {
			t.Errorf("trace %s: no node span %s under run graph", created.trace.TraceID, name)
			continue
		}
		if blocker.tag(tagOutcome) != string(kdagv1alpha1.NodeReady) {
			t.Errorf("trace %s: node %s outcome %q, want Ready (the server ran after it)", created.trace.TraceID, name, blocker.tag(tagOutcome))
		}
		linked := false
		for _, l := range server.links() {
			linked = linked || (l.TraceID == created.trace.TraceID && l.SpanID == blocker.SpanID)
		}
		if !linked {
			t.Errorf("trace %s: node %s references %+v, want a %s to node %s (%s)",
				created.trace.TraceID, serverName, server.References, refFollowsFrom, name, blocker.SpanID)
		}
	}
	if gvk := server.tag(tagGVK); !strings.Contains(gvk, "GiteaServer") {
		t.Errorf("node %s: %s = %q, want the GiteaServer kind", serverName, tagGVK, gvk)
	}
	if server.tag(tagOutcome) != string(kdagv1alpha1.NodeWaiting) {
		t.Errorf("node %s: outcome %q, want Waiting (a new GiteaServer is not Ready yet)", serverName, server.tag(tagOutcome))
	}
	applies := children(created.trace, server, spanApply)
	if len(applies) != 1 {
		t.Fatalf("node %s has %d %q children, want 1", serverName, len(applies), spanApply)
	}
	// The API request under the apply: the client's transport is instrumented.
	if reqs := children(created.trace, applies[0], ""); !slices.ContainsFunc(reqs, func(s *jaegerSpan) bool {
		return s.tag(tagSpanKind) == "client" && strings.HasPrefix(s.OperationName, "HTTP ")
	}) {
		t.Errorf("apply of %s has no HTTP client span under it (tracing.WrapTransport): %v", serverName, spanNames(reqs))
	}

	// Each child's own reconcile: a trace of its own, its root linked (not parented) to the apply
	// span that wrote the child with the kdag.dev/traceparent annotation.
	for _, child := range []struct{ controller, name string }{
		{"postgresql", postgresName}, {"valkey", valkeyName}, {"giteaserver", serverName},
	} {
		trs := ix.reconcileTraces(child.controller, ns, child.name)
		if len(trs) == 0 {
			t.Errorf("no %s reconcile trace of %s", child.controller, child.name)
			continue
		}
		linked := 0
		for _, tr := range trs {
			for _, l := range root(tr).links() {
				apply := ix.span(l.TraceID, l.SpanID)
				if apply == nil || apply.OperationName != spanApply || l.TraceID == tr.TraceID {
					continue
				}
				node := ix.span(l.TraceID, apply.parent())
				if node != nil && node.OperationName == spanNode && node.tag(tagName) == child.name &&
					slices.ContainsFunc(runs, func(r giteaRun) bool { return r.trace.TraceID == l.TraceID }) {
					linked++
				}
			}
		}
		if linked == 0 {
			t.Errorf("none of the %d %s reconciles of %s links to the apply span of node %s in a gitea reconcile trace; their roots' references: %v",
				len(trs), child.controller, child.name, child.name, rootRefs(trs))
		} else {
			t.Logf("%d of %d %s reconciles link to the gitea reconcile that wrote %s", linked, len(trs), child.controller, child.name)
		}
	}
	// The GiteaServer's first reconcile links to the very apply that created it.
	serverLinked := false
	for _, tr := range ix.reconcileTraces("giteaserver", ns, serverName) {
		for _, l := range root(tr).links() {
			serverLinked = serverLinked || (l.TraceID == created.trace.TraceID && l.SpanID == applies[0].SpanID)
		}
	}
	if !serverLinked {
		t.Errorf("no giteaserver reconcile links to the apply span %s of trace %s that created it", applies[0].SpanID, created.trace.TraceID)
	}

	// The log line of the prune names the reconcile's trace, which holds the prune span.
	if prunedTraceID == "" {
		t.Error("the \"pruned\" log line has no trace_id")
		return
	}
	var prunedRun *giteaRun
	for i := range runs {
		if runs[i].trace.TraceID == prunedTraceID {
			prunedRun = &runs[i]
		}
	}
	if prunedRun == nil {
		t.Errorf("the \"pruned\" log line's trace %s is not a gitea reconcile trace in Jaeger", prunedTraceID)
		return
	}
	prunes := children(prunedRun.trace, prunedRun.root, spanPrune)
	if len(prunes) != 1 || prunes[0].tag(tagPruned) != "1" {
		t.Errorf("trace %s of the \"pruned\" log line: prune spans %v, want one with %s=1", prunedTraceID, spanNames(prunes), tagPruned)
	}
	if _, ok := prunedRun.nodes[valkeyName]; ok {
		t.Errorf("trace %s pruned %s but still has its node span", prunedTraceID, valkeyName)
	}
}

// checkNoSecret asserts that no value anywhere in Jaeger's answer (span tags, logs, process tags)
// holds the generated database password, plain or base64-encoded.
func checkNoSecret(t *testing.T, raw []byte, password string) {
	var doc any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	needles := []string{password, base64.StdEncoding.EncodeToString([]byte(password))}
	values := 0
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, e := range v {
				walk(path+"."+k, e)
			}
		case []any:
			for i, e := range v {
				walk(path+"["+strconv.Itoa(i)+"]", e)
			}
		case string:
			values++
			for _, n := range needles {
				if strings.Contains(v, n) {
					t.Errorf("%s holds the database password", path)
				}
			}
		}
	}
	walk("", doc)
	t.Logf("%d string values searched for the password", values)
}

func describeRuns(runs []giteaRun) []string {
	out := make([]string, 0, len(runs))
	for _, r := range runs {
		var nodes []string
		for name, s := range r.nodes {
			nodes = append(nodes, name+":"+s.tag(tagAction)+"/"+s.tag(tagOutcome))
		}
		slices.Sort(nodes)
		out = append(out, r.trace.TraceID+" "+strings.Join(nodes, ","))
	}
	return out
}

func rootRefs(trs []*jaegerTrace) [][]jaegerRef {
	out := make([][]jaegerRef, 0, len(trs))
	for _, tr := range trs {
		out = append(out, root(tr).References)
	}
	return out
}

func rootNames(tr *jaegerTrace) []string {
	var out []string
	for i := range tr.Spans {
		if tr.Spans[i].parent() == "" {
			out = append(out, tr.Spans[i].OperationName)
		}
	}
	return out
}

func spanNames(spans []*jaegerSpan) []string {
	out := make([]string, 0, len(spans))
	for _, s := range spans {
		out = append(out, s.OperationName)
	}
	return out
}
