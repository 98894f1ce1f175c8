package tracing

import (
	"context"
	"strings"

	"github.com/pkg/errors"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// Environment variables Setup reads itself. The OTLP exporters read the rest of the
// OTEL_EXPORTER_OTLP_* variables (endpoint, headers, insecure, certificates, timeout, compression),
// and the SDK reads OTEL_TRACES_SAMPLER(_ARG), OTEL_BSP_*, OTEL_SPAN_*_LIMIT, OTEL_SERVICE_NAME and
// OTEL_RESOURCE_ATTRIBUTES.
const (
	envSDKDisabled          = "OTEL_SDK_DISABLED"
	envTracesExporter       = "OTEL_TRACES_EXPORTER"
	envEndpoint             = "OTEL_EXPORTER_OTLP_ENDPOINT"
	envTracesEndpoint       = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	envProtocol             = "OTEL_EXPORTER_OTLP_PROTOCOL"
	envTracesProtocol       = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
	protocolGRPC            = "grpc"
	protocolHTTPProtobuf    = "http/protobuf"
	protocolHTTPJSON        = "http/json"
	exporterOTLP            = "otlp"
	exporterNone            = "none"
	defaultExporterProtocol = protocolGRPC
)

// exporterChoice is what the environment asks for: no exporter, or OTLP over a protocol.
type exporterChoice struct {
	enabled  bool
	protocol string // protocolGRPC or protocolHTTPProtobuf when enabled
}

// chooseExporter decides from the environment (read through getenv, where "" means unset) whether
// tracing is on and which OTLP protocol to use. It never connects anywhere.
//
//   - OTEL_SDK_DISABLED=true turns tracing off.
//   - OTEL_TRACES_EXPORTER=none turns it off, =otlp turns it on; any other exporter is an error.
//   - Unset, tracing is on when OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT
//     is set, off otherwise (the default: nothing to export to).
//   - OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, else OTEL_EXPORTER_OTLP_PROTOCOL, else grpc; grpc and
//     http/protobuf are supported (the Go OTLP exporter has no http/json).
func chooseExporter(getenv func(string) string) (exporterChoice, error) {
	if strings.EqualFold(strings.TrimSpace(getenv(envSDKDisabled)), "true") {
		return exporterChoice{}, nil
	}

	enabled := false
	if list := strings.TrimSpace(getenv(envTracesExporter)); list != "" {
		for _, name := range strings.Split(list, ",") {
			switch name = strings.ToLower(strings.TrimSpace(name)); name {
			case exporterOTLP:
				enabled = true
			case exporterNone, "":
			default:
				return exporterChoice{}, errors.Errorf("%s=%q: unsupported traces exporter %q (kdag supports otlp and none)",
					envTracesExporter, list, name)
			}
		}
		// The specification: "none" means no automatically configured exporter, whatever else
		// the list holds.
		if enabled && hasNone(list) {
			enabled = false
		}
	} else {
		enabled = strings.TrimSpace(getenv(envEndpoint)) != "" || strings.TrimSpace(getenv(envTracesEndpoint)) != ""
	}
	if !enabled {
		return exporterChoice{}, nil
	}

	protocol := strings.ToLower(strings.TrimSpace(getenv(envTracesProtocol)))
	if protocol == "" {
		protocol = strings.ToLower(strings.TrimSpace(getenv(envProtocol)))
	}
	switch protocol {
	case "":
		protocol = defaultExporterProtocol
	case protocolGRPC, protocolHTTPProtobuf:
	case protocolHTTPJSON:
		return exporterChoice{}, errors.Errorf("OTLP protocol %q is not supported by the Go exporter: use grpc or http/protobuf", protocol)
	default:
		return exporterChoice{}, errors.Errorf("unknown OTLP protocol %q: use grpc or http/protobuf", protocol)
	}
	return exporterChoice{enabled: true, protocol: protocol}, nil
}

func hasNone(list string) bool {
	for _, name := range strings.Split(list, ",") {
		if strings.EqualFold(strings.TrimSpace(name), exporterNone) {
			return true
		}
	}
	return false
}

// newOTLPExporter is newOTLPExporterFor; tests wrap it to see which protocol Setup chose.
var newOTLPExporter = newOTLPExporterFor

// newOTLPExporterFor builds the exporter for a protocol. Both constructors read the
// OTEL_EXPORTER_OTLP_* variables themselves and do not connect: gRPC dials lazily, HTTP per export.
func newOTLPExporterFor(ctx context.Context, protocol string) (sdktrace.SpanExporter, error) {
	switch protocol {
	case protocolGRPC:
		exp, err := otlptracegrpc.New(ctx)
		if err != nil {
			return nil, errors.Wrap(err, "creating the OTLP gRPC trace exporter")
		}
		return exp, nil
	case protocolHTTPProtobuf:
		exp, err := otlptracehttp.New(ctx)
		if err != nil {
			return nil, errors.Wrap(err, "creating the OTLP HTTP trace exporter")
		}
		return exp, nil
	default:
		return nil, errors.Errorf("unknown OTLP protocol %q", protocol)
	}
}
