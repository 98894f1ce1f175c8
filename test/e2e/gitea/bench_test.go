package gitea

import (
	"context"
	"fmt"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	giteav1alpha1 "github.com/kdag-dev/kdag/apis/gitea/v1alpha1"
	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/controller"
	"github.com/kdag-dev/kdag/pkg/testing/latency"
	"github.com/kdag-dev/kdag/pkg/testing/requests"
)

// BenchmarkSample_TimeToReady (issue 16 item 1) measures the reference sample (config/samples/gitea.yaml: a Gitea
// with its PostgreSQL, Valkey and GiteaServer, the migration Job and the workloads) from its
// creation until the Gitea is Ready for its generation, with the operator reaching the local kwok
// cluster's API server through a latency proxy (pkg/testing/latency) that adds rtt to every
// request and watch event; rtt=0ms goes through the same proxy without a delay. Readiness is
// polled every 10 ms with a direct client. Beside seconds-to-ready it reports requests/op, the
// manager's requests in the timed window (watches left out, the informers' first lists in; the
// access reviews of kdag's start-up RBAC check, made before the clock, out), and writes/op,
// those of them that wrote (events included).
//
// The engines:
//   - kdag: the operator (controllers.Setup) with default options;
//   - serial: the same operator applying one object at a time: Options{MaxParallelNodes: 1,
//     MaxConcurrentReconciles: 1} for each of its four controllers (which still run side by
//     side, one per kind). kdag's graph, readiness gates and status hooks without the parallelism;
//   - plain: the baseline issue 16 item 1 asks for, the same graph applied one object at a time
//     by a plain sequential controller-runtime reconciler per kind (plainReconciler in
//     plain_test.go: CreateOrUpdate of each object of the components' AddResources in their
//     order, waiting for each to be ready before the next, one reconcile at a time per kind).
//
// Each iteration uses a new namespace and a new manager, started just before the clock starts
// and not waited for: its caches' first lists (one per kind through the proxy, in parallel) may
// fall inside the timed window, for every engine alike. The engines run one after the other on
// one cluster, and the position of an engine in the run moves its figure by several percent:
// to compare two, run each alone per invocation, in alternating order (docs/benchmarks.md,
// section 1c). It reports seconds-to-ready (also ns/op). The e2e packages are not in `make bench`
// (their TestMain starts a cluster): run it with
// go test -run '^$' -bench BenchmarkSample_TimeToReady ./test/e2e/gitea/.
func BenchmarkSample_TimeToReady(b *testing.B) {
	kdag := func(opts ...controller.Options) func(testing.TB, *rest.Config, string) func() {
		return func(t testing.TB, cfg *rest.Config, ns string) func() {
			stop, _ := startManagerWithConfig(t, cfg, ns, "bench", opts...)
			return stop
		}
	}
	engines := []struct {
		name  string
		start func(t testing.TB, cfg *rest.Config, ns string) (stop func())
	}{
		{"kdag", kdag()},
		{"serial", kdag(controller.Options{MaxParallelNodes: 1, MaxConcurrentReconciles: 1})},
		{"plain", func(t testing.TB, cfg *rest.Config, ns string) func() { return startPlainManager(t, cfg, ns, nil) }},
	}
	for _, rtt := range []time.Duration{0, 20 * time.Millisecond} {
		for _, engine := range engines {
			b.Run(fmt.Sprintf("rtt=%dms/engine=%s", rtt.Milliseconds(), engine.name), func(b *testing.B) {
				benchmarkTimeToReady(b, rtt, engine.start)
			})
		}
	}
}

func benchmarkTimeToReady(b *testing.B, rtt time.Duration, start func(t testing.TB, cfg *rest.Config, ns string) (stop func())) {
	p, err := latency.Start(local.Config.Host, latency.Options{RTT: rtt})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = p.Close() }) // after the managers have stopped
	var (
		total            time.Duration
		n, reqs, written int
	)
	for b.Loop() {
		b.StopTimer()
		ns := local.Namespace(b)
		rec := &requests.Recorder{}
		cfg := p.Config(local.Config)
		cfg.Wrap(rec.Wrap)
		stop := start(b, cfg, ns)
		rec.Reset() // the start-up's RBAC check: done before the clock
		b.StartTimer()
		begin := time.Now()
		key := applySample(b, ns, "gitea.yaml")
		waitReadyPolling(b, key, 2*time.Minute)
		total += time.Since(begin)
		n++
		b.StopTimer()
		r, w := countRequests(rec.Requests())
		reqs, written = reqs+r, written+w
		stop()
		b.StartTimer()
	}
	b.ReportMetric(total.Seconds()/float64(n), "seconds-to-ready")
	b.ReportMetric(float64(reqs)/float64(n), "requests/op")
	b.ReportMetric(float64(written)/float64(n), "writes/op")
}

// countRequests counts the requests a manager sent until its Gitea was Ready, watches left
// out, and among them the writes the API server did not refuse (events included: they cost
// the API server as much).
func countRequests(rs []requests.Request) (all, writes int) {
	for _, r := range rs {
		if r.Watch {
			continue
		}
		all++
		if r.Write() && !r.Refused() {
			writes++
		}
	}
	return all, writes
}

// waitReadyPolling polls the Gitea every 10 ms until it is Ready for its generation.
func waitReadyPolling(b *testing.B, key client.ObjectKey, timeout time.Duration) {
	b.Helper()
	g := &giteav1alpha1.Gitea{}
	g.Namespace, g.Name = key.Namespace, key.Name
	deadline := time.Now().Add(timeout)
	last := ""
	for time.Now().Before(deadline) {
		if last = readyFor(context.Background(), g, func() *kdagv1alpha1.Status { return &g.Status.Status }); last == "" {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	b.Fatalf("Gitea %s not Ready within %s: %s", key, timeout, last)
}
