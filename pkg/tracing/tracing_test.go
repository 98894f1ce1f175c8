package tracing

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/opentracing/opentracing-go"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	otbridge "go.opentelemetry.io/otel/bridge/opentracing"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

func TestSpanTree(t *testing.T) {
	exp := setupInMemory(t)

	ctx, reconcile := Tracer().Start(context.Background(), "reconcile")
	gctx, run := Tracer().Start(ctx, "graph-run")
	_, node := Tracer().Start(gctx, "node", trace.WithAttributes(attribute.String("kdag.action", "applied")))
	node.End()
	run.End()
	reconcile.End()

	spans := exp.GetSpans()
	if len(spans) != 3 {
		t.Fatalf("want 3 spans, got %v", spanNames(spans))
	}
	root, g, n := spanByName(t, spans, "reconcile"), spanByName(t, spans, "graph-run"), spanByName(t, spans, "node")
	if root.Parent.IsValid() {
		t.Errorf("reconcile has parent %s, want a root span", root.Parent.SpanID())
	}
	assertChild(t, root, g)
	assertChild(t, g, n)
	if got := n.InstrumentationScope.Name; got != InstrumentationName {
		t.Errorf("instrumentation scope = %q, want %q", got, InstrumentationName)
	}
	if v, ok := n.Resource.Set().Value("service.name"); !ok || v.AsString() != DefaultServiceName {
		t.Errorf("service.name = %v, want %q", v.AsString(), DefaultServiceName)
	}
}

func TestResource(t *testing.T) {
	t.Run("option", func(t *testing.T) {
		exp := setupInMemory(t, WithServiceName("gitea-operator"), WithResourceAttributes(attribute.String("service.version", "v1.2.3")))
		_, s := Tracer().Start(context.Background(), "x")
		s.End()
		res := spanByName(t, exp.GetSpans(), "x").Resource.Set()
		for k, want := range map[attribute.Key]string{"service.name": "gitea-operator", "service.version": "v1.2.3", "telemetry.sdk.language": "go"} {
			if v, _ := res.Value(k); v.AsString() != want {
				t.Errorf("%s = %q, want %q", k, v.AsString(), want)
			}
		}
	})
	t.Run("environment wins", func(t *testing.T) {
		isolate(t)
		t.Setenv("OTEL_SERVICE_NAME", "from-env")
		t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment.name=test,service.version=v9")
		exp := tracetest.NewInMemoryExporter()
		shutdown, err := Setup(context.Background(), WithExporter(exp), WithSyncer(),
			WithServiceName("gitea-operator"), WithResourceAttributes(attribute.String("service.version", "v1.2.3")))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = shutdown(context.Background()) })
		_, s := Tracer().Start(context.Background(), "x")
		s.End()
		res := spanByName(t, exp.GetSpans(), "x").Resource.Set()
		for k, want := range map[attribute.Key]string{"service.name": "from-env", "service.version": "v9", "deployment.environment.name": "test"} {
			if v, _ := res.Value(k); v.AsString() != want {
				t.Errorf("%s = %q, want %q", k, v.AsString(), want)
			}
		}
	})
}

