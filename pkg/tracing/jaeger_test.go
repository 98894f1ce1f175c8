package tracing

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/opentracing/opentracing-go"
)

// Environment of TestJaegerExport, which runs only when KDAG_E2E_JAEGER_QUERY is set (make jaeger
// starts a Jaeger with hack/jaeger/config.yaml):
//
//	KDAG_E2E_JAEGER_QUERY=http://127.0.0.1:16686 go test -run TestJaegerExport ./pkg/tracing/
const (
	envJaegerQuery = "KDAG_E2E_JAEGER_QUERY" // query HTTP base URL
	envJaegerGRPC  = "KDAG_E2E_JAEGER_OTLP_GRPC"
	envJaegerHTTP  = "KDAG_E2E_JAEGER_OTLP_HTTP"
)

// TestJaegerExport exports a kdag span with an OpenTracing child, through the OTLP exporter the
// environment selects (gRPC and HTTP), to a running Jaeger, and reads the trace back from its
// query API.
func TestJaegerExport(t *testing.T) {
	query := os.Getenv(envJaegerQuery)
	if query == "" {
		t.Skipf("set %s (e.g. http://127.0.0.1:16686) to export to a running Jaeger", envJaegerQuery)
	}
	endpoints := map[string]string{
		protocolGRPC:         envOr(envJaegerGRPC, "http://127.0.0.1:4317"),
		protocolHTTPProtobuf: envOr(envJaegerHTTP, "http://127.0.0.1:4318"),
	}
	for _, protocol := range []string{protocolGRPC, protocolHTTPProtobuf} {
		t.Run(protocol, func(t *testing.T) {
			isolate(t)
			service := fmt.Sprintf("kdag-e2e-%s-%d", strings.ReplaceAll(protocol, "/", "-"), time.Now().UnixNano())
			t.Setenv(envEndpoint, endpoints[protocol])
			t.Setenv(envProtocol, protocol)
			t.Setenv("OTEL_SERVICE_NAME", service)

			shutdown, err := Setup(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			ctx, span := Tracer().Start(context.Background(), "reconcile")
			otSpan, _ := opentracing.StartSpanFromContext(ctx, "legacy-component")
			otSpan.Finish()
			span.End()
			traceID := span.SpanContext().TraceID().String()
			flushCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := shutdown(flushCtx); err != nil {
				t.Fatal(err)
			}

			got := waitForTrace(t, query, service)
			if got.TraceID != traceID {
				t.Fatalf("Jaeger has trace %s for %s, want %s", got.TraceID, service, traceID)
			}
			ops := map[string]jaegerSpan{}
			for _, s := range got.Spans {
				ops[s.OperationName] = s
			}
			root, legacy := ops["reconcile"], ops["legacy-component"]
			if root.SpanID == "" || legacy.SpanID == "" {
				t.Fatalf("spans in Jaeger: %+v, want reconcile and legacy-component", got.Spans)
			}
			if len(legacy.References) != 1 || legacy.References[0].RefType != "CHILD_OF" || legacy.References[0].SpanID != root.SpanID {
				t.Errorf("legacy-component references %+v, want CHILD_OF reconcile (%s)", legacy.References, root.SpanID)
			}
			t.Logf("%s/api/traces/%s: %d spans of service %s", query, traceID, len(got.Spans), service)
		})
	}
}

type jaegerSpan struct {
	SpanID        string `json:"spanID"`
	OperationName string `json:"operationName"`
	References    []struct {
		RefType string `json:"refType"`
		SpanID  string `json:"spanID"`
	} `json:"references"`
}

type jaegerTrace struct {
	TraceID string       `json:"traceID"`
	Spans   []jaegerSpan `json:"spans"`
}

// waitForTrace polls Jaeger's query API until it holds a trace of service with two spans (its
// batch processor delays storage a little).
func waitForTrace(t *testing.T, query, service string) jaegerTrace {
	t.Helper()
	u := strings.TrimSuffix(query, "/") + "/api/traces?service=" + url.QueryEscape(service)
	transport := &http.Transport{}
	defer transport.CloseIdleConnections()
	client := &http.Client{Transport: transport, Timeout: 5 * time.Second}
	deadline := time.Now().Add(15 * time.Second)
	var last string
	for time.Now().Before(deadline) {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, u, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := client.Do(req)
		if err == nil {
			var body struct {
				Data []jaegerTrace `json:"data"`
			}
			err = json.NewDecoder(resp.Body).Decode(&body)
			_ = resp.Body.Close()
			if err == nil && len(body.Data) == 1 && len(body.Data[0].Spans) == 2 {
				return body.Data[0]
			}
			last = fmt.Sprintf("status %d, %d traces", resp.StatusCode, len(body.Data))
		}
		if err != nil {
			last = err.Error()
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("no trace of %s in Jaeger at %s: %s", service, u, last)
	return jaegerTrace{}
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
