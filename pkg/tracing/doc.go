// Package tracing sets up OpenTelemetry tracing for a kdag operator: OTLP export configured by the
// standard OTEL_* environment variables, W3C trace context propagation, and the OpenTracing bridge,
// so that code written against opentracing-go (as Harbor-Operator's components are) lands in the
// same traces as kdag's own spans.
//
// # Setup
//
// Call Setup once at start-up and its shutdown on exit; shutdown flushes the queued spans
// (ExampleSetup, in example_test.go, shows it).
//
// kdag's code starts spans with Tracer(), logs with LogValues(ctx) for trace correlation, and
// instruments the Kubernetes client with rest.Config.Wrap(WrapTransport).
//
// # Environment
//
// Tracing is off by default: no exporter, the global no-op tracer provider, nothing to pay. It is on
// when OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set, or
// OTEL_TRACES_EXPORTER names an exporter. OTEL_TRACES_EXPORTER=none or OTEL_SDK_DISABLED=true
// turns it off whatever else is set. The exporter is built by the OpenTelemetry contrib package
// autoexport, as the specification says; an exporter or protocol it does not know is an error.
// Variables honoured:
//
//	OTEL_SDK_DISABLED                       true: off
//	OTEL_TRACES_EXPORTER                    otlp | console (standard output) | none
//	OTEL_EXPORTER_OTLP_(TRACES_)PROTOCOL    http/protobuf (default) | grpc
//	OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT    e.g. http://127.0.0.1:4318 (http/protobuf) or
//	                                        http://127.0.0.1:4317 (grpc); an http:// endpoint means
//	                                        no TLS; for http/protobuf the traces endpoint is the
//	                                        full URL (.../v1/traces)
//	OTEL_EXPORTER_OTLP_(TRACES_)INSECURE, _HEADERS, _TIMEOUT, _COMPRESSION, _CERTIFICATE, ...
//	                                        read by the OTLP exporter
//	OTEL_SERVICE_NAME                       service.name; else WithServiceName; else "kdag"
//	OTEL_RESOURCE_ATTRIBUTES                key=value,... added to the resource
//	OTEL_TRACES_SAMPLER, _ARG               always_on, always_off, traceidratio,
//	                                        parentbased_always_on (default), parentbased_always_off,
//	                                        parentbased_traceidratio (read by the SDK; WithSampler
//	                                        overrides them)
//	OTEL_BSP_*                              batch span processor limits (read by the SDK)
//
// The propagator is always W3C tracecontext plus baggage, set globally.
//
// # The OpenTracing bridge rule
//
// With tracing on, Setup installs a bridge tracer as opentracing's global tracer, and as
// OpenTelemetry's global tracer provider one that wraps the SDK's: a span started from it is also
// the active OpenTracing span of the context it returns, so opentracing.StartSpanFromContext(ctx)
// makes a child of it, and an OpenTracing span's context is the parent of OpenTelemetry spans
// started from it.
//
// Every OpenTelemetry tracer must therefore come from the global provider: Tracer(),
// otel.Tracer(name) or otel.GetTracerProvider(). A span started from an SDK TracerProvider held
// directly is invisible to opentracing-go, which then starts a new trace. Ask for tracers when they
// are needed (as Tracer() does) rather than caching one in a package variable before Setup runs.
//
// # Trace context on child objects
//
// A parent's reconcile can record its trace context on a child object it creates
// (InjectAnnotation, under AnnotationTraceParent) and the child's reconcile can link its span to
// it (LinkFromAnnotations or ExtractAnnotation with trace.WithLinks): a link, not a parent.
package tracing
