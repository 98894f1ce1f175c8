package controllertest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pkg/errors"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/controller"
	"github.com/kdag-dev/kdag/pkg/metrics"
)

// CrashMode is what happens to the manager at a crash point, its N-th write.
type CrashMode int

const (
	// CrashAfterWrite (the default): the write reaches the API server, then the manager dies
	// before it reads the response: no request after it is sent, its context is canceled, and a
	// fresh manager takes over.
	CrashAfterWrite CrashMode = iota
	// CrashBeforeWrite means the manager dies as it sends the write, which never reaches the API
	// server; a fresh manager takes over.
	CrashBeforeWrite
	// ConflictAtWrite means the write is answered 409 Conflict without reaching the API server (as
	// when another writer got there first), and the same manager goes on.
	ConflictAtWrite
)

// point names the crash point n in this mode: "after write 17".
func (m CrashMode) point(n int) string {
	switch m {
	case CrashBeforeWrite:
		return fmt.Sprintf("before write %d", n)
	case ConflictAtWrite:
		return fmt.Sprintf("conflict at write %d", n)
	}
	return fmt.Sprintf("after write %d", n)
}

// Crashes is a crash-point exploration for ExploreCrashes: the components under test, a scenario
// that drives their owners, and which crash points to explore.
type Crashes struct {
	// Components run in every manager the explorer starts. Every manager has its own cache and
	// queue, but the components are the same values: memory a ResourceManager keeps between
	// reconciles survives the "crash"; NewComponents does not let it.
	Components []controller.Component
	// NewComponents, when set, makes the components of each manager instead, as a restarted
	// process would: a ResourceManager's memory (a cache, generated values) starts empty in the
	// fresh manager. Components may then be nil.
	NewComponents func() []controller.Component
	// Shards, when set, are the shards of the managers of every run ("" the unsharded one): one
	// manager each, running ShardComponents(shard), for a scenario that moves owners between
	// shards (a kdag.dev/shard label changed, a kdag.dev/shard-next hand-over). The crash points
	// are the writes of all of them together: the manager that makes the crash point's write
	// dies, a fresh manager of its shard takes over, and the others go on. The settle pass runs a
	// fresh manager per shard.
	Shards []string
	// ShardComponents makes the components of a manager of shard: required with Shards, in place
	// of Components and NewComponents.
	ShardComponents func(shard string) []controller.Component
	// ShardLayer makes each manager its shard's, as the operator's main does (package shard:
	// shard.SelectCache and shard.Options.ControllerOptions): required with Shards.
	ShardLayer *ShardLayer
	// Again, when > 0, crashes the recovery too: the fresh manager that takes over after the
	// crash point dies at its Again-th write (counted from its start, in Mode), and another fresh
	// manager finishes the scenario. The failure's Request then names both writes. A run whose
	// fresh manager makes fewer writes has one crash.
	Again int
	// Setup, when set, runs first, with no crash point armed: it brings the namespace where the
	// scenario starts (an owner deployed and Ready, for a scenario that upgrades it). The
	// manager's writes during Setup are not crash points.
	Setup func(t *testing.T, h *Harness)
	// Scenario drives owners through h (Create, Update, Delete, MarkReady as workloads appear)
	// and ends with its own assertions, through t. It must wait for what it needs (WaitExists,
	// MarkReady, WaitReady, WaitGone, Eventually), never for a manager's action to happen within
	// a given time: the manager may die at any of its writes, and a fresh one take over.
	Scenario func(t *testing.T, h *Harness)
	// Mode is what happens at a crash point. Default: CrashAfterWrite.
	Mode CrashMode
	// Stride explores every Stride-th crash point (1, 1+Stride, 1+2*Stride, ...) and the last
	// one, to bound the time of a long scenario. 0 or 1: every one.
	Stride int
	// Points, when set, are the only crash points explored, whatever Stride says: a regression
	// case is the point where a failure was found (Points: []int{17}).
	Points []int
	// AllowRecreated names objects ("Kind/name", as in "StatefulSet/demo-postgresql") that a
	// crash run may delete and create again more often than the clean run does: a node with
	// controller.Recreate whose re-creation a crash may repeat.
	AllowRecreated []string
	// Quiet is how long the settle pass listens for writes once every owner was reconciled.
	// Default: 500 ms.
	Quiet time.Duration
	// Parallel is how many crash runs go at once, each in its own namespace with its own
	// managers, after the clean run. Default (0 or 1): one after another. A crash run mostly
	// waits (for caches, for the scenario's marks, for the settle pass's quiet), so a few at once
	// shorten an exploration on a machine whose cores are idle; the Scenario and Setup must then
	// not share objects across namespaces (a cluster-scoped object named after h.Namespace is
	// fine). Timing-dependent counts (writes per run, crash points not reached) vary more.
	Parallel int
	// Report, when set, receives the broken invariants of each run instead of failing t: for a
	// test that checks the explorer finds a planted bug. The scenario's own assertions and the
	// harness's waits still fail t. It is called from one run at a time, even with Parallel.
	Report func(CrashFailure)
}

