package controller_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"runtime/metrics"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/controller"
	"github.com/kdag-dev/kdag/pkg/resources"
	"github.com/kdag-dev/kdag/pkg/revision"
	"github.com/kdag-dev/kdag/pkg/testing/requests"
	"github.com/kdag-dev/kdag/pkg/testing/testapi"
)

// BenchmarkScale runs in two processes: this one (the API server's client that creates the
// owners and watches them become Ready) and a child, the same test binary started again with
// scaleHelperEnv set, which TestMain hands to runScaleHelper instead of running tests. The child
// is either a kdag manager or the raw writer; running it alone in its process makes its peak RSS
// (VmHWM) and CPU time its own.
const (
	scaleHelperEnv = "KDAG_BENCH_SCALE_HELPER" // path of the child's scaleHelperConfig (JSON)
	// scaleProfileEnv, when set in the benchmark's environment, makes each child write a CPU
	// profile of itself to "<value>.<engine>" (go tool pprof <test binary> <file>).
	scaleProfileEnv = "KDAG_BENCH_SCALE_CPUPROFILE"
	// scaleHeapProfileEnv, when set, makes each child profile its heap (a sample every 4 KiB,
	// which slows it: not for timings) and write "<value>.<engine>", the heap profile 3 s after
	// every owner is Ready (the settled heap); "<value>.<engine>.live", the highest live heap
	// after a collection (MiB, runtime/metrics); and "<value>.<engine>.live.pprof", the heap
	// profile at that peak. docs/benchmarks.md section 3 reads them.
	scaleHeapProfileEnv = "KDAG_BENCH_SCALE_HEAPPROFILE"
	scaleChildren       = 10
	scaleCreators       = 16 // goroutines that create the owners
	scaleReadyTimeout   = 15 * time.Minute
)

// scaleOwnersEnv, when set to a positive number, replaces the 1000 owners of BenchmarkScale,
// BenchmarkScaleReplicas and BenchmarkResync (a many-core machine runs 5000: docs/benchmarks.md).
const scaleOwnersEnv = "KDAG_BENCH_SCALE_OWNERS"

// scaleOwners is how many owners the scale benchmarks create: 1000, or scaleOwnersEnv.
var scaleOwners = func() int {
	if n, err := strconv.Atoi(os.Getenv(scaleOwnersEnv)); err == nil && n > 0 {
		return n
	}
	return 1000
}()

// scaleRawWorkers returns how many owners the raw writer writes at once: as many as the requests
// a kdag manager with default options has in flight, MaxConcurrentReconciles × min(MaxParallelNodes,
// children), each worker making one request at a time.
func scaleRawWorkers() int {
	o := controller.DefaultOptions("scale")
	return o.MaxConcurrentReconciles * min(o.MaxParallelNodes, scaleChildren)
}

// shardCache and shardControllerOptions, set by shard_test.go from package shard, make the
// managers of BenchmarkScaleReplicas static shards as kdag's --shard does: the cache narrowed to
// shard, and the reconciler options of its manager.
var (
	shardCache             func(opts cache.Options, shard string) (cache.Options, error)
	shardControllerOptions func(mgr ctrl.Manager, shard string) controller.Options
)

// scaleHelperConfig tells the child what to run and how to reach the API server.
type scaleHelperConfig struct {
	Engine    string // "kdag", "rawssa" or "rawssa-watch"
	Host      string
	CAData    []byte
	CertData  []byte
	KeyData   []byte
	Namespace string
	Children  int
	// Owners is how many settled owners engine "kdag-resync" expects to reconcile.
	Owners int
	// Shard is the static shard of engine "kdag"'s manager (as --shard: package shard's cache
	// selection and reconciler options); "" for none.
	Shard string
}

// scaleCounts are the child's API requests, counted like fixture.calls (watches excluded) from
// the start of the measurement.
type scaleCounts struct {
	Reads, Writes, Events int64
}

