package tracing

import (
	"context"
	"strings"
	"sync"

	"github.com/opentracing/opentracing-go"
	"github.com/pkg/errors"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	otbridge "go.opentelemetry.io/otel/bridge/opentracing"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"
)

const (
	// InstrumentationName is the instrumentation scope of kdag's own spans.
	InstrumentationName = "github.com/kdag-dev/kdag"

	// DefaultServiceName is service.name when neither WithServiceName nor OTEL_SERVICE_NAME sets it.
	DefaultServiceName = "kdag"

	// bridgeInstrumentationName is the scope of spans started through the OpenTracing API.
	bridgeInstrumentationName = "go.opentelemetry.io/otel/bridge/opentracing"
)

// Tracer returns the tracer kdag's code starts its spans with. It asks the global provider on each
// call, so it is the no-op tracer while tracing is off and a bridge-aware tracer once Setup turned
// it on. Never start kdag spans from an SDK TracerProvider directly: see the package documentation.
func Tracer() trace.Tracer {
	return otel.Tracer(InstrumentationName)
}

// Option configures Setup.
type Option func(*config)

type config struct {
	serviceName string
	attributes  []attribute.KeyValue
	exporter    sdktrace.SpanExporter
	syncer      bool
	sampler     sdktrace.Sampler
}

// WithServiceName sets the default service.name resource attribute. OTEL_SERVICE_NAME and a
// service.name in OTEL_RESOURCE_ATTRIBUTES take precedence, so that operators can rename a
// deployment without a rebuild.
func WithServiceName(name string) Option {
	return func(c *config) { c.serviceName = name }
}

// WithResourceAttributes adds resource attributes (for example service.version). Attributes from
// OTEL_RESOURCE_ATTRIBUTES with the same key take precedence.
func WithResourceAttributes(attrs ...attribute.KeyValue) Option {
	return func(c *config) { c.attributes = append(c.attributes, attrs...) }
}

// WithExporter exports to exp instead of the exporter the environment selects, and turns tracing
// on whatever the environment says. Tests pass tracetest.NewInMemoryExporter(). Setup's shutdown
// shuts exp down.
func WithExporter(exp sdktrace.SpanExporter) Option {
	return func(c *config) { c.exporter = exp }
}

// WithSyncer exports each span synchronously when it ends (a simple span processor) instead of
// batching. Meant for tests with an in-memory exporter; it slows down a real process.
func WithSyncer() Option {
	return func(c *config) { c.syncer = true }
}

// WithSampler sets the sampler. It overrides OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG,
// which the SDK honours otherwise (always_on, always_off, traceidratio, parentbased_always_on,
// parentbased_always_off, parentbased_traceidratio; the default is parentbased_always_on).
func WithSampler(s sdktrace.Sampler) Option {
	return func(c *config) { c.sampler = s }
}