// CrashFailure is what broke in one run of an exploration.
type CrashFailure struct {
	// Point is the crash point: the write (counted from 1, Setup's left out) at which the
	// manager died; 0 for the clean run.
	Point int
	// Mode is what happened at Point.
	Mode CrashMode
	// Request is the write at Point, "PATCH /api/v1/namespaces/x/secrets/y".
	Request string
	// Problems are the broken invariants, each naming its object.
	Problems []string
}

// String renders the failure as "after write 17: PATCH /api/v1/namespaces/x/secrets/y", then
// one problem a line.
func (f CrashFailure) String() string {
	head := "clean run"
	if f.Point > 0 {
		head = f.Mode.point(f.Point) + ": " + f.Request
	}
	return head + "\n\t" + strings.Join(f.Problems, "\n\t")
}

// CrashReport sums an exploration up.
type CrashReport struct {
	// Writes is the number of crash points: the writes of the manager in the clean run.
	Writes int
	// Explored is the number of crash runs.
	Explored int
	// NotReached counts the crash runs whose manager made fewer writes than their crash point
	// (a run's writes vary with timing): they ran as clean runs.
	NotReached int
	// Twice counts the crash runs whose recovering manager died too (Crashes.Again).
	Twice int
	// Failed counts the crash runs with a broken invariant or a failed assertion.
	Failed int
	// Took is the time of the whole exploration, the clean run included.
	Took time.Duration
}

