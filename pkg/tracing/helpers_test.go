package tracing

import (
	"context"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/opentracing/opentracing-go"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/kdag-dev/kdag/pkg/testing/leak"
)

func TestMain(m *testing.M) {
	// OpenTelemetry's default global provider delegates, once and for good, to the first provider
	// set: after the first test's Setup it would keep serving that test's (shut down) provider. A
	// no-op provider set first is the baseline every test restores to.
	otel.SetTracerProvider(noop.NewTracerProvider())

	// Export to a real Jaeger is tested in test/e2e/observability (TestTraceExport_OTLPProtocols).
	os.Exit(leak.Check(m.Run))
}

// otelEnv are the variables these tests depend on; any other OTEL_* variable of the environment is
// unset too.
var otelEnv = []string{
	envSDKDisabled, envTracesExporter, envEndpoint, envTracesEndpoint, envProtocol, envTracesProtocol,
	"OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES", "OTEL_TRACES_SAMPLER", "OTEL_TRACES_SAMPLER_ARG",
	"OTEL_EXPORTER_OTLP_INSECURE", "OTEL_EXPORTER_OTLP_TRACES_INSECURE",
}

// isolate unsets every OTEL_* variable for the test (the SDK treats a set-but-empty
// OTEL_TRACES_SAMPLER as an error, so t.Setenv(k, "") is not enough) and puts the process-wide
// tracer provider, propagator and OpenTracing tracer back when the test ends, whatever Setup's
// shutdown did. Tests using it cannot run in parallel (t.Setenv enforces that).
func isolate(t *testing.T) {
	t.Helper()
	names := append([]string(nil), otelEnv...)
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "OTEL_") {
			names = append(names, k)
		}
	}
	for _, k := range names {
		t.Setenv(k, "") // registers the restore of the previous value
		if err := os.Unsetenv(k); err != nil {
			t.Fatal(err)
		}
	}

	tp, prop, ot := otel.GetTracerProvider(), otel.GetTextMapPropagator(), opentracing.GlobalTracer()
	t.Cleanup(func() {
		if otel.GetTracerProvider() != tp {
			otel.SetTracerProvider(tp)
		}
		if !samePropagator(otel.GetTextMapPropagator(), prop) {
			otel.SetTextMapPropagator(prop)
		}
		opentracing.SetGlobalTracer(ot)
	})
}

// samePropagator compares two propagators; a propagator of an uncomparable type (a composite) is
// never the same.
func samePropagator(a, b propagation.TextMapPropagator) (same bool) {
	defer func() {
		if recover() != nil {
			same = false
		}
	}()
	return a == b
}

// setupInMemory isolates the test and turns tracing on with a synchronous in-memory exporter; the
// shutdown runs at cleanup.
func setupInMemory(t *testing.T, opts ...Option) *tracetest.InMemoryExporter {
	t.Helper()
	isolate(t)
	exp := tracetest.NewInMemoryExporter()
	shutdown, err := Setup(context.Background(), append([]Option{WithExporter(exp), WithSyncer()}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := shutdown(context.Background()); err != nil {
			t.Error(err)
		}
	})
	return exp
}

// spanByName returns the only exported span named name.
func spanByName(t *testing.T, spans tracetest.SpanStubs, name string) tracetest.SpanStub {
	t.Helper()
	var found []tracetest.SpanStub
	for _, s := range spans {
		if s.Name == name {
			found = append(found, s)
		}
	}
	if len(found) != 1 {
		t.Fatalf("want one span %q, got %d among %v", name, len(found), spanNames(spans))
	}
	return found[0]
}

func spanNames(spans tracetest.SpanStubs) []string {
	names := make([]string, 0, len(spans))
	for _, s := range spans {
		names = append(names, s.Name)
	}
	return names
}

// assertChild fails unless child is a child of parent in the same trace.
func assertChild(t *testing.T, parent, child tracetest.SpanStub) {
	t.Helper()
	if child.SpanContext.TraceID() != parent.SpanContext.TraceID() {
		t.Errorf("span %q is in trace %s, want its parent %q's trace %s",
			child.Name, child.SpanContext.TraceID(), parent.Name, parent.SpanContext.TraceID())
	}
	if child.Parent.SpanID() != parent.SpanContext.SpanID() {
		t.Errorf("span %q has parent span %s, want %q (%s)",
			child.Name, child.Parent.SpanID(), parent.Name, parent.SpanContext.SpanID())
	}
}

// recordingExporter keeps what it exported, and whether it was shut down, past Shutdown (the
// in-memory exporter forgets its spans on Shutdown).
type recordingExporter struct {
	mu       sync.Mutex
	spans    []string
	shutdown bool
}

func (e *recordingExporter) ExportSpans(_ context.Context, spans []sdktrace.ReadOnlySpan) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, s := range spans {
		e.spans = append(e.spans, s.Name())
	}
	return nil
}

func (e *recordingExporter) Shutdown(context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.shutdown = true
	return nil
}

func (e *recordingExporter) state() ([]string, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.spans...), e.shutdown
}