// Setup configures OpenTelemetry tracing for the process from the standard OTEL_* environment
// variables (see the package documentation) and installs the OpenTracing bridge.
//
// While tracing is off (the default) it only sets the W3C tracecontext and baggage propagators:
// the global tracer provider stays the no-op one and costs nothing. When it is on, it sets the
// global tracer provider, propagator and OpenTracing tracer.
//
// The returned shutdown flushes the spans still queued, shuts the exporter down and puts back the
// global tracer provider, propagator and OpenTracing tracer found before Setup (unless something
// else replaced them since). It is safe to call more than once; it is never nil when err is nil.
func Setup(ctx context.Context, opts ...Option) (shutdown func(context.Context) error, err error) {
	cfg := config{serviceName: DefaultServiceName}
	for _, opt := range opts {
		opt(&cfg)
	}

	exporter := cfg.exporter
	if exporter == nil {
		if exporter, err = newExporter(ctx); err != nil {
			return nil, err
		}
	}

	prev := captureGlobals()
	propagator := newPropagator()

	if exporter == nil {
		otel.SetTextMapPropagator(propagator)
		return onceShutdown(func(context.Context) error {
			prev.restore(globals{propagator: propagator})
			return nil
		}), nil
	}

	res, err := newResource(ctx, cfg)
	if err != nil {
		_ = exporter.Shutdown(ctx)
		return nil, err
	}

	tpOpts := []sdktrace.TracerProviderOption{sdktrace.WithResource(res)}
	if cfg.syncer {
		tpOpts = append(tpOpts, sdktrace.WithSyncer(exporter))
	} else {
		// Batch limits and timeouts come from OTEL_BSP_* when set.
		tpOpts = append(tpOpts, sdktrace.WithBatcher(exporter))
	}
	if cfg.sampler != nil {
		tpOpts = append(tpOpts, sdktrace.WithSampler(cfg.sampler))
	}
	sdkProvider := sdktrace.NewTracerProvider(tpOpts...)

	// The bridge: OpenTracing spans become OpenTelemetry spans of the same provider, and every
	// OpenTelemetry tracer handed out globally is wrapped so that starting a span also makes it the
	// active OpenTracing span of the returned context. This is what NewTracerPair does, with one
	// wrapped tracer per instrumentation scope instead of a single one for all names.
	bridge := otbridge.NewBridgeTracer()
	bridge.SetTextMapPropagator(propagator)
	bridge.SetWarningHandler(func(msg string) {
		otel.Handle(errors.New("opentracing bridge: " + strings.TrimSpace(msg)))
	})
	provider := otbridge.NewTracerProvider(bridge, sdkProvider)
	bridge.SetOpenTelemetryTracer(provider.Tracer(bridgeInstrumentationName))

	ours := globals{provider: provider, propagator: propagator, openTracing: bridge}
	otel.SetTextMapPropagator(propagator)
	otel.SetTracerProvider(provider)
	opentracing.SetGlobalTracer(bridge)

	return onceShutdown(func(ctx context.Context) error {
		// Shutdown drains the batch processor (exporting what is queued) and shuts the exporter down.
		err := sdkProvider.Shutdown(ctx)
		prev.restore(ours)
		return errors.Wrap(err, "shutting down the tracer provider")
	}), nil
}

func newResource(ctx context.Context, cfg config) (*resource.Resource, error) {
	// Later sources win: the code's defaults first, the environment last.
	res, err := resource.New(ctx,
		resource.WithTelemetrySDK(),
		resource.WithAttributes(semconv.ServiceName(cfg.serviceName)),
		resource.WithAttributes(cfg.attributes...),
		resource.WithFromEnv(),
	)
	if errors.Is(err, resource.ErrPartialResource) {
		// A malformed OTEL_RESOURCE_ATTRIBUTES: report it, keep what could be parsed.
		otel.Handle(err)
		err = nil
	}
	return res, errors.Wrap(err, "building the trace resource")
}

func onceShutdown(f func(context.Context) error) func(context.Context) error {
	var (
		once sync.Once
		err  error
	)
	return func(ctx context.Context) error {
		once.Do(func() { err = f(ctx) })
		return err
	}
}

// globals are the process-wide values Setup sets. A nil field is not touched.
type globals struct {
	provider    trace.TracerProvider
	propagator  propagation.TextMapPropagator
	openTracing opentracing.Tracer
}

func captureGlobals() globals {
	return globals{
		provider:    otel.GetTracerProvider(),
		propagator:  otel.GetTextMapPropagator(),
		openTracing: opentracing.GlobalTracer(),
	}
}

// restore puts back the values of g for each global that still holds what Setup set (ours).
func (g globals) restore(ours globals) {
	if ours.provider != nil && otel.GetTracerProvider() == ours.provider {
		otel.SetTracerProvider(g.provider)
	}
	if ours.propagator != nil && otel.GetTextMapPropagator() == ours.propagator {
		otel.SetTextMapPropagator(g.propagator)
	}
	if ours.openTracing != nil && opentracing.GlobalTracer() == ours.openTracing {
		opentracing.SetGlobalTracer(g.openTracing)
	}
}

// w3cPropagator is W3C tracecontext plus baggage behind a pointer, so that restore can tell whether the
// global propagator is still the one Setup set (the composite propagator itself is a slice, which
// does not compare).
type w3cPropagator struct {
	propagation.TextMapPropagator
}

func newPropagator() *w3cPropagator {
	return &w3cPropagator{propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})}
}