// TestOpenTracingBridge is the bridge pitfall: OpenTracing and OpenTelemetry spans must nest
// within each other in both directions. It fails when Setup installs the SDK's tracer provider
// globally instead of the bridge-wrapped one (the OpenTracing span then starts a trace of its own).
func TestOpenTracingBridge(t *testing.T) {
	t.Run("OpenTracing span inside kdag span", func(t *testing.T) {
		exp := setupInMemory(t)
		if _, ok := opentracing.GlobalTracer().(*otbridge.BridgeTracer); !ok {
			t.Fatalf("global OpenTracing tracer is %T, want the bridge", opentracing.GlobalTracer())
		}

		ctx, parent := Tracer().Start(context.Background(), "otel-parent")
		otSpan, otCtx := opentracing.StartSpanFromContext(ctx, "x")
		_, grandchild := Tracer().Start(otCtx, "otel-grandchild")
		grandchild.End()
		otSpan.Finish()
		parent.End()

		spans := exp.GetSpans()
		x := spanByName(t, spans, "x")
		assertChild(t, spanByName(t, spans, "otel-parent"), x)
		assertChild(t, x, spanByName(t, spans, "otel-grandchild"))
	})

	t.Run("OpenTracing span inside another library's OpenTelemetry span", func(t *testing.T) {
		exp := setupInMemory(t)
		ctx, parent := otel.Tracer("example.com/some/library").Start(context.Background(), "library")
		otSpan, _ := opentracing.StartSpanFromContext(ctx, "x")
		otSpan.Finish()
		parent.End()

		spans := exp.GetSpans()
		lib := spanByName(t, spans, "library")
		assertChild(t, lib, spanByName(t, spans, "x"))
		if lib.InstrumentationScope.Name != "example.com/some/library" {
			t.Errorf("scope = %q, want the library's own", lib.InstrumentationScope.Name)
		}
	})

	t.Run("kdag span inside OpenTracing span", func(t *testing.T) {
		exp := setupInMemory(t)
		otSpan, ctx := opentracing.StartSpanFromContext(context.Background(), "ot-parent")
		_, child := Tracer().Start(ctx, "otel-child")
		child.End()
		otSpan.Finish()

		spans := exp.GetSpans()
		assertChild(t, spanByName(t, spans, "ot-parent"), spanByName(t, spans, "otel-child"))
	})

	// The control: a span from an SDK provider that is not the bridge-wrapped global one is
	// invisible to opentracing-go. If this ever stops being true the rule in doc.go can go.
	t.Run("control: raw SDK provider breaks the trace", func(t *testing.T) {
		exp := setupInMemory(t)
		raw := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
		t.Cleanup(func() { _ = raw.Shutdown(context.Background()) })

		ctx, parent := raw.Tracer("raw").Start(context.Background(), "raw-parent")
		otSpan, _ := opentracing.StartSpanFromContext(ctx, "x")
		otSpan.Finish()
		parent.End()

		spans := exp.GetSpans()
		if x, p := spanByName(t, spans, "x"), spanByName(t, spans, "raw-parent"); x.SpanContext.TraceID() == p.SpanContext.TraceID() {
			t.Errorf("the OpenTracing span joined a raw SDK span's trace: the pitfall is gone")
		}
	})
}

func TestOffByDefault(t *testing.T) {
	isolate(t)
	before := otel.GetTracerProvider()
	shutdown, err := Setup(context.Background())
	if err != nil {
		t.Fatal(err)
	}

	if otel.GetTracerProvider() != before {
		t.Errorf("tracing is off but Setup replaced the global tracer provider with %T", otel.GetTracerProvider())
	}
	if _, ok := opentracing.GlobalTracer().(opentracing.NoopTracer); !ok {
		t.Errorf("global OpenTracing tracer is %T, want the no-op tracer", opentracing.GlobalTracer())
	}
	ctx, span := Tracer().Start(context.Background(), "x")
	if span.IsRecording() || span.SpanContext().IsValid() {
		t.Error("tracing is off but a span records")
	}
	span.End()
	if LogValues(ctx) != nil {
		t.Error("LogValues returns values while tracing is off")
	}
	if fields := otel.GetTextMapPropagator().Fields(); !slices.Contains(fields, "traceparent") || !slices.Contains(fields, "baggage") {
		t.Errorf("propagator fields = %v, want traceparent and baggage", fields)
	}
	if err := shutdown(context.Background()); err != nil {
		t.Error(err)
	}
}

