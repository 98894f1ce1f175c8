package tracing

import (
	"context"
	"os"
	"strings"

	"github.com/pkg/errors"
	"go.opentelemetry.io/contrib/exporters/autoexport"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// Environment variables Setup reads itself to decide whether tracing is on. The OpenTelemetry
// contrib autoexport package reads OTEL_TRACES_EXPORTER and the OTLP protocol, the OTLP exporters
// the rest of the OTEL_EXPORTER_OTLP_* variables (endpoint, headers, insecure, certificates,
// timeout, compression), and the SDK OTEL_TRACES_SAMPLER(_ARG), OTEL_BSP_*, OTEL_SPAN_*_LIMIT,
// OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES.
const (
	envSDKDisabled     = "OTEL_SDK_DISABLED"
	envTracesExporter  = "OTEL_TRACES_EXPORTER"
	envEndpoint        = "OTEL_EXPORTER_OTLP_ENDPOINT"
	envTracesEndpoint  = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	envProtocol        = "OTEL_EXPORTER_OTLP_PROTOCOL"
	envTracesProtocol  = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
	supportedExporters = "otlp (protocol http/protobuf, the default, or grpc), console or none"
)

// newExporter returns the span exporter the environment asks for, or nil when tracing is off. The
// OpenTelemetry contrib autoexport package builds it, as the specification says
// (OTEL_TRACES_EXPORTER: otlp, console or none; OTEL_EXPORTER_OTLP_(TRACES_)PROTOCOL:
// http/protobuf by default, or grpc), with one rule of kdag's over it: with OTEL_TRACES_EXPORTER
// unset, tracing is on only when OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT
// is set (an operator has nothing to export to by default). OTEL_SDK_DISABLED=true or
// OTEL_TRACES_EXPORTER=none turn it off. It returns an error naming the variables for an exporter
// or protocol it does not know. It never connects anywhere.
func newExporter(ctx context.Context) (sdktrace.SpanExporter, error) {
	if strings.EqualFold(strings.TrimSpace(os.Getenv(envSDKDisabled)), "true") {
		return nil, nil
	}
	if strings.TrimSpace(os.Getenv(envTracesExporter)) == "" &&
		strings.TrimSpace(os.Getenv(envEndpoint)) == "" && strings.TrimSpace(os.Getenv(envTracesEndpoint)) == "" {
		return nil, nil
	}
	exp, err := autoexport.NewSpanExporter(ctx)
	if err != nil {
		return nil, errors.Wrapf(err, "traces exporter from %s=%q, %s=%q, %s=%q: kdag supports %s", envTracesExporter,
			os.Getenv(envTracesExporter), envProtocol, os.Getenv(envProtocol), envTracesProtocol, os.Getenv(envTracesProtocol),
			supportedExporters)
	}
	if autoexport.IsNoneSpanExporter(exp) {
		return nil, nil
	}
	return exp, nil
}
