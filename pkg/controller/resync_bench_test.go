package controller_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/kdag-dev/kdag/pkg/controller"
	"github.com/kdag-dev/kdag/pkg/testing/testapi"
)

// resyncPass is what one full resync of the settled owners cost the resync helper.
type resyncPass struct {
	Wall, CPU time.Duration // from the pass's start until every owner was reconciled
	// SyncWall and SyncCPU are the part spent before the caches had synced (manager start only).
	SyncWall, SyncCPU time.Duration
	Reconciles        int
	Counts            scaleCounts
}

// resyncResult is the resync helper's report, printed as JSON after "ready".
type resyncResult struct {
	Start, Warm resyncPass
}

// BenchmarkResync measures a full resync of a settled fleet (issue 16 item 3): 1000 owners with
// 10 ConfigMaps each are first deployed by a kdag manager (BenchmarkScale's, untimed, until every
// owner is Ready) and that manager is stopped; then a new kdag manager with default options
// starts in a child process, as at a restart of the operator, and reconciles every owner.
//
// The start pass is that manager's start: from NewManager until controller-runtime's reconcile
// counter has counted every owner and the work queue is empty and idle; it includes the caches'
// initial lists (start-sync-*). The warm pass then reconciles every owner once more in the same manager
// (MaxConcurrentReconciles workers calling Reconcile, as a requeue of all owners would), with
// what kdag remembers from the first pass. For each pass (start-*, warm-*) it reports, from the
// child itself: wall-ms, cpu-ms (the child's CPU time, getrusage), requests/owner and
// writes/owner (writes and events; must be 0: the benchmark fails on any), and for the start
// peak-RSS-MiB and start-server-cpu-ms (kube-apiserver and etcd over the start, as seen from
// this process). ns/op runs from the child's start until both passes are done. Target: ≤ 0.5 s
// of manager CPU and 0 writes. It takes about a minute per iteration (the deploy), needs /proc, and is skipped with
// -short.
func BenchmarkResync(b *testing.B) {
	quietLogs()
	if testing.Short() {
		b.Skip("skipped with -short: it takes minutes")
	}
	if _, err := readProcStat(1); err != nil {
		b.Skip("needs /proc")
	}
	shape := fmt.Sprintf("owners=%d/children=%d", scaleOwners, scaleChildren)
	b.Run(shape, func(b *testing.B) {
		var runs []resyncRun
		for b.Loop() {
			runs = append(runs, runResync(b, scaleOwners, scaleChildren))
		}
		reportResync(b, runs, "start", scaleOwners)
		reportResync(b, runs, "warm", scaleOwners)
	})
}

// resyncRun is what one run of BenchmarkResync measured.
type resyncRun struct {
	result    resyncResult
	rss       int64
	serverCPU time.Duration
}

func reportResync(b *testing.B, runs []resyncRun, pass string, owners int) {
	var wall, cpu, syncWall, syncCPU, server []time.Duration
	var rss int64
	var counts scaleCounts
	for _, r := range runs {
		p := r.result.Start
		if pass == "warm" {
			p = r.result.Warm
		} else {
			rss = max(rss, r.rss)
			server = append(server, r.serverCPU)
			syncWall, syncCPU = append(syncWall, p.SyncWall), append(syncCPU, p.SyncCPU)
		}
		wall, cpu = append(wall, p.Wall), append(cpu, p.CPU)
		counts.Reads += p.Counts.Reads
		counts.Writes += p.Counts.Writes
		counts.Events += p.Counts.Events
	}
	b.ReportMetric(ms(meanDuration(wall)), pass+"-wall-ms")
	b.ReportMetric(ms(meanDuration(cpu)), pass+"-cpu-ms")
	per := func(n int64) float64 { return float64(n) / float64(owners*len(runs)) }
	b.ReportMetric(per(counts.Reads+counts.Writes+counts.Events), pass+"-requests/owner")
	b.ReportMetric(per(counts.Writes+counts.Events), pass+"-writes/owner")
	if pass == "start" {
		b.ReportMetric(ms(meanDuration(syncWall)), "start-sync-wall-ms")
		b.ReportMetric(ms(meanDuration(syncCPU)), "start-sync-cpu-ms")
		b.ReportMetric(ms(meanDuration(server)), "start-server-cpu-ms")
		b.ReportMetric(float64(rss)/(1<<20), "peak-RSS-MiB")
	}
}

