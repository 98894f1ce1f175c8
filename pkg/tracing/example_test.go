package tracing_test

import (
	"context"
	"log"

	"github.com/kdag-dev/kdag/pkg/tracing"
)

// Set tracing up once at start-up; shutdown flushes the queued spans on exit. With no
// OTEL_EXPORTER_OTLP_* endpoint in the environment, tracing stays off and costs nothing.
func ExampleSetup() {
	ctx := context.Background()
	shutdown, err := tracing.Setup(ctx, tracing.WithServiceName("my-operator"))
	if err != nil {
		log.Fatal(err)
	}
	defer func() { _ = shutdown(context.Background()) }()
	// ... run the manager ...
}