// TestNewExporter: kdag's rule over autoexport's (tracing off unless an exporter or an OTLP
// endpoint is named) and the specification's (none and OTEL_SDK_DISABLED win; the default OTLP
// protocol is http/protobuf), and an error for what autoexport does not know.
func TestNewExporter(t *testing.T) {
	for _, tc := range []struct {
		name    string
		env     map[string]string
		on      bool
		wantErr bool
	}{
		{name: "nothing set: off"},
		{name: "endpoint: on", env: map[string]string{envEndpoint: "http://127.0.0.1:1"}, on: true},
		{name: "traces endpoint: on", env: map[string]string{envTracesEndpoint: "http://127.0.0.1:1/v1/traces"}, on: true},
		{name: "exporter otlp without endpoint: on", env: map[string]string{envTracesExporter: "otlp"}, on: true},
		{name: "exporter console: on", env: map[string]string{envTracesExporter: "console"}, on: true},
		{name: "exporter none beats endpoint", env: map[string]string{envTracesExporter: "none", envEndpoint: "http://127.0.0.1:1"}},
		{name: "SDK disabled", env: map[string]string{envSDKDisabled: "TRUE", envTracesExporter: "otlp"}},
		{name: "SDK disabled false", env: map[string]string{envSDKDisabled: "false", envTracesExporter: "otlp"}, on: true},
		{name: "grpc", env: map[string]string{envEndpoint: "http://127.0.0.1:1", envProtocol: "grpc"}, on: true},
		{name: "traces protocol", env: map[string]string{envEndpoint: "http://127.0.0.1:1", envTracesProtocol: "http/protobuf"}, on: true},
		{name: "protocol alone does not turn on", env: map[string]string{envProtocol: "grpc"}},
		{name: "http/json", env: map[string]string{envEndpoint: "http://127.0.0.1:1", envProtocol: "http/json"}, wantErr: true},
		{name: "unknown protocol", env: map[string]string{envEndpoint: "http://127.0.0.1:1", envTracesProtocol: "udp"}, wantErr: true},
		{name: "unsupported exporter", env: map[string]string{envTracesExporter: "zipkin"}, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			isolate(t)
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			exp, err := newExporter(context.Background())
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want an error: %v", err, tc.wantErr)
			}
			if err != nil && !strings.Contains(err.Error(), supportedExporters) {
				t.Errorf("error %q does not say what kdag supports", err)
			}
			if (exp != nil) != tc.on {
				t.Fatalf("exporter %T, want tracing on: %v", exp, tc.on)
			}
			if exp != nil {
				_ = exp.Shutdown(context.Background())
			}
		})
	}
}

// TestSetup_ExportsOverHTTPByDefault: with an endpoint and no protocol, Setup exports over OTLP
// http/protobuf, the specification's default: a span ended and flushed reaches the endpoint as a
// POST to /v1/traces. Setup installs the bridge-wrapped provider and the OpenTracing bridge.
func TestSetup_ExportsOverHTTPByDefault(t *testing.T) {
	isolate(t)
	posts := make(chan string, 10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		posts <- r.Method + " " + r.URL.Path + " " + r.Header.Get("Content-Type")
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	defer srv.Close()
	t.Setenv(envEndpoint, srv.URL)
	shutdown, err := Setup(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := otel.GetTracerProvider().(*otbridge.TracerProvider); !ok {
		t.Errorf("global tracer provider is %T, want the bridge-wrapped provider", otel.GetTracerProvider())
	}
	if _, ok := opentracing.GlobalTracer().(*otbridge.BridgeTracer); !ok {
		t.Errorf("global OpenTracing tracer is %T, want the bridge", opentracing.GlobalTracer())
	}
	_, span := Tracer().Start(context.Background(), "exported")
	span.End()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-posts:
		if want := "POST /v1/traces application/x-protobuf"; got != want {
			t.Errorf("the endpoint got %q, want %q", got, want)
		}
	default:
		t.Error("the endpoint got no request: the span was not exported over http/protobuf")
	}
}

func TestSetupErrors(t *testing.T) {
	for name, env := range map[string]map[string]string{
		"unsupported exporter": {envTracesExporter: "zipkin"},
		"http/json":            {envEndpoint: "http://127.0.0.1:1", envProtocol: "http/json"},
	} {
		t.Run(name, func(t *testing.T) {
			isolate(t)
			for k, v := range env {
				t.Setenv(k, v)
			}
			before := otel.GetTracerProvider()
			shutdown, err := Setup(context.Background())
			if err == nil {
				_ = shutdown(context.Background())
				t.Fatal("Setup succeeded, want an error")
			}
			if otel.GetTracerProvider() != before {
				t.Error("a failed Setup changed the global tracer provider")
			}
		})
	}
}

func TestSampler(t *testing.T) {
	t.Run("OTEL_TRACES_SAMPLER is honoured", func(t *testing.T) {
		isolate(t)
		t.Setenv("OTEL_TRACES_SAMPLER", "always_off")
		exp := tracetest.NewInMemoryExporter()
		shutdown, err := Setup(context.Background(), WithExporter(exp), WithSyncer())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = shutdown(context.Background()) })
		_, s := Tracer().Start(context.Background(), "x")
		s.End()
		if s.SpanContext().IsSampled() || len(exp.GetSpans()) != 0 {
			t.Errorf("always_off sampled %v", spanNames(exp.GetSpans()))
		}
	})
	t.Run("WithSampler overrides the environment", func(t *testing.T) {
		isolate(t)
		t.Setenv("OTEL_TRACES_SAMPLER", "always_off")
		exp := tracetest.NewInMemoryExporter()
		shutdown, err := Setup(context.Background(), WithExporter(exp), WithSyncer(), WithSampler(sdktrace.AlwaysSample()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = shutdown(context.Background()) })
		_, s := Tracer().Start(context.Background(), "x")
		s.End()
		if len(exp.GetSpans()) != 1 {
			t.Errorf("got spans %v, want x", spanNames(exp.GetSpans()))
		}
	})
}

