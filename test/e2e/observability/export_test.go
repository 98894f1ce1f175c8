package observability

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/opentracing/opentracing-go"
	"go.opentelemetry.io/otel"

	"github.com/kdag-dev/kdag/pkg/tracing"
)

// TestTraceExport_OTLPProtocols exports a reconcile span with an OpenTracing child through each
// OTLP protocol tracing.Setup supports (OTEL_EXPORTER_OTLP_PROTOCOL grpc and http/protobuf) to
// the real Jaeger, and reads the trace back from its query API: one trace, the OpenTracing span
// a CHILD_OF the OpenTelemetry one (the bridge joins the trace).
func TestTraceExport_OTLPProtocols(t *testing.T) {
	switch {
	case errors.Is(jaegerErr, errJaegerSkipped):
		t.Skip(jaegerErr)
	case jaegerErr != nil:
		t.Fatal(jaegerErr)
	}
	for _, tc := range []struct {
		protocol, endpoint string
	}{
		{"grpc", jaegerInstance.otlpGRPC},
		{"http/protobuf", jaegerInstance.otlpHTTP},
	} {
		t.Run(tc.protocol, func(t *testing.T) {
			isolateOTelEnv(t)
			service := "kdag-export-" + strings.ReplaceAll(tc.protocol, "/", "-") + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
			t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", tc.endpoint)
			t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", tc.protocol)
			t.Setenv("OTEL_EXPORTER_OTLP_INSECURE", "true")
			shutdown, err := tracing.Setup(t.Context(), tracing.WithServiceName(service))
			if err != nil {
				t.Fatal(err)
			}
			ctx, span := otel.Tracer("kdag-e2e").Start(t.Context(), "reconcile")
			legacy, _ := opentracing.StartSpanFromContext(ctx, "legacy-component")
			legacy.Finish()
			span.End()
			flush, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := shutdown(flush); err != nil {
				t.Fatalf("flush over %s: %v", tc.protocol, err)
			}

			traces, raw, err := jaegerInstance.queryTraces(t.Context(), service)
			if err != nil {
				t.Fatal(err)
			}
			if len(traces) != 1 || traces[0].TraceID != span.SpanContext().TraceID().String() {
				t.Fatalf("Jaeger has %d traces of %s, want the one of trace %s:\n%.2000s", len(traces), service, span.SpanContext().TraceID(), raw)
			}
			ops := map[string]jaegerSpan{}
			for _, s := range traces[0].Spans {
				ops[s.OperationName] = s
			}
			root, child := ops["reconcile"], ops["legacy-component"]
			if root.SpanID != span.SpanContext().SpanID().String() || child.SpanID == "" {
				t.Fatalf("spans in Jaeger %+v, want reconcile (%s) and legacy-component", traces[0].Spans, span.SpanContext().SpanID())
			}
			if child.parent() != root.SpanID {
				t.Errorf("legacy-component's parent is %q, want reconcile %s (the OpenTracing bridge)", child.parent(), root.SpanID)
			}
		})
	}
}