// BenchmarkScale measures one manager with default settings against many owners: 1000 owners
// with 10 ConfigMaps each are created at once (16 concurrent creates) in a new namespace, and the
// clock runs from the first create until every owner's status says Ready for its generation, as
// seen by an informer in this process.
//
// engine=kdag is a kdag manager as a reference operator would run it: controller.Setup with no
// option (MaxConcurrentReconciles owners at a time, up to MaxParallelNodes nodes each), the client config of ctrl.GetConfig
// (QPS -1: no client-side rate limit, the API server's priority and fairness decides), and a
// cache of the namespace with CacheOptions for the children. engine=rawssa is the floor: a
// process that learns of owners from an informer and, with scaleRawWorkers workers, server-side
// applies the same 10 ConfigMaps (labels and owner reference included) and a Ready status per
// owner, with no read, no hash, no event, at the same client QPS setting and in-flight limit.
// engine=rawssa-watch is the floor for everything kdag asks of the API server, not only its
// writes: rawssa plus a watch of the children and of the owners' revisions, a hash annotation on
// each child, a status of kdag's shape written beside a revision of kdag's shape, and kdag's two
// events per owner (see startRawWriter).
//
// Each reports, as the mean of its runs (one per iteration, so -benchtime 1x runs it once):
// seconds-to-ready, peak-RSS-MiB (VmHWM of the child; the maximum), cpu-s (the child's CPU
// time), server-cpu-s (envtest's kube-apiserver and etcd over the measured time) and
// requests/owner (the child's API requests per owner, watches excluded; writes/owner,
// reads/owner and events/owner break it down). engine=kdag also runs, before each of its own
// runs, an untimed run of each floor, and reports x-rawssa and x-rawssa-watch: its mean time
// over theirs. Pairing the runs
// keeps a drift of the API server over the benchmark (etcd's history grows until the next
// compaction) out of the ratio. Targets: x-rawssa ≤ 1.5 and peak-RSS-MiB ≤ 150. It takes minutes, needs /proc, and
// is skipped with -short.
func BenchmarkScale(b *testing.B) {
	quietLogs()
	if testing.Short() {
		b.Skip("skipped with -short: it takes minutes")
	}
	if _, err := os.Stat("/proc/self/status"); err != nil {
		b.Skip("needs /proc to read the manager's peak RSS")
	}
	shape := fmt.Sprintf("owners=%d/children=%d", scaleOwners, scaleChildren)
	for _, engine := range []string{"rawssa", "rawssa-watch", "kdag"} {
		b.Run(shape+"/engine="+engine, func(b *testing.B) {
			var runs []scaleRun
			// engine=kdag: the untimed runs of both floors before each of its own
			var raw, rawWatch []time.Duration
			for b.Loop() {
				if engine == "kdag" {
					raw = append(raw, runScale(b, "rawssa", scaleOwners, scaleChildren, false).elapsed)
					rawWatch = append(rawWatch, runScale(b, "rawssa-watch", scaleOwners, scaleChildren, false).elapsed)
				}
				runs = append(runs, runScale(b, engine, scaleOwners, scaleChildren, true))
			}
			reportScale(b, runs, scaleOwners)
			if engine == "kdag" {
				times := make([]time.Duration, len(runs))
				for i, r := range runs {
					times[i] = r.elapsed
				}
				b.ReportMetric(float64(meanDuration(times))/float64(meanDuration(raw)), "x-rawssa")
				b.ReportMetric(float64(meanDuration(times))/float64(meanDuration(rawWatch)), "x-rawssa-watch")
			}
		})
	}
}

// BenchmarkScaleReplicas is BenchmarkScale's kdag engine with the owners spread over replicas
// (issue 17): replicas=1 is one unsharded manager, replicas=3 three managers, each a static shard
// (package shard's static shard, as --shard; a process of its own) of a third of the owners, labelled at creation. The two run
// alternately, once per iteration each, so that the API server's drift hits both alike; besides
// BenchmarkScale's metrics (cpu-s: the replicas' sum, peak-RSS-MiB: the highest) it reports each
// replica's CPU and peak RSS (replica-N-cpu-s, replica-N-peak-RSS-MiB), the replicas=1 runs' time
// and peak RSS (replicas=1-seconds-to-ready, replicas=1-peak-RSS-MiB) and x-replicas=1, the time
// over the replicas=1 runs'. Owners are pre-labelled, so the assignment of dynamic shards
// (--shards=auto: one more patch per owner) is not in it. Skipped with -short; needs /proc.
func BenchmarkScaleReplicas(b *testing.B) {
	quietLogs()
	if testing.Short() {
		b.Skip("skipped with -short: it takes minutes")
	}
	if _, err := os.Stat("/proc/self/status"); err != nil {
		b.Skip("needs /proc to read the managers' peak RSS")
	}
	shape := fmt.Sprintf("owners=%d/children=%d", scaleOwners, scaleChildren)
	b.Run(shape+"/replicas=3", func(b *testing.B) {
		var runs []scaleRun
		var one []time.Duration
		var oneRSS int64
		for b.Loop() {
			r := runScale(b, "kdag", scaleOwners, scaleChildren, false)
			one, oneRSS = append(one, r.elapsed), max(oneRSS, r.rss)
			runs = append(runs, runScaleShards(b, "kdag", []string{"s0", "s1", "s2"}, scaleOwners, scaleChildren, true))
		}
		reportScale(b, runs, scaleOwners)
		times := make([]time.Duration, len(runs))
		for i, r := range runs {
			times[i] = r.elapsed
		}
		b.ReportMetric(meanDuration(one).Seconds(), "replicas=1-seconds-to-ready")
		b.ReportMetric(float64(oneRSS)/(1<<20), "replicas=1-peak-RSS-MiB")
		b.ReportMetric(float64(meanDuration(times))/float64(meanDuration(one)), "x-replicas=1")
		for i := range runs[0].perReplica {
			var cpu []time.Duration
			var rss int64
			for _, r := range runs {
				cpu, rss = append(cpu, r.perReplica[i].cpu), max(rss, r.perReplica[i].rss)
			}
			b.ReportMetric(meanDuration(cpu).Seconds(), fmt.Sprintf("replica-%d-cpu-s", i))
			b.ReportMetric(float64(rss)/(1<<20), fmt.Sprintf("replica-%d-peak-RSS-MiB", i))
		}
	})
}

