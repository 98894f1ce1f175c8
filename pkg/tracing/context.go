package tracing

import (
	"context"
	"net/http"

	"go.opentelemetry.io/otel/codes"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// AnnotationTraceParent is the annotation that carries a parent reconcile's trace context (a W3C
// traceparent value) on a child object kdag creates, so that the child's reconcile can link to it.
const AnnotationTraceParent = "kdag.dev/traceparent"

// Log keys of LogValues.
const (
	LogKeyTraceID = "trace_id"
	LogKeySpanID  = "span_id"
)

// LogValues returns "trace_id", <id>, "span_id", <id> for the span in ctx, for logr's WithValues,
// or nil when ctx holds no valid span (tracing off, or outside a span).
func LogValues(ctx context.Context) []any {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return nil
	}
	return []any{LogKeyTraceID, sc.TraceID().String(), LogKeySpanID, sc.SpanID().String()}
}

// traceParentHeader is the W3C Trace Context header (and MapCarrier key) TraceContext uses.
const traceParentHeader = "traceparent"

// InjectAnnotation returns the W3C traceparent value of the span in ctx, to store under
// AnnotationTraceParent on a child object, and false when ctx holds no valid span. It uses the W3C
// format directly, whatever the global propagator is, and leaves tracestate and baggage out.
//
// The value changes with every reconcile: write it only together with a change the child needs
// anyway (creation, or an update for another reason), and keep it out of the hashes that decide
// whether a write is needed, or each parent reconcile would rewrite, and requeue, the child.
func InjectAnnotation(ctx context.Context) (string, bool) {
	carrier := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, carrier)
	v := carrier[traceParentHeader]
	return v, v != ""
}

// ExtractAnnotation parses an AnnotationTraceParent value into a remote span context, invalid
// (IsValid false) when the value is empty or malformed. Start the child's reconcile span with
// trace.WithLinks(trace.Link{SpanContext: sc}) to link it to the parent's reconcile: a link, not a
// parent, since the child's reconcile is its own unit of work that may run many times.
func ExtractAnnotation(value string) trace.SpanContext {
	if value == "" {
		return trace.SpanContext{}
	}
	// A fresh context: on a malformed value Extract returns its context unchanged, which must not
	// hold a span of its own.
	ctx := propagation.TraceContext{}.Extract(context.Background(), propagation.MapCarrier{traceParentHeader: value})
	return trace.SpanContextFromContext(ctx)
}

// LinkFromAnnotations returns a span link to the trace context stored under AnnotationTraceParent
// in annotations (an object's metadata.annotations), and false when there is none or it is
// malformed.
func LinkFromAnnotations(annotations map[string]string) (trace.Link, bool) {
	sc := ExtractAnnotation(annotations[AnnotationTraceParent])
	if !sc.IsValid() {
		return trace.Link{}, false
	}
	return trace.Link{SpanContext: sc}, true
}

// WrapTransport instruments a Kubernetes client's HTTP transport with otelhttp: a request whose
// context carries a span (a reconcile's API calls) gets a client span as its child and a W3C
// traceparent header, so that API server traces join kdag's. Requests without a span in their
// context (informers' lists and watches, leader election) pass through untouched instead of each
// starting a trace of its own.
//
// The signature fits rest.Config's WrapTransport: cfg.Wrap(tracing.WrapTransport). The tracer
// propagator is the global one at the time of the call; before Setup that is OpenTelemetry's
// delegating default, which follows the propagator Setup sets.
func WrapTransport(rt http.RoundTripper) http.RoundTripper {
	if rt == nil {
		rt = http.DefaultTransport
	}
	// Spans are named "HTTP <method>" (low cardinality; the URL is an attribute) and come from the
	// provider of the span in the request's context.
	return otelhttp.NewTransport(rt, otelhttp.WithFilter(func(r *http.Request) bool {
		return trace.SpanContextFromContext(r.Context()).IsValid()
	}))
}

// EndSpan records err, if any, on span (as an event and the span's error status) and ends it.
func EndSpan(span trace.Span, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}