// ExploreCrashes runs c's scenario once with a fresh manager (the clean run) and counts the
// manager's writes (POST, PUT, PATCH, DELETE; events and access reviews left out). Then, for each
// crash point N from 1 to that count (c.Stride, c.Points), it runs the scenario again in a new
// namespace with a manager that dies at its N-th write (c.Mode: after it reached the API server,
// by default; nothing after it is sent, its context is canceled), starts a fresh manager with no
// memory of the first, and lets the scenario go on. Each run, the clean one too, is a subtest
// ("after write 17") that checks, besides the scenario's own assertions:
//
//   - the end state: every owner of the components in the namespace is Ready for its generation,
//     or gone, within Timeout of the scenario's end;
//   - settled: a fresh manager's pass over every owner writes nothing (its writes over c.Quiet
//     once it reconciled them all), and no graph node panicked;
//   - nothing lost, nothing redone, compared with the clean run: no object of the components'
//     kinds deleted and created again more often (c.AllowRecreated aside), no Secret's data
//     changed more often, no spec written more often (metadata.generation), no Job created again
//     after it completed more often; and no kept object (kdag.dev/resource-policy: keep,
//     kdag.dev/keep: "true") deleted other than by the scenario (Harness.Delete).
//
// A broken invariant fails the subtest with the crash point and its write ("after write 17:
// PATCH /api/v1/namespaces/x/secrets/y"), or goes to c.Report. A clean run that fails (its
// scenario, or an invariant when c.Report is nil) stops the exploration (t.Fatal). It returns the
// counts, which it also logs.
func ExploreCrashes(t *testing.T, api *APIServer, c Crashes) CrashReport {
	t.Helper()
	start := time.Now()
	if c.Scenario == nil {
		t.Fatal("controllertest: ExploreCrashes needs a Scenario")
	}
	if (len(c.Shards) > 0) != (c.ShardComponents != nil) || (len(c.Shards) > 0) != (c.ShardLayer != nil) {
		t.Fatal("controllertest: ExploreCrashes needs Shards, ShardComponents and ShardLayer together, or none of them")
	}
	x := explorer{api: api, c: c}
	var base *crashRun
	if !t.Run("clean run", func(t *testing.T) {
		base = x.run(t, 0)
		if len(base.problems) > 0 {
			c.fail(t, CrashFailure{Problems: base.problems})
		}
	}) || base == nil {
		t.Fatal("controllertest: the clean run failed: no crash point explored")
	}
	report := CrashReport{Writes: base.writes}
	var mu sync.Mutex // guards report and serializes c.Report
	explore := func(n int) {
		var run *crashRun
		var problems []string
		ok := t.Run(c.Mode.point(n), func(t *testing.T) {
			run = x.run(t, n)
			problems = append(run.problems, compareStats(base.stats, run.stats, c.AllowRecreated)...)
			if len(problems) > 0 {
				mu.Lock()
				defer mu.Unlock()
				c.fail(t, CrashFailure{Point: n, Mode: c.Mode, Request: run.request, Problems: problems})
			}
		})
		mu.Lock()
		defer mu.Unlock()
		report.Explored++
		if run != nil && !run.reached {
			report.NotReached++
		}
		if run != nil && run.twice {
			report.Twice++
		}
		if !ok || len(problems) > 0 {
			report.Failed++
		}
	}
	// t.Run may be called from several goroutines at once (package testing): each crash run is
	// still its own subtest, named after its point, without t.Parallel's deferral past this
	// function's return.
	todo := crashPoints(base.writes, c.Stride, c.Points)
	points := make(chan int)
	var workers sync.WaitGroup
	for range min(max(c.Parallel, 1), len(todo)) {
		workers.Go(func() {
			for n := range points {
				explore(n)
			}
		})
	}
	for _, n := range todo {
		points <- n
	}
	close(points)
	workers.Wait()
	report.Took = time.Since(start)
	again := ""
	if c.Again > 0 {
		again = fmt.Sprintf(", %d crashed again at the recovering manager's write %d", report.Twice, c.Again)
	}
	t.Logf("controllertest: %d crash points (%s), %d explored, %d not reached%s, %d failed, in %s",
		report.Writes, strings.TrimSuffix(c.Mode.point(0), " 0"), report.Explored, report.NotReached, again, report.Failed,
		report.Took.Round(100*time.Millisecond))
	return report
}

// crashPoints returns the crash points to explore among 1..writes: points when given, else every
// stride-th from 1 and the last.
func crashPoints(writes, stride int, points []int) []int {
	if len(points) > 0 {
		return slices.Clone(points)
	}
	stride = max(stride, 1)
	var out []int
	for n := 1; n <= writes; n += stride {
		out = append(out, n)
	}
	if writes > 0 && out[len(out)-1] != writes {
		out = append(out, writes)
	}
	return out
}

// fail reports f to c.Report, or fails t with it.
func (c Crashes) fail(t *testing.T, f CrashFailure) {
	t.Helper()
	if c.Report != nil {
		c.Report(f)
		return
	}
	t.Errorf("%s", f)
}

// crashRun is what one run of the scenario gave.
type crashRun struct {
	// writes is the manager's writes from the end of Setup, the last one included.
	writes int
	// reached says the crash point was reached; request is its write. twice says the
	// recovering manager died too (Crashes.Again).
	reached, twice bool
	request        string
	// stats sums up the history of the namespace's objects.
	stats map[string]objectStats
	// problems are the broken invariants that need no clean run to compare with, sorted.
	problems []string
}

// explorer runs the scenario of c on api.
type explorer struct {
	api *APIServer
	c   Crashes
}