// scaleRun is what one run of BenchmarkScale measured.
type scaleRun struct {
	elapsed, cpu, serverCPU time.Duration
	rss                     int64 // bytes
	counts                  scaleCounts
	perReplica              []scaleRun // with several children: each one's rss and cpu
}

// reportScale reports the mean of runs (the peak RSS: their maximum).
func reportScale(b *testing.B, runs []scaleRun, owners int) {
	var elapsed, cpu, serverCPU []time.Duration
	var rss int64
	var counts scaleCounts
	for _, r := range runs {
		elapsed, cpu, serverCPU = append(elapsed, r.elapsed), append(cpu, r.cpu), append(serverCPU, r.serverCPU)
		rss = max(rss, r.rss)
		counts.Reads += r.counts.Reads
		counts.Writes += r.counts.Writes
		counts.Events += r.counts.Events
	}
	b.ReportMetric(meanDuration(elapsed).Seconds(), "seconds-to-ready")
	b.ReportMetric(float64(rss)/(1<<20), "peak-RSS-MiB")
	b.ReportMetric(meanDuration(cpu).Seconds(), "cpu-s")
	b.ReportMetric(meanDuration(serverCPU).Seconds(), "server-cpu-s")
	per := func(n int64) float64 { return float64(n) / float64(owners*len(runs)) }
	b.ReportMetric(per(counts.Reads+counts.Writes+counts.Events), "requests/owner")
	b.ReportMetric(per(counts.Writes), "writes/owner")
	b.ReportMetric(per(counts.Reads), "reads/owner")
	b.ReportMetric(per(counts.Events), "events/owner")
}

func meanDuration(ds []time.Duration) time.Duration {
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	return sum / time.Duration(len(ds))
}

// runScale runs one measurement with a new child process and namespace; the benchmark's timer
// runs from the first create until every owner is Ready.
func runScale(b *testing.B, engine string, owners, children int, timed bool) scaleRun {
	return runScaleShards(b, engine, []string{""}, owners, children, timed)
}

// runScaleShards is runScale with one child per shard of shards, each a manager of that static
// shard ("": unsharded), the owners labelled kdag.dev/shard round-robin over shards when there is
// more than one. The run's RSS is the children's highest, its CPU their sum; perReplica holds
// each child's.
func runScaleShards(b *testing.B, engine string, shards []string, owners, children int, timed bool) scaleRun {
	b.StopTimer()
	ns := env.Namespace(b)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	replicas := make([]*scaleProcess, len(shards))
	for i, shard := range shards {
		replicas[i] = startScaleHelper(b, scaleHelperConfig{
			Engine: engine, Host: env.Config.Host, CAData: env.Config.CAData, CertData: env.Config.CertData,
			KeyData: env.Config.KeyData, Namespace: ns, Children: children, Shard: shard,
		})
	}
	ready := newReadyCounter(ctx, b, ns)

	for _, r := range replicas {
		r.send("start")
	}
	serverCPU := controlPlaneCPUTime(b)
	if timed {
		b.StartTimer()
	}
	start := time.Now()
	if len(shards) > 1 {
		createOwners(b, ns, owners, shards...)
	} else {
		createOwners(b, ns, owners)
	}
	ready.wait(b, owners, scaleReadyTimeout)
	elapsed := time.Since(start)
	b.StopTimer()
	serverCPU = controlPlaneCPUTime(b) - serverCPU

	run := scaleRun{elapsed: elapsed, serverCPU: serverCPU}
	for _, r := range replicas {
		one := scaleRun{rss: r.peakRSS(b), cpu: r.cpuTime(b)}
		run.rss, run.cpu = max(run.rss, one.rss), run.cpu+one.cpu
		counts := r.stop(b)
		run.counts.Reads += counts.Reads
		run.counts.Writes += counts.Writes
		run.counts.Events += counts.Events
		run.perReplica = append(run.perReplica, one)
	}
	// Leave the API server as this run found it, so that later runs (the other engine's among
	// them) do not pay for this one's objects: envtest has no namespace controller to do it.
	for _, obj := range []client.Object{&corev1.ConfigMap{}, &testapi.Widget{}, &eventsv1.Event{}, &appsv1.ControllerRevision{}} {
		if err := deleteAllOf(ctx, obj, ns); err != nil {
			b.Fatalf("delete the %T objects of namespace %s: %v", obj, ns, err)
		}
	}
	b.StartTimer()
	return run
}

// deleteAllOf deletes every object of obj's type in ns. A deletion of 50,000 objects (5,000
// owners) outlasts the API server's request timeout on 2 cores, which answers that it "may
// still be processing the request": it is asked again, until it answers within its time or
// scaleReadyTimeout has passed.
func deleteAllOf(ctx context.Context, obj client.Object, ns string) error {
	deadline := time.Now().Add(scaleReadyTimeout)
	for {
		err := env.Client.DeleteAllOf(ctx, obj, client.InNamespace(ns))
		timedOut := apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err)
		if !timedOut || time.Now().After(deadline) {
			return err
		}
	}
}

