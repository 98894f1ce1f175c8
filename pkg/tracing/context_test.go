package tracing

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"go.opentelemetry.io/otel/trace"
)

func TestLogValues(t *testing.T) {
	setupInMemory(t)
	if got := LogValues(context.Background()); got != nil {
		t.Errorf("without a span: %v, want nil", got)
	}
	ctx, span := Tracer().Start(context.Background(), "x")
	defer span.End()
	got := LogValues(ctx)
	sc := span.SpanContext()
	want := []any{"trace_id", sc.TraceID().String(), "span_id", sc.SpanID().String()}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("got %v, want %v", got, want)
		}
	}
}

func TestWrapTransport(t *testing.T) {
	exp := setupInMemory(t)

	var (
		mu      sync.Mutex
		headers []string
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		headers = append(headers, r.Header.Get("traceparent"))
		mu.Unlock()
		_, _ = io.WriteString(w, "{}")
	}))
	defer srv.Close()
	base := &http.Transport{}
	defer base.CloseIdleConnections()
	client := &http.Client{Transport: WrapTransport(base)}

	get := func(ctx context.Context) {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/api/v1/namespaces/default/configmaps/x", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
	}

	ctx, reconcile := Tracer().Start(context.Background(), "reconcile")
	get(ctx)
	reconcile.End()
	get(context.Background()) // an informer's request: no span, no header

	mu.Lock()
	defer mu.Unlock()
	if len(headers) != 2 {
		t.Fatalf("server saw %d requests, want 2", len(headers))
	}
	if headers[1] != "" {
		t.Errorf("a request without a span carried traceparent %q", headers[1])
	}
	spans := exp.GetSpans()
	if len(spans) != 2 {
		t.Fatalf("want the reconcile and one client span, got %v", spanNames(spans))
	}
	parent, client1 := spanByName(t, spans, "reconcile"), spanByName(t, spans, "HTTP GET")
	assertChild(t, parent, client1)
	if client1.SpanKind != trace.SpanKindClient {
		t.Errorf("client span kind = %v", client1.SpanKind)
	}
	sc := ExtractAnnotation(headers[0]) // the header and the annotation share the W3C format
	if sc.TraceID() != parent.SpanContext.TraceID() || sc.SpanID() != client1.SpanContext.SpanID() {
		t.Errorf("traceparent %q does not name the client span %s of trace %s",
			headers[0], client1.SpanContext.SpanID(), parent.SpanContext.TraceID())
	}
}

func TestAnnotation(t *testing.T) {
	exp := setupInMemory(t)

	if v, ok := InjectAnnotation(context.Background()); ok || v != "" {
		t.Errorf("without a span: %q, %v; want \"\", false", v, ok)
	}

	ctx, parent := Tracer().Start(context.Background(), "parent-reconcile")
	value, ok := InjectAnnotation(ctx)
	parent.End()
	if !ok {
		t.Fatal("no annotation from a span")
	}
	psc := parent.SpanContext()
	if want := "00-" + psc.TraceID().String() + "-" + psc.SpanID().String() + "-01"; value != want {
		t.Errorf("annotation = %q, want %q", value, want)
	}

	sc := ExtractAnnotation(value)
	if !sc.IsValid() || !sc.IsRemote() || !sc.IsSampled() || sc.TraceID() != psc.TraceID() || sc.SpanID() != psc.SpanID() {
		t.Errorf("round trip: %+v, want the parent's %+v, remote", sc, psc)
	}

	// The child's reconcile: a root span of its own trace with a link to the parent.
	link, ok := LinkFromAnnotations(map[string]string{AnnotationTraceParent: value, "other": "x"})
	if !ok {
		t.Fatal("no link from the annotation")
	}
	_, child := Tracer().Start(context.Background(), "child-reconcile", trace.WithLinks(link))
	child.End()
	got := spanByName(t, exp.GetSpans(), "child-reconcile")
	if got.Parent.IsValid() || got.SpanContext.TraceID() == psc.TraceID() {
		t.Error("the child's reconcile joined the parent's trace, want a link only")
	}
	if len(got.Links) != 1 || got.Links[0].SpanContext.SpanID() != psc.SpanID() || got.Links[0].SpanContext.TraceID() != psc.TraceID() {
		t.Errorf("links = %+v, want one to the parent's span", got.Links)
	}

	for _, bad := range []string{"", "garbage", "00-" + strings.Repeat("0", 32) + "-" + psc.SpanID().String() + "-01", "00-abc"} {
		if sc := ExtractAnnotation(bad); sc.IsValid() {
			t.Errorf("ExtractAnnotation(%q) is valid", bad)
		}
	}
	// A malformed value must not yield the caller's own span.
	if _, ok := LinkFromAnnotations(map[string]string{AnnotationTraceParent: "garbage"}); ok {
		t.Error("link from a malformed annotation")
	}
	if _, ok := LinkFromAnnotations(nil); ok {
		t.Error("link from no annotations")
	}
}