// ShardLayer narrows a manager to its shard. Package shard provides both parts (controllertest
// cannot import it: shard's own tests use this package):
//
//	&controllertest.ShardLayer{
//		SelectCache: shard.SelectCache,
//		ControllerOptions: func(mgr ctrl.Manager, name string) controller.Options {
//			return (&shard.Options{Shard: name}).ControllerOptions(mgr)
//		},
//	}
type ShardLayer struct {
	// SelectCache returns the manager's cache options narrowed to shard ("" the unsharded
	// manager's: owners without a shard label).
	SelectCache func(opts cache.Options, shard string) (cache.Options, error)
	// ControllerOptions returns the options that make the manager's Controllers the shard's (its
	// owner filter, the hand-over).
	ControllerOptions func(mgr ctrl.Manager, shard string) controller.Options
}

// run runs the scenario once in a new namespace with the crash point n (0: none, the clean run)
// and checks the invariants that need no clean run.
func (x explorer) run(t *testing.T, n int) *crashRun {
	c := x.c
	components, shards := c.Components, c.Shards
	switch {
	case c.ShardComponents != nil:
		components = c.ShardComponents(shards[0])
	case c.NewComponents != nil:
		components = c.NewComponents()
	}
	h := newHarness(t, x.api, components)
	switch {
	case c.ShardComponents != nil:
		h.fresh = c.ShardComponents
		h.layer = c.ShardLayer
	case c.NewComponents != nil:
		h.fresh = func(string) []controller.Component { return c.NewComponents() }
	}
	if len(shards) == 0 {
		shards = []string{""} // the components' own shard: fresh is not asked for one
	}
	h.shards = shards
	hist, err := h.record()
	if err != nil {
		t.Fatalf("controllertest: record the history of %s: %v", h.Namespace, err)
	}
	stopped := false
	stopHistory := func() {
		if !stopped {
			stopped = true
			hist.stop(h)
		}
	}
	t.Cleanup(stopHistory)
	sw := &crashSwitch{mode: c.Mode}
	var sups []*supervisor
	for _, shard := range shards {
		sup, err := h.supervise(t, shard, sw.target(), c.Again)
		if err != nil {
			t.Fatalf("controllertest: %v", err)
		}
		sups = append(sups, sup)
	}
	t.Cleanup(func() {
		if t.Failed() && sw.reached() {
			t.Logf("controllertest: crash point %s: %s", c.Mode.point(n), sw.request())
		}
	})
	if c.Setup != nil {
		c.Setup(t, h)
	}
	sw.arm(n)
	c.Scenario(t, h)

	var problems []string
	settled := h.waitOwnersSettled()
	if settled != "" {
		problems = append(problems, settled)
	}
	sw.disarm()
	run := &crashRun{writes: sw.count(), reached: sw.reached(), request: sw.request()}
	var panics float64
	for _, sup := range sups {
		problems = append(problems, sup.stop()...)
		panics += sup.panics()
		if again := sup.recovery(); again != "" {
			run.request += ", " + again
			run.twice = true
		}
	}
	if settled == "" {
		quiet := c.Quiet
		if quiet <= 0 {
			quiet = 500 * time.Millisecond
		}
		writes, settlePanics, err := h.settlePass(t.Context(), quiet)
		switch {
		case err != nil:
			problems = append(problems, "settle pass: "+err.Error())
		case len(writes) > 0:
			problems = append(problems, fmt.Sprintf("not settled: a fresh manager's pass over the Ready owners wrote %s", strings.Join(writes, ", ")))
		}
		panics += settlePanics
	}
	if panics > 0 {
		problems = append(problems, fmt.Sprintf("%v graph nodes panicked (kdag_node_panics_total)", panics))
	}
	stopHistory()
	stats, gaps := hist.stats()
	run.stats = stats
	problems = append(problems, gaps...)
	for key, s := range stats {
		if s.KeptDeleted > 0 {
			problems = append(problems, fmt.Sprintf("%s: kept (%s: %s), yet deleted %d times", key,
				kdagv1alpha1.AnnotationResourcePolicy, kdagv1alpha1.ResourcePolicyKeep, s.KeptDeleted))
		}
	}
	switch {
	case n > 0 && !run.reached:
		t.Logf("controllertest: crash point %d not reached: the manager made %d writes in this run", n, run.writes)
	case n > 0:
		t.Logf("controllertest: %s: %s", c.Mode.point(n), run.request)
	}
	slices.Sort(problems)
	run.problems = problems
	return run
}