// runResync deploys owners × children with a kdag manager (untimed), stops it, and measures a
// new manager's start and a warm resync in a child process.
func runResync(b *testing.B, owners, children int) resyncRun {
	b.StopTimer()
	defer b.StartTimer()
	ns := env.Namespace(b)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg := scaleHelperConfig{
		Engine: "kdag", Host: env.Config.Host, CAData: env.Config.CAData, CertData: env.Config.CertData,
		KeyData: env.Config.KeyData, Namespace: ns, Children: children, Owners: owners,
	}
	deployer := startScaleHelper(b, cfg)
	ready := newReadyCounter(ctx, b, ns)
	deployer.send("start")
	createOwners(b, ns, owners)
	ready.wait(b, owners, scaleReadyTimeout)
	deployer.stop(b)

	cfg.Engine = "kdag-resync"
	serverCPU := controlPlaneCPUTime(b)
	b.StartTimer()
	child := startScaleHelper(b, cfg) // returns once both passes are done
	b.StopTimer()
	run := resyncRun{serverCPU: controlPlaneCPUTime(b) - serverCPU, rss: child.peakRSS(b)}
	if err := json.Unmarshal([]byte(child.line(b)), &run.result); err != nil {
		b.Fatalf("resync result: %v; stderr:\n%s", err, child.stderr)
	}
	child.stop(b)
	for _, p := range []resyncPass{run.result.Start, run.result.Warm} {
		if p.Counts.Writes != 0 || p.Counts.Events != 0 {
			b.Fatalf("a resync of settled owners wrote: %+v", p.Counts)
		}
		if p.Reconciles < owners {
			b.Fatalf("a resync reconciled %d owners, want %d", p.Reconciles, owners)
		}
	}
	for _, obj := range []client.Object{&corev1.ConfigMap{}, &testapi.Widget{}, &eventsv1.Event{}} {
		if err := env.Client.DeleteAllOf(ctx, obj, client.InNamespace(ns)); err != nil {
			b.Fatalf("delete the %T objects of namespace %s: %v", obj, ns, err)
		}
	}
	return run
}

// rusageCPU returns this process's CPU time (user and system).
func rusageCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// resyncHelper is the child of BenchmarkResync (engine "kdag-resync"): it starts a kdag manager
// on a namespace of settled owners, waits until every owner was reconciled (pass start), then
// reconciles every owner again itself (pass warm). report prints both passes as JSON. counts
// counts the child's requests from its start.
func resyncHelper(ctx context.Context, rc *rest.Config, cfg scaleHelperConfig, counts *scaleCounts) (stopped <-chan error, report func() error, err error) {
	snapshot := func() scaleCounts {
		return scaleCounts{
			Reads: atomic.LoadInt64(&counts.Reads), Writes: atomic.LoadInt64(&counts.Writes), Events: atomic.LoadInt64(&counts.Events),
		}
	}
	var res resyncResult
	start, cpu := time.Now(), rusageCPU()
	mgr, c, err := newScaleManager(rc, cfg)
	if err != nil {
		return nil, nil, err
	}
	if stopped, err = startManager(ctx, mgr); err != nil {
		return nil, nil, err
	}
	res.Start.SyncWall, res.Start.SyncCPU = time.Since(start), rusageCPU()-cpu
	if res.Start.Reconciles, err = waitReconciled(ctx, "scale", cfg.Owners); err != nil {
		return nil, nil, err
	}
	res.Start.Wall, res.Start.CPU, res.Start.Counts = time.Since(start), rusageCPU()-cpu, snapshot()

	var list testapi.WidgetList
	if err := mgr.GetClient().List(ctx, &list, client.InNamespace(cfg.Namespace)); err != nil {
		return nil, nil, err
	}
	o := controller.DefaultOptions("scale")
	before := snapshot()
	start, cpu = time.Now(), rusageCPU()
	var next atomic.Int64
	var wg sync.WaitGroup
	var firstErr error
	var errOnce sync.Once
	for range o.MaxConcurrentReconciles {
		wg.Go(func() {
			for i := next.Add(1) - 1; i < int64(len(list.Items)); i = next.Add(1) - 1 {
				req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: cfg.Namespace, Name: list.Items[i].Name}}
				if _, err := c.Reconcile(ctx, req); err != nil {
					errOnce.Do(func() { firstErr = err })
				}
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		return nil, nil, firstErr
	}
	after := snapshot()
	res.Warm = resyncPass{
		Wall: time.Since(start), CPU: rusageCPU() - cpu, Reconciles: len(list.Items),
		Counts: scaleCounts{Reads: after.Reads - before.Reads, Writes: after.Writes - before.Writes, Events: after.Events - before.Events},
	}
	report = func() error {
		out, err := json.Marshal(res)
		if err != nil {
			return err
		}
		fmt.Println(string(out))
		return nil
	}
	return stopped, report, nil
}

// waitReconciled polls controller-runtime's metrics until the named controller has finished n
// reconciles and its queue is empty with no worker busy, and returns how many it counted.
func waitReconciled(ctx context.Context, controller string, n int) (int, error) {
	deadline := time.Now().Add(scaleReadyTimeout)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		families, err := ctrlmetrics.Registry.Gather()
		if err != nil {
			return 0, err
		}
		total, depth, active := 0.0, 0.0, 0.0
		for _, mf := range families {
			for _, m := range mf.GetMetric() {
				match := false
				for _, l := range m.GetLabel() {
					if (l.GetName() == "controller" || l.GetName() == "name") && l.GetValue() == controller {
						match = true
					}
				}
				if !match {
					continue
				}
				switch mf.GetName() {
				case "controller_runtime_reconcile_total":
					total += m.GetCounter().GetValue()
				case "workqueue_depth":
					depth += m.GetGauge().GetValue()
				case "controller_runtime_active_workers":
					active += m.GetGauge().GetValue()
				}
			}
		}
		if int(total) >= n && depth == 0 && active == 0 {
			return int(total), nil
		}
		time.Sleep(5 * time.Millisecond)
	}
	return 0, fmt.Errorf("controller %s did not reconcile %d owners within %s", controller, n, scaleReadyTimeout)
}
