package controller_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/kdag-dev/kdag/pkg/controller"
	"github.com/kdag-dev/kdag/pkg/testing/testapi"
	"github.com/kdag-dev/kdag/pkg/tracing"
)

// BenchmarkConverge_Phases traces where the time of a first deploy goes, on the chain (width 1 ×
// depth 3) and on the widest shape of BenchmarkConverge (width 50 × depth 2): each iteration
// deploys one owner with the plain CreateOrUpdate baseline and one with kdag, traced with an
// in-memory exporter, and reports medians (milliseconds):
//
//   - baseline-ms, kdag-ms: the two deploys' wall times;
//   - start-ms: from the reconcile's start to the first node's apply (reading the owner,
//     building the graph, the node's cache read and render);
//   - apply-ms: one node's apply span (the request and its response, decoded);
//   - handoff-ms (the chain only): from one node's apply end to the next node's apply start
//     (readiness, the scheduler's wake-up of the dependent, its cache read and render);
//   - graph-ms: the graph's run, from its first node's start to its last node's end;
//   - status-ms: from the graph's end to the reconcile's end (prune, the status and revision
//     writes, events). The status lists every node with its blockers (GraphSummary.Nodes): at
//     width 50 it is the largest write of the deploy.
func BenchmarkConverge_Phases(b *testing.B) {
	quietLogs()
	exporter := tracetest.NewInMemoryExporter()
	shutdown, err := tracing.Setup(context.Background(), tracing.WithExporter(exporter), tracing.WithSyncer())
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = shutdown(context.Background()) }()
	for _, shape := range []struct{ width, depth int }{{1, 3}, {50, 2}} {
		b.Run(fmt.Sprintf("width=%d/depth=%d", shape.width, shape.depth), func(b *testing.B) {
			benchmarkPhases(b, exporter, shape.width, shape.depth)
		})
	}
}

// benchmarkPhases is one shape of BenchmarkConverge_Phases, traced into exporter.
func benchmarkPhases(b *testing.B, exporter *tracetest.InMemoryExporter, width, depth int) {
	f := startFixture(b, fixtureConfig{}, convergeRM(width, depth))
	f.widget("warmup", testapi.WidgetSpec{MaxReplicas: 1})
	if err := f.reconcile("warmup"); err != nil {
		b.Fatal(err)
	}
	phases := map[string][]time.Duration{}
	add := func(name string, d time.Duration) { phases[name] = append(phases[name], d) }
	deploy := func(name string, run func() error) time.Duration {
		f.widget(name, testapi.WidgetSpec{MaxReplicas: 1})
		f.quiesce(50 * time.Millisecond)
		exporter.Reset()
		start := time.Now()
		if err := run(); err != nil {
			b.Fatalf("deploy %s: %v", name, err)
		}
		d := time.Since(start)
		f.waitOwnedCached(name, width*depth)
		return d
	}
	for i := 0; b.Loop(); i++ {
		n := strconv.Itoa(i)
		add("baseline-ms", deploy("b"+n, func() error { return convergeBaseline(context.Background(), f, "b"+n, width, depth) }))
		add("kdag-ms", deploy("k"+n, func() error { return f.reconcile("k" + n) }))
		var reconcile, runGraph tracetest.SpanStub
		var applies []tracetest.SpanStub
		for _, s := range exporter.GetSpans() {
			switch s.Name {
			case controller.SpanReconcile:
				reconcile = s
			case controller.SpanRunGraph:
				runGraph = s
			case controller.SpanApply:
				applies = append(applies, s)
			}
		}
		if len(applies) != width*depth {
			b.Fatalf("deploy k%s: %d apply spans, want %d", n, len(applies), width*depth)
		}
		add("graph-ms", runGraph.EndTime.Sub(runGraph.StartTime))
		slices.SortFunc(applies, func(x, y tracetest.SpanStub) int { return x.StartTime.Compare(y.StartTime) })
		add("start-ms", applies[0].StartTime.Sub(reconcile.StartTime))
		for j, a := range applies {
			add("apply-ms", a.EndTime.Sub(a.StartTime))
			if j > 0 && width == 1 {
				add("handoff-ms", a.StartTime.Sub(applies[j-1].EndTime))
			}
		}
		add("status-ms", reconcile.EndTime.Sub(runGraph.EndTime))
	}
	for name, ds := range phases {
		b.ReportMetric(ms(percentile(ds, 0.5)), name)
	}
}