// crashSwitch counts the writes of the first managers of a run (one per shard) once armed, and
// kills the manager that makes the crash point's write.
type crashSwitch struct {
	mode CrashMode

	mu     sync.Mutex
	armed  bool
	point  int // 0: count only
	writes int
	line   string // the write at the crash point
}

// crashTarget is the transport of one manager through its run's crashSwitch.
type crashTarget struct {
	sw     *crashSwitch
	killed chan struct{} // closed when the manager is killed

	dead bool   // guarded by sw.mu
	kill func() // cancels the manager; guarded by sw.mu
	once sync.Once
}

// target returns a transport of a manager through s.
func (s *crashSwitch) target() *crashTarget {
	return &crashTarget{sw: s, killed: make(chan struct{})}
}

// arm starts counting writes from 0, with the crash point n (0: none).
func (s *crashSwitch) arm(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.armed, s.point, s.writes = true, n, 0
}

// disarm stops counting: no crash from now on.
func (s *crashSwitch) disarm() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.armed = false
}

// count returns the writes counted since arm.
func (s *crashSwitch) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.writes
}

// reached reports whether the crash point was reached.
func (s *crashSwitch) reached() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.line != ""
}

// request returns the write at the crash point, "" before it.
func (s *crashSwitch) request() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.line
}

// errCrashed is what a dead manager's requests get: the connection is gone.
var errCrashed = &net.OpError{Op: "write", Net: "tcp", Err: os.NewSyscallError("write", syscall.ECONNRESET)}

// wrap returns the transport: every request goes through next, except that once the manager is
// dead none does, and the write at the crash point is sent then the manager killed (after),
// killed without sending it (before), or answered 409 Conflict (conflict). A request sent before
// the crash point's write was counted still completes, as on a real connection.
func (c *crashTarget) wrap(next http.RoundTripper) http.RoundTripper {
	s := c.sw
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		_, write := writeLine(req.Method, req.URL.Path)
		s.mu.Lock()
		if c.dead {
			s.mu.Unlock()
			closeBody(req)
			return nil, errCrashed
		}
		due := false
		if write && s.armed {
			s.writes++
			due = s.point > 0 && s.writes == s.point
		}
		if due {
			s.line = req.Method + " " + req.URL.Path
			c.dead = s.mode != ConflictAtWrite // nothing after this write is sent
		}
		s.mu.Unlock()
		if !due {
			return next.RoundTrip(req)
		}
		switch s.mode {
		case ConflictAtWrite:
			closeBody(req)
			return conflictResponse(req), nil
		case CrashBeforeWrite:
			closeBody(req)
		default:
			if resp, err := next.RoundTrip(req); err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
			}
		}
		c.die()
		return nil, errCrashed
	})
}

// die cancels the manager and tells the supervisor, once.
func (c *crashTarget) die() {
	c.once.Do(func() {
		c.sw.mu.Lock()
		kill := c.kill
		c.sw.mu.Unlock()
		if kill != nil {
			kill()
		}
		close(c.killed)
	})
}

func closeBody(req *http.Request) {
	if req.Body != nil {
		_ = req.Body.Close()
	}
}

// conflictResponse is the API server's 409 Conflict answer to req.
func conflictResponse(req *http.Request) *http.Response {
	body, _ := json.Marshal(metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusFailure, Reason: metav1.StatusReasonConflict, Code: http.StatusConflict,
		Message: "controllertest: conflict injected at the crash point",
	})
	return &http.Response{
		StatusCode: http.StatusConflict, Status: "409 Conflict", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:        http.Header{"Content-Type": {"application/json"}},
		Body:          io.NopCloser(bytes.NewReader(body)),
		ContentLength: int64(len(body)),
		Request:       req,
	}
}

// roundTripFunc is an http.RoundTripper from a function.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// supervisor runs the managers of one shard in one run: the first, through a crashTarget, and,
// once the crash point killed it, a fresh one; with a recovery crash (Crashes.Again), that one
// through a crashTarget of its own, and once it died too, a third.
type supervisor struct {
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
	// again is the recovering manager's crash switch, nil without a recovery crash.
	again *crashSwitch

	mu       sync.Mutex
	all      []*managerRun        // the first, then the fresh ones
	dead     map[*managerRun]bool // killed at a crash point: their errors are a dead process's
	startErr error
}