// createOwners creates n Widgets named o0…o<n-1> in ns with scaleCreators goroutines; with
// shards, owner i is labelled kdag.dev/shard=shards[i mod len(shards)].
func createOwners(b *testing.B, ns string, n int, shards ...string) {
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, scaleCreators)
	for range scaleCreators {
		wg.Go(func() {
			for i := next.Add(1) - 1; i < int64(n); i = next.Add(1) - 1 {
				w := &testapi.Widget{
					ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "o" + strconv.FormatInt(i, 10)},
					Spec:       testapi.WidgetSpec{MaxReplicas: 1},
				}
				if len(shards) > 0 {
					w.Labels = map[string]string{kdagv1alpha1.LabelShard: shards[i%int64(len(shards))]}
				}
				if err := env.Client.Create(context.Background(), w); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatalf("create owners: %v", err)
	}
}

// readyCounter counts the Ready owners of a namespace from an informer in this process.
type readyCounter struct {
	cache cache.Cache
	ns    string
}

func newReadyCounter(ctx context.Context, b *testing.B, ns string) *readyCounter {
	b.Helper()
	c, err := cache.New(env.Config, cache.Options{Scheme: scheme, DefaultNamespaces: map[string]cache.Config{ns: {}}})
	if err != nil {
		b.Fatalf("new cache: %v", err)
	}
	if _, err := c.GetInformer(ctx, &testapi.Widget{}); err != nil {
		b.Fatalf("Widget informer: %v", err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = c.Start(ctx)
	}()
	b.Cleanup(func() { <-done }) // ctx, canceled by runScale, stops it
	if !c.WaitForCacheSync(ctx) {
		b.Fatal("Widget cache did not sync")
	}
	return &readyCounter{cache: c, ns: ns}
}

// wait polls the cache every 100 ms until n owners are Ready for their generation.
func (r *readyCounter) wait(b *testing.B, n int, timeout time.Duration) {
	b.Helper()
	deadline := time.Now().Add(timeout)
	ready := 0
	for time.Now().Before(deadline) {
		var list testapi.WidgetList
		if err := r.cache.List(context.Background(), &list, client.InNamespace(r.ns), client.UnsafeDisableDeepCopy); err != nil {
			b.Fatalf("list Widgets: %v", err)
		}
		ready = 0
		for i := range list.Items {
			w := &list.Items[i]
			c := meta.FindStatusCondition(w.Status.Conditions, kdagv1alpha1.ConditionReady)
			if w.Status.ObservedGeneration == w.Generation && c != nil && c.Status == metav1.ConditionTrue {
				ready++
			}
		}
		if ready == n {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	b.Fatalf("%d of %d owners Ready after %s", ready, n, timeout)
}

// scaleProcess is a running helper process.
type scaleProcess struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout *bufio.Reader
	stderr *bytes.Buffer
}

// startScaleHelper starts the test binary as a helper with cfg and waits until it is ready
// (caches synced). The child is killed at cleanup if it is still running.
func startScaleHelper(b *testing.B, cfg scaleHelperConfig) *scaleProcess {
	b.Helper()
	path := filepath.Join(b.TempDir(), "helper.json")
	data, err := json.Marshal(cfg)
	if err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), scaleHelperEnv+"="+path)
	c := &scaleProcess{cmd: cmd, stderr: &bytes.Buffer{}}
	cmd.Stderr = c.stderr
	if c.stdin, err = cmd.StdinPipe(); err != nil {
		b.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	c.stdout = bufio.NewReader(out)
	if err := cmd.Start(); err != nil {
		b.Fatalf("start helper: %v", err)
	}
	b.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	if line := c.line(b); line != "ready" {
		b.Fatalf("helper said %q, want ready; stderr:\n%s", line, c.stderr)
	}
	return c
}

func (c *scaleProcess) line(b *testing.B) string {
	b.Helper()
	s, err := c.stdout.ReadString('\n')
	if err != nil {
		b.Fatalf("read from helper: %v; stderr:\n%s", err, c.stderr)
	}
	return strings.TrimSpace(s)
}

func (c *scaleProcess) send(line string) {
	_, _ = io.WriteString(c.stdin, line+"\n")
}

// peakRSS returns the child's peak resident set size (VmHWM) in bytes.
func (c *scaleProcess) peakRSS(b *testing.B) int64 {
	b.Helper()
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", c.cmd.Process.Pid))
	if err != nil {
		b.Fatalf("read helper status: %v", err)
	}
	for _, l := range strings.Split(string(status), "\n") {
		if rest, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				b.Fatalf("VmHWM %q: %v", rest, err)
			}
			return kb << 10
		}
	}
	b.Fatal("no VmHWM in the helper's /proc status")
	return 0
}

// cpuTime returns the CPU time (user and system) the child has used.
func (c *scaleProcess) cpuTime(b *testing.B) time.Duration {
	b.Helper()
	st, err := readProcStat(c.cmd.Process.Pid)
	if err != nil {
		b.Fatalf("read helper stat: %v", err)
	}
	return st.cpu
}

