package controller_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kdag-dev/kdag/pkg/controller"
	"github.com/kdag-dev/kdag/pkg/testing/testapi"
	"github.com/kdag-dev/kdag/pkg/tracing"
)

// layeredRM adds n ConfigMaps "<owner>-<i>": the first 10 are roots, every later one depends on
// the one 10 places before it, so the graph has n/10 layers of up to 10 independent nodes.
func layeredRM(n int) funcRM {
	return funcRM{add: func(w *testapi.Widget, b *controller.Graph) error {
		nodes := make([]controller.Node, n)
		for i := range n {
			cm := &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Name: w.Name + "-" + strconv.Itoa(i)},
				Data:       map[string]string{"index": strconv.Itoa(i)},
			}
			if i < 10 {
				nodes[i] = b.Add(cm)
			} else {
				nodes[i] = b.Add(cm, controller.DependsOn(nodes[i-10]))
			}
		}
		return nil
	}}
}

// BenchmarkReconcile measures one reconcile of an owner with a graph of N ConfigMaps against
// envtest: state=create starts from a new owner (every node created), state=noop from a settled
// one (no write, no uncached read, which it asserts). It reports the API requests per
// reconcile and, for state=noop, cpu-ns/op: the CPU time (user and system, from getrusage) the
// whole test process spent per reconcile, so a busy machine's waiting does not count.
func BenchmarkReconcile(b *testing.B) {
	quietLogs()
	for _, n := range []int{10, 100} {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			b.Run("state=create", func(b *testing.B) { benchmarkCreate(b, n) })
			b.Run("state=noop", func(b *testing.B) { benchmarkNoop(b, n) })
		})
	}
}

func benchmarkCreate(b *testing.B, n int) {
	f := newFixture(b, layeredRM(n))
	// Warm up: start the informers and fill the REST mapper, which are one-off requests.
	f.widget("warmup", testapi.WidgetSpec{MaxReplicas: 1})
	f.settle("warmup")
	f.calls.Reset()

	iterations := 0
	for b.Loop() {
		b.StopTimer()
		name := "w" + strconv.Itoa(iterations)
		iterations++
		f.widget(name, testapi.WidgetSpec{MaxReplicas: 1})
		f.waitCached(&testapi.Widget{}, name, "cache sees Widget "+name, func() bool { return true })
		b.StartTimer()
		if err := f.reconcile(name); err != nil {
			b.Fatalf("reconcile %s: %v", name, err)
		}
	}
	reportCalls(b, f, iterations)
}

func benchmarkNoop(b *testing.B, n int) {
	f := newFixture(b, layeredRM(n))
	f.widget("app", testapi.WidgetSpec{MaxReplicas: 1})
	f.settle("app")
	f.calls.Reset()

	iterations := 0
	cpu := processCPUTime()
	for b.Loop() {
		iterations++
		if err := f.reconcile("app"); err != nil {
			b.Fatalf("reconcile: %v", err)
		}
	}
	b.ReportMetric(float64(processCPUTime()-cpu)/float64(iterations), "cpu-ns/op")
	if writes, reads := reportCalls(b, f, iterations); writes != 0 || reads != 0 {
		w, r := f.calls.snapshot()
		b.Errorf("reconciles of a settled owner made %d writes (%v) and %d uncached reads (%v), want none", writes, w, reads, r)
	}
}

// reportCalls reports the counted API requests per reconcile and returns their totals.
func reportCalls(b *testing.B, f *fixture, iterations int) (writes, reads int) {
	w, r := f.calls.snapshot()
	if iterations > 0 {
		b.ReportMetric(float64(len(w))/float64(iterations), "writes/op")
		b.ReportMetric(float64(len(r))/float64(iterations), "uncachedReads/op")
	}
	return len(w), len(r)
}

// BenchmarkReconcileTracing measures the cost of tracing on a settled owner: tracing=off is the
// default (no-op tracer), tracing=on exports every span through the SDK's batch processor to an
// exporter that drops them, so the difference is kdag's and the SDK's span work.
func BenchmarkReconcileTracing(b *testing.B) {
	quietLogs()
	for _, on := range []bool{false, true} {
		name := "tracing=off"
		if on {
			name = "tracing=on"
		}
		b.Run("nodes=100/state=noop/"+name, func(b *testing.B) {
			if on {
				shutdown, err := tracing.Setup(context.Background(), tracing.WithExporter(tracetest.NewNoopExporter()))
				if err != nil {
					b.Fatal(err)
				}
				defer func() { _ = shutdown(context.Background()) }()
			}
			benchmarkNoop(b, 100)
		})
	}
}
