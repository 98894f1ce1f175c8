package controller_test

import (
	"context"
	"regexp"
	"testing"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/controller"
	"github.com/kdag-dev/kdag/pkg/testing/testapi"
	"github.com/kdag-dev/kdag/pkg/tracing"
)

// TestStatus_WaitingForAndLastReconcile (issue 15 item 3): while the owner is not Ready, its
// status names the node it waits for and since when, and the last reconcile's trace ID and
// critical path; neither causes a write by itself (settle ends with reconciles that write
// nothing), Since stays while the same node holds Ready back, and WaitingFor goes once Ready.
func TestStatus_WaitingForAndLastReconcile(t *testing.T) {
	exporter := tracetest.NewInMemoryExporter()
	shutdown, err := tracing.Setup(context.Background(), tracing.WithExporter(exporter), tracing.WithSyncer())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = shutdown(context.Background()) })

	f := newFixture(t, widgetRM{readyDeployment: false})
	f.widget("app", testapi.WidgetSpec{MaxReplicas: 3})
	f.settle("app")

	st := f.status("app")
	w := st.WaitingFor
	if w == nil || w.Group != "apps" || w.Kind != "Deployment" || w.Namespace != f.ns || w.Name != "app" ||
		w.State != kdagv1alpha1.NodeWaiting || w.Since.IsZero() {
		t.Fatalf("status.waitingFor = %+v, want the Deployment app, Waiting, with a time", w)
	}
	last := st.LastReconcile
	if last == nil || !regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(last.TraceID) {
		t.Fatalf("status.lastReconcile = %+v, want a trace ID", last)
	}
	traced := false
	for _, s := range exporter.GetSpans() {
		traced = traced || (s.Name == controller.SpanReconcile && s.SpanContext.TraceID().String() == last.TraceID)
	}
	if !traced {
		t.Errorf("no reconcile span has the status' trace ID %s", last.TraceID)
	}
	// Which of the independent branches ends last varies from run to run (TestCriticalPath pins
	// the rule): the path holds nodes of the graph, each within the run's duration.
	graphNodes := map[string]bool{"app-config": true, "app-secret": true, "app": true}
	if len(last.CriticalPath) == 0 {
		t.Errorf("critical path empty, want the chain that ended last")
	}
	for _, p := range last.CriticalPath {
		if !graphNodes[p.Name] || p.Namespace != f.ns || p.WaitMillis+p.RunMillis > last.DurationMillis {
			t.Errorf("critical path node %+v: not a node of the graph, or longer than the run (%d ms)", p, last.DurationMillis)
		}
	}

	// More reconciles with nothing changed: no write (settle), the same Since.
	f.settle("app")
	if again := f.status("app").WaitingFor; again == nil || !again.Since.Equal(&w.Since) {
		t.Errorf("waitingFor after more reconciles %+v, want since %v kept", again, w.Since)
	}

	f.markDeploymentAvailable("app")
	f.settle("app")
	st = f.status("app")
	if st.WaitingFor != nil {
		t.Errorf("Ready owner: waitingFor = %+v, want none", st.WaitingFor)
	}
	if st.LastReconcile == nil || st.LastReconcile.TraceID == last.TraceID {
		t.Errorf("lastReconcile %+v: want the reconcile that made the owner Ready, not %s", st.LastReconcile, last.TraceID)
	}
}