// controlPlaneCPUTime returns the CPU time used so far by this process's kube-apiserver and
// etcd children (envtest's control plane).
func controlPlaneCPUTime(b *testing.B) time.Duration {
	b.Helper()
	dirs, err := filepath.Glob("/proc/[0-9]*")
	if err != nil {
		b.Fatal(err)
	}
	var total time.Duration
	for _, d := range dirs {
		pid, err := strconv.Atoi(filepath.Base(d))
		if err != nil {
			continue
		}
		st, err := readProcStat(pid)
		if err != nil || st.ppid != os.Getpid() || (st.comm != "kube-apiserver" && st.comm != "etcd") {
			continue // gone, or not ours
		}
		total += st.cpu
	}
	return total
}

type procStat struct {
	comm string
	ppid int
	cpu  time.Duration // user and system
}

// readProcStat reads /proc/<pid>/stat: the command name (in parentheses), then the fields
// after it, of which ppid is the 2nd and utime and stime, in clock ticks (100 per second on
// Linux), the 12th and 13th.
func readProcStat(pid int) (procStat, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procStat{}, err
	}
	s := string(data)
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || end < open {
		return procStat{}, fmt.Errorf("stat %q: no command name", s)
	}
	fields := strings.Fields(s[end+1:])
	if len(fields) < 13 {
		return procStat{}, fmt.Errorf("stat %q: too few fields", s)
	}
	st := procStat{comm: s[open+1 : end]}
	if st.ppid, err = strconv.Atoi(fields[1]); err != nil {
		return procStat{}, fmt.Errorf("stat %q: %w", s, err)
	}
	for _, f := range fields[11:13] {
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return procStat{}, fmt.Errorf("stat %q: %w", s, err)
		}
		st.cpu += time.Duration(n) * 10 * time.Millisecond
	}
	return st, nil
}

// stop closes the child's stdin, which stops it, and returns the requests it counted.
func (c *scaleProcess) stop(b *testing.B) scaleCounts {
	b.Helper()
	_ = c.stdin.Close()
	var counts scaleCounts
	if err := json.Unmarshal([]byte(c.line(b)), &counts); err != nil {
		b.Fatalf("helper counts: %v; stderr:\n%s", err, c.stderr)
	}
	if err := c.cmd.Wait(); err != nil {
		b.Fatalf("helper: %v; stderr:\n%s", err, c.stderr)
	}
	return counts
}

// scaleRM is the kdag side of BenchmarkScale: n independent ConfigMaps per owner.
type scaleRM struct{ children int }

func (scaleRM) OwnedTypes() []client.Object { return []client.Object{&corev1.ConfigMap{}} }

func (rm scaleRM) AddResources(_ context.Context, owner *testapi.Widget, b *controller.Graph) error {
	for i := range rm.children {
		b.Add(scaleChildObject(owner, i))
	}
	return nil
}

// scaleChildObject is the i-th ConfigMap of an owner in BenchmarkScale.
func scaleChildObject(owner client.Object, i int) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: owner.GetName() + "-" + strconv.Itoa(i)},
		Data:       map[string]string{"index": strconv.Itoa(i), "payload": testapi.ConvergePayload},
	}
}

// countingTransport counts a helper's API requests once counting is on.
type countingTransport struct {
	next   http.RoundTripper
	on     *atomic.Bool
	counts *scaleCounts
}

func (t countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if t.on.Load() && req.URL.Query().Get("watch") != "true" {
		switch {
		case (requests.Request{Path: req.URL.Path}).Event():
			atomic.AddInt64(&t.counts.Events, 1)
		case req.Method == http.MethodGet:
			atomic.AddInt64(&t.counts.Reads, 1)
		default:
			atomic.AddInt64(&t.counts.Writes, 1)
		}
	}
	return t.next.RoundTrip(req)
}