// supervise starts the harness's first manager of shard through sw and a goroutine that, when sw
// kills it, waits until it has stopped and starts a fresh one of the shard; when again > 0, that
// one dies at its again-th write (counted from its start, in sw's mode) and a third takes over.
// stop ends them all; the test's end calls it in any case. It returns an error when the first
// manager does not start.
func (h *Harness) supervise(t testing.TB, shard string, sw *crashTarget, again int) (*supervisor, error) {
	first, err := h.startManager(t.Context(), shard, sw.wrap)
	if err != nil {
		return nil, err
	}
	sw.sw.mu.Lock()
	sw.kill = first.cancel
	sw.sw.mu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	s := &supervisor{cancel: cancel, done: make(chan struct{}), all: []*managerRun{first},
		dead: map[*managerRun]bool{}}
	if again > 0 {
		s.again = &crashSwitch{mode: sw.sw.mode}
		s.again.arm(again)
	}
	go func() {
		defer close(s.done)
		cur, target := first, sw
		for restart := 0; ; restart++ {
			select {
			case <-ctx.Done():
				return
			case <-target.killed:
			}
			_ = cur.stop() // a dead process's error
			s.mu.Lock()
			s.dead[cur] = true
			s.mu.Unlock()
			if ctx.Err() != nil {
				return // stopped meanwhile: a manager set up and never started would leak goroutines
			}
			var wraps []func(http.RoundTripper) http.RoundTripper
			target = nil
			if restart == 0 && s.again != nil {
				target = s.again.target()
				wraps = append(wraps, target.wrap)
			}
			// Not canceled by stop: a manager stopped before its cache synced leaks a goroutine
			// per event handler (controller-runtime), so a start finishes first.
			startCtx, cancelStart := context.WithTimeout(context.Background(), Timeout)
			next, err := h.startManager(startCtx, shard, wraps...)
			cancelStart()
			s.mu.Lock()
			if err != nil {
				if ctx.Err() == nil {
					s.startErr = errors.Wrap(err, "the fresh manager after the crash")
				}
				s.mu.Unlock()
				return
			}
			s.all = append(s.all, next)
			s.mu.Unlock()
			if target == nil {
				return
			}
			s.again.mu.Lock()
			target.kill = next.cancel
			s.again.mu.Unlock()
			cur = next
		}
	}()
	t.Cleanup(func() { s.stop() })
	return s, nil
}

// stop stops restarting and the running managers, and returns the problems: a manager that did
// not start after a crash, or the error of a manager that was not killed. A fresh manager that
// is starting finishes its start first (within Timeout).
func (s *supervisor) stop() []string {
	var problems []string
	s.once.Do(func() {
		s.cancel()
		<-s.done
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.startErr != nil {
			problems = append(problems, s.startErr.Error())
		}
		for _, m := range s.all {
			if err := m.stop(); err != nil && !s.dead[m] {
				problems = append(problems, "manager: "+err.Error())
			}
		}
	})
	return problems
}

// recovery returns the recovering manager's crash point as "then after write 3 of the fresh
// manager: PATCH ...", "" when it was not reached or there is none.
func (s *supervisor) recovery() string {
	if s.again == nil || !s.again.reached() {
		return ""
	}
	return fmt.Sprintf("then %s of the fresh manager: %s", s.again.mode.point(s.again.point), s.again.request())
}

// panics returns the graph nodes that panicked in the supervisor's managers.
func (s *supervisor) panics() float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var n float64
	for _, m := range s.all {
		n += metricSum(m.registry, metrics.Namespace+"_node_panics_total", "")
	}
	return n
}

// metricSum returns the sum of the counters, or of the histograms' sample counts, named name in
// reg, of controller when not "".
func metricSum(reg *prometheus.Registry, name, controller string) float64 {
	families, err := reg.Gather()
	if err != nil {
		return 0
	}
	var sum float64
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			of := controller == ""
			for _, l := range m.GetLabel() {
				of = of || l.GetName() == metrics.LabelController && l.GetValue() == controller
			}
			if !of {
				continue
			}
			sum += m.GetCounter().GetValue() + float64(m.GetHistogram().GetSampleCount())
		}
	}
	return sum
}