// TestShutdown checks that shutdown flushes the batch processor, shuts the exporter down, puts the
// globals back, and can be called twice.
func TestShutdown(t *testing.T) {
	isolate(t)
	sentinelTP := noop.NewTracerProvider()
	sentinelProp := propagation.TraceContext{}
	sentinelOT := opentracing.NoopTracer{}
	otel.SetTracerProvider(sentinelTP)
	otel.SetTextMapPropagator(sentinelProp)
	opentracing.SetGlobalTracer(sentinelOT)

	exp := &recordingExporter{}
	shutdown, err := Setup(context.Background(), WithExporter(exp)) // batching
	if err != nil {
		t.Fatal(err)
	}
	if otel.GetTracerProvider() == sentinelTP || opentracing.GlobalTracer() == sentinelOT {
		t.Fatal("Setup did not install its globals")
	}
	_, s := Tracer().Start(context.Background(), "queued")
	s.End()

	if err := shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if spans, down := exp.state(); !slices.Equal(spans, []string{"queued"}) || !down {
		t.Errorf("after shutdown: exported %v, exporter shut down %v; want [queued], true", spans, down)
	}
	if otel.GetTracerProvider() != sentinelTP {
		t.Errorf("tracer provider not restored: %T", otel.GetTracerProvider())
	}
	if otel.GetTextMapPropagator() != sentinelProp {
		t.Errorf("propagator not restored: %T", otel.GetTextMapPropagator())
	}
	if opentracing.GlobalTracer() != sentinelOT {
		t.Errorf("OpenTracing tracer not restored: %T", opentracing.GlobalTracer())
	}
	if err := shutdown(context.Background()); err != nil {
		t.Errorf("second shutdown: %v", err)
	}
}

// TestShutdownLeavesForeignGlobals: a global replaced after Setup is not Setup's to restore.
func TestShutdownLeavesForeignGlobals(t *testing.T) {
	isolate(t)
	shutdown, err := Setup(context.Background(), WithExporter(tracetest.NewInMemoryExporter()), WithSyncer())
	if err != nil {
		t.Fatal(err)
	}
	later := noop.NewTracerProvider()
	otel.SetTracerProvider(later)
	if err := shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if otel.GetTracerProvider() != later {
		t.Errorf("shutdown replaced a tracer provider set after Setup")
	}
}