// runScaleHelper is the child process of BenchmarkScale (TestMain calls it when scaleHelperEnv
// is set). It starts the engine, prints "ready" once its caches are synced, resets its request
// counts on the line "start", and on the end of its stdin stops and prints its counts as JSON.
// It returns the process's exit code.
func runScaleHelper() int {
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, "scale helper:", err)
		return 1
	}
	data, err := os.ReadFile(os.Getenv(scaleHelperEnv))
	if err != nil {
		return fail(err)
	}
	var cfg scaleHelperConfig
	if err := json.Unmarshal(data, &cfg); err != nil {
		return fail(err)
	}
	ctrl.SetLogger(logr.Discard())
	if path := os.Getenv(scaleHeapProfileEnv); path != "" {
		goruntime.MemProfileRate = 4096 // a sample every 4 KiB rather than 512 KiB: a profile of small objects
		stop := watchLiveHeap(path + "." + cfg.Engine + ".live")
		defer stop()
	}
	if path := os.Getenv(scaleProfileEnv); path != "" {
		f, err := os.Create(path + "." + cfg.Engine)
		if err != nil {
			return fail(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			return fail(err)
		}
		defer func() { pprof.StopCPUProfile(); _ = f.Close() }()
	}
	var on atomic.Bool
	var counts scaleCounts
	rc := &rest.Config{
		Host:            cfg.Host,
		TLSClientConfig: rest.TLSClientConfig{CAData: cfg.CAData, CertData: cfg.CertData, KeyData: cfg.KeyData},
		QPS:             -1, // as ctrl.GetConfig returns it: no client-side rate limit
	}
	rc.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return countingTransport{next: rt, on: &on, counts: &counts}
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stopped <-chan error
	var report func() error // what the engine prints after "ready"
	switch cfg.Engine {
	case "kdag-resync":
		on.Store(true)
		stopped, report, err = resyncHelper(ctx, rc, cfg, &counts)
	case "kdag":
		stopped, err = startScaleManager(ctx, rc, cfg)
	case "rawssa":
		stopped, err = startRawWriter(ctx, rc, cfg, false)
	case "rawssa-watch":
		stopped, err = startRawWriter(ctx, rc, cfg, true)
	default:
		err = fmt.Errorf("unknown engine %q", cfg.Engine)
	}
	if err != nil {
		return fail(err)
	}
	fmt.Println("ready")
	if report != nil {
		if err := report(); err != nil {
			return fail(err)
		}
	}
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		if in.Text() == "start" {
			atomic.StoreInt64(&counts.Reads, 0)
			atomic.StoreInt64(&counts.Writes, 0)
			atomic.StoreInt64(&counts.Events, 0)
			on.Store(true)
		}
	}
	on.Store(false)
	if path := os.Getenv(scaleHeapProfileEnv); path != "" {
		time.Sleep(3 * time.Second) // the reconciles the last events started end: a settled heap
		if err := writeHeapProfile(path + "." + cfg.Engine); err != nil {
			return fail(err)
		}
	}
	cancel()
	if err := <-stopped; err != nil {
		return fail(err)
	}
	out, err := json.Marshal(scaleCounts{
		Reads: atomic.LoadInt64(&counts.Reads), Writes: atomic.LoadInt64(&counts.Writes), Events: atomic.LoadInt64(&counts.Events),
	})
	if err != nil {
		return fail(err)
	}
	fmt.Println(string(out))
	return 0
}

// watchLiveHeap samples the live heap after each garbage collection (runtime/metrics
// /gc/heap/live:bytes) every 20 ms until the returned function is called, which writes the
// highest sample, in MiB, to path. At each new highest sample (by 1 MiB or more) it writes the
// heap profile, as of that collection, to path + ".pprof": the profile of the peak.
func watchLiveHeap(path string) func() {
	done, finished := make(chan struct{}), make(chan struct{})
	var highest uint64
	go func() {
		defer close(finished)
		sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			metrics.Read(sample)
			if live := sample[0].Value.Uint64(); live >= highest+1<<20 {
				highest = live
				if f, err := os.Create(path + ".pprof"); err == nil {
					_ = pprof.WriteHeapProfile(f)
					_ = f.Close()
				}
			}
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	return func() {
		close(done)
		<-finished
		_ = os.WriteFile(path, []byte(fmt.Sprintf("%.1f\n", float64(highest)/(1<<20))), 0o644)
	}
}

// writeHeapProfile writes the heap profile of the process (after a garbage collection, so that
// its in-use figures are the live heap) to path.
func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	goruntime.GC()
	if err := pprof.WriteHeapProfile(f); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// startScaleManager starts a manager with one kdag reconciler with default options and waits
// for its caches. The returned channel yields the manager's error once ctx ends.
func startScaleManager(ctx context.Context, rc *rest.Config, cfg scaleHelperConfig) (<-chan error, error) {
	mgr, _, err := newScaleManager(rc, cfg)
	if err != nil {
		return nil, err
	}
	return startManager(ctx, mgr)
}

// newScaleManager returns a manager with one kdag reconciler with default options, not started.
func newScaleManager(rc *rest.Config, cfg scaleHelperConfig) (ctrl.Manager, reconcile.Reconciler, error) {
	cacheOpts, err := shardCache(controller.CacheOptions(scheme, controller.For("scale", scaleRM{})), cfg.Shard)
	if err != nil {
		return nil, nil, err
	}
	cacheOpts.DefaultNamespaces = map[string]cache.Config{cfg.Namespace: {}}
	mgr, err := ctrl.NewManager(rc, ctrl.Options{
		Scheme:         scheme,
		Metrics:        metricsserver.Options{BindAddress: "0"},
		MapperProvider: controller.MapperProvider,
		Cache:          cacheOpts,
	})
	if err != nil {
		return nil, nil, err
	}
	c, err := controller.Register(mgr, "scale", scaleRM{children: cfg.Children}, shardControllerOptions(mgr, cfg.Shard))
	if err != nil {
		return nil, nil, err
	}
	return mgr, c, nil
}

// startManager starts mgr and waits for the caches of Widgets and ConfigMaps. The returned
// channel yields the manager's error once ctx ends.
func startManager(ctx context.Context, mgr ctrl.Manager) (<-chan error, error) {
	for _, obj := range []client.Object{&testapi.Widget{}, &corev1.ConfigMap{}} {
		if _, err := mgr.GetCache().GetInformer(ctx, obj); err != nil {
			return nil, err
		}
	}
	stopped := make(chan error, 1)
	go func() { stopped <- mgr.Start(ctx) }()
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		return nil, fmt.Errorf("manager cache did not sync")
	}
	return stopped, nil
}