// owners returns the owners of each component in the harness's namespace, by component name.
func (h *Harness) owners(ctx context.Context) (map[string][]unstructured.Unstructured, error) {
	out := map[string][]unstructured.Unstructured{}
	for _, c := range h.components {
		gvk, err := apiutil.GVKForObject(c.NewOwner(), h.scheme)
		if err != nil {
			return nil, err
		}
		items, _, err := h.list(ctx, gvk)
		if err != nil {
			return nil, err
		}
		out[c.Name()] = items
	}
	return out, nil
}

// waitOwnersSettled waits until every owner of the components in the namespace is Ready for its
// generation, or gone, and returns "" then, or after Timeout why not.
func (h *Harness) waitOwnersSettled() string {
	var last string
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, Timeout, true, func(ctx context.Context) (bool, error) {
		all, err := h.owners(ctx)
		if err != nil {
			last = err.Error()
			return false, nil
		}
		var why []string
		for _, c := range h.components {
			for _, o := range all[c.Name()] {
				conds := conditionsOf(&o)
				ready := meta.FindStatusCondition(conds, kdagv1alpha1.ConditionReady)
				switch {
				case o.GetDeletionTimestamp() != nil:
					why = append(why, fmt.Sprintf("%s %s: being deleted (finalizers %v)", o.GetKind(), o.GetName(), o.GetFinalizers()))
				case ready == nil || ready.Status != metav1.ConditionTrue || ready.ObservedGeneration != o.GetGeneration():
					why = append(why, fmt.Sprintf("%s %s: %s", o.GetKind(), o.GetName(), describeConditions(conds)))
				}
			}
		}
		last = strings.Join(why, "; ")
		return len(why) == 0, nil
	})
	if err != nil {
		return fmt.Sprintf("end state not reached: owners not Ready (or gone) within %s of the scenario's end: %s", Timeout, last)
	}
	return ""
}

// settlePass starts a fresh manager per shard of the harness, waits until they have run the graph
// of every owner of each component (kdag_graph_run_duration_seconds, summed over the managers)
// and then for quiet, stops them, and returns their writes ("VERB resource/name", refused ones
// too) and their nodes' panics. It returns an error when a manager does not start, they do not
// reconcile every owner within Timeout, or one fails.
func (h *Harness) settlePass(ctx context.Context, quiet time.Duration) ([]string, float64, error) {
	all, err := h.owners(ctx)
	if err != nil {
		return nil, 0, err
	}
	h.ResetWrites()
	shards := h.shards
	if len(shards) == 0 {
		shards = []string{""}
	}
	var managers []*managerRun
	stopped := false
	defer func() {
		if !stopped {
			for _, m := range managers {
				_ = m.stop()
			}
		}
	}()
	for _, shard := range shards {
		m, err := h.startManager(ctx, shard)
		if err != nil {
			return nil, 0, err
		}
		managers = append(managers, m)
	}
	sum := func(name, controller string) float64 {
		var n float64
		for _, m := range managers {
			n += metricSum(m.registry, name, controller)
		}
		return n
	}
	var behind string
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, Timeout, true, func(context.Context) (bool, error) {
		behind = ""
		for _, c := range h.components {
			if runs := sum(metrics.Namespace+"_graph_run_duration_seconds", c.Name()); runs < float64(len(all[c.Name()])) {
				behind = fmt.Sprintf("component %s ran %v graphs for %d owners", c.Name(), runs, len(all[c.Name()]))
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return nil, 0, errors.Errorf("the fresh manager did not reconcile every owner within %s: %s", Timeout, behind)
	}
	time.Sleep(quiet)
	stopped = true
	var stopErr error
	for _, m := range managers {
		if err := m.stop(); err != nil && stopErr == nil {
			stopErr = errors.Wrap(err, "the settle pass's manager")
		}
	}
	if stopErr != nil {
		return nil, 0, stopErr
	}
	var writes []string
	for _, r := range h.requests.Requests() {
		if line, ok := writeLine(r.Method, r.Path); ok {
			writes = append(writes, line)
		}
	}
	return writes, sum(metrics.Namespace+"_node_panics_total", ""), nil
}