// startRawWriter starts the raw writer: an informer on the owners feeding scaleRawWorkers
// workers, each of which applies an owner's children one at a time and then its Ready status.
// With watch (engine rawssa-watch) it also asks of the API server everything else a kdag manager
// does for an owner: a watch of the children and of the revisions (informers on the ConfigMaps
// and ControllerRevisions carrying its controller label, as CacheOptions selects them), a
// desired-hash annotation on each child, a status of kdag's shape (graph summary, lastReconcile)
// sent beside a ControllerRevision of kdag's shape (as the reconciler's startRevision sends it),
// and kdag's two events (Created, Ready).
// The returned channel yields the first write error (or nil) once ctx ends and the workers
// stopped.
func startRawWriter(ctx context.Context, rc *rest.Config, cfg scaleHelperConfig, watch bool) (<-chan error, error) {
	cl, err := client.New(rc, client.Options{Scheme: scheme})
	if err != nil {
		return nil, err
	}
	opts := cache.Options{Scheme: scheme, DefaultNamespaces: map[string]cache.Config{cfg.Namespace: {}}}
	if watch {
		ours := labels.SelectorFromSet(labels.Set{kdagv1alpha1.LabelController: "rawssa"})
		opts.ByObject = map[client.Object]cache.ByObject{
			&corev1.ConfigMap{}:          {Label: ours},
			&appsv1.ControllerRevision{}: {Label: ours},
		}
	}
	c, err := cache.New(rc, opts)
	if err != nil {
		return nil, err
	}
	inf, err := c.GetInformer(ctx, &testapi.Widget{})
	if err != nil {
		return nil, err
	}
	if watch {
		for _, obj := range []client.Object{&corev1.ConfigMap{}, &appsv1.ControllerRevision{}} {
			if _, err := c.GetInformer(ctx, obj); err != nil {
				return nil, err
			}
		}
	}
	queue := make(chan *testapi.Widget, 1<<16)
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{AddFunc: func(obj any) {
		if w, ok := obj.(*testapi.Widget); ok {
			queue <- w
		}
	}}); err != nil {
		return nil, err
	}
	cacheDone := make(chan struct{})
	go func() {
		defer close(cacheDone)
		_ = c.Start(ctx)
	}()
	if !c.WaitForCacheSync(ctx) {
		return nil, fmt.Errorf("raw writer cache did not sync")
	}
	var wg sync.WaitGroup
	var firstErr error
	var errOnce sync.Once
	for range scaleRawWorkers() {
		wg.Go(func() {
			for {
				select {
				case <-ctx.Done():
					return
				case w := <-queue:
					if err := rawWrite(ctx, cl, w, cfg.Children, watch); err != nil && ctx.Err() == nil {
						errOnce.Do(func() { firstErr = err })
					}
				}
			}
		})
	}
	stopped := make(chan error, 1)
	go func() {
		wg.Wait()
		<-cacheDone
		stopped <- firstErr
	}()
	return stopped, nil
}

// rawWrite server-side applies an owner's children (kdag's labels and owner reference) and then
// a Ready status. With full (engine rawssa-watch) each child also carries a desired-hash
// annotation, the status has kdag's shape and is sent beside the owner's first revision, and two
// events are written as kdag's would be.
func rawWrite(ctx context.Context, cl client.Client, w *testapi.Widget, children int, full bool) error {
	start := time.Now()
	owner := []any{map[string]any{
		"apiVersion": testapi.GroupVersion.String(), "kind": "Widget", "name": w.Name, "uid": string(w.UID),
		"controller": true, "blockOwnerDeletion": true,
	}}
	names := make([]string, 0, children)
	for i := range children {
		cm := scaleChildObject(w, i)
		names = append(names, "ConfigMap "+w.Namespace+"/"+cm.Name)
		metadata := map[string]any{
			"namespace": w.Namespace, "name": cm.Name, "ownerReferences": owner,
			"labels": map[string]any{kdagv1alpha1.LabelManagedBy: "rawssa", kdagv1alpha1.LabelController: "rawssa", kdagv1alpha1.LabelOwnerUID: string(w.UID)},
		}
		if full {
			metadata["annotations"] = map[string]any{kdagv1alpha1.AnnotationDesiredHash: strings.Repeat("0", resources.HashLength)}
		}
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata,
			"data": map[string]any{"index": cm.Data["index"], "payload": cm.Data["payload"]},
		}}
		if err := cl.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner("rawssa"), client.ForceOwnership); err != nil {
			return err
		}
	}
	if !full {
		return rawReadyStatus(ctx, cl, w)
	}
	if err := rawEvent(ctx, cl, w, "Created", "Created "+strings.Join(names, ", ")); err != nil {
		return err
	}
	revErr := make(chan error, 1)
	go func() { revErr <- rawRevision(ctx, cl, w, children) }()
	err := rawFullStatus(ctx, cl, w, children, time.Since(start))
	if rerr := <-revErr; err == nil {
		err = rerr
	}
	if err != nil {
		return err
	}
	return rawEvent(ctx, cl, w, kdagv1alpha1.ReasonReady, "all nodes are ready")
}

// rawRevision creates revision 1 of w as kdag's reconciler records a first deploy: the owner's
// spec and one "created" change per child, with kdag's labels, name and controller owner
// reference.
func rawRevision(ctx context.Context, cl client.Client, w *testapi.Widget, children int) error {
	spec, err := revision.Spec(w)
	if err != nil {
		return err
	}
	nodes := make([]revision.NodeChange, children)
	for i := range nodes {
		nodes[i] = revision.NodeChange{Kind: "ConfigMap", Namespace: w.Namespace, Name: scaleChildObject(w, i).Name, Action: "created"}
	}
	data, err := revision.Encode(&revision.Record{
		Time:       metav1.Now(),
		Owner:      revision.OwnerRef{APIVersion: testapi.GroupVersion.String(), Kind: "Widget", Name: w.Name, UID: string(w.UID)},
		Generation: w.Generation, SpecHash: revision.SpecHash(spec), OperatorVersion: "rawssa",
		Controller: "rawssa", Spec: spec, Nodes: nodes,
	})
	if err != nil {
		return err
	}
	return cl.Create(ctx, &appsv1.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: w.Namespace, Name: revision.Name("Widget", w.Name, 1), Labels: revision.Labels(w, "Widget", "rawssa"),
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: testapi.GroupVersion.String(), Kind: "Widget", Name: w.Name, UID: w.UID, Controller: new(true),
			}},
		},
		Data: data, Revision: 1,
	}, client.FieldOwner("rawssa"))
}

// rawEvent creates an events.k8s.io/v1 Event about w, as kdag's event recorder would.
func rawEvent(ctx context.Context, cl client.Client, w *testapi.Widget, reason, note string) error {
	now := metav1.NowMicro()
	return cl.Create(ctx, &eventsv1.Event{
		ObjectMeta:          metav1.ObjectMeta{Namespace: w.Namespace, Name: fmt.Sprintf("%s.%x", w.Name, now.UnixNano())}, // as client-go names events
		EventTime:           now,
		ReportingController: "rawssa", ReportingInstance: "rawssa-0",
		Action: "Reconcile", Reason: reason, Note: note, Type: corev1.EventTypeNormal,
		Regarding: corev1.ObjectReference{
			APIVersion: testapi.GroupVersion.String(), Kind: "Widget", Namespace: w.Namespace, Name: w.Name, UID: w.UID,
		},
	})
}

// rawFullStatus is rawReadyStatus with the rest of a Ready kdag owner's status: the graph
// summary with its node list, the operator version and the last reconcile with its one-node
// critical path.
func rawFullStatus(ctx context.Context, cl client.Client, w *testapi.Widget, children int, took time.Duration) error {
	nodes := make([]kdagv1alpha1.GraphNode, children)
	for i := range nodes {
		nodes[i] = kdagv1alpha1.GraphNode{Kind: "ConfigMap", Namespace: w.Namespace, Name: scaleChildObject(w, i).Name, State: kdagv1alpha1.NodeReady}
	}
	st := kdagv1alpha1.Status{
		ObservedGeneration: w.Generation,
		Conditions: []metav1.Condition{{
			Type: kdagv1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: kdagv1alpha1.ReasonReady,
			Message: "all nodes are ready", ObservedGeneration: w.Generation, LastTransitionTime: metav1.Now(),
		}},
		OperatorVersion: "rawssa",
		Graph:           &kdagv1alpha1.GraphSummary{Total: int32(children), Ready: int32(children), Nodes: nodes},
		LastReconcile: &kdagv1alpha1.ReconcileSummary{DurationMillis: took.Milliseconds(), CriticalPath: []kdagv1alpha1.PathNode{{
			Kind: "ConfigMap", Namespace: w.Namespace, Name: w.Name + "-0", State: kdagv1alpha1.NodeReady, RunMillis: took.Milliseconds(),
		}}},
	}
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&st)
	if err != nil {
		return err
	}
	status := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": testapi.GroupVersion.String(), "kind": "Widget",
		"metadata": map[string]any{"namespace": w.Namespace, "name": w.Name},
		"status":   content,
	}}
	return cl.Status().Apply(ctx, client.ApplyConfigurationFromUnstructured(status), client.FieldOwner("rawssa"), client.ForceOwnership)
}

// rawReadyStatus is the raw writers' last write for an owner: a server-side apply of its status
// with observedGeneration and a Ready condition, as field manager "rawssa".
func rawReadyStatus(ctx context.Context, cl client.Client, w *testapi.Widget) error {
	status := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": testapi.GroupVersion.String(), "kind": "Widget",
		"metadata": map[string]any{"namespace": w.Namespace, "name": w.Name},
		"status": map[string]any{
			"observedGeneration": w.Generation,
			"conditions": []any{map[string]any{
				"type": kdagv1alpha1.ConditionReady, "status": "True", "reason": kdagv1alpha1.ReasonReady, "message": "written by the raw writer",
				"observedGeneration": w.Generation, "lastTransitionTime": time.Now().UTC().Format(time.RFC3339),
			}},
		},
	}}
	return cl.Status().Apply(ctx, client.ApplyConfigurationFromUnstructured(status), client.FieldOwner("rawssa"), client.ForceOwnership)
}
