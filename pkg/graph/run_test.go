package graph_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kdag-dev/kdag/pkg/graph"
)

var parallelisms = []int{0, 1, 2, 3}

func TestRunRunsNodesAfterBlockers(t *testing.T) {
	for _, p := range parallelisms {
		t.Run(fmt.Sprintf("parallel=%d", p), func(t *testing.T) {
			var mu sync.Mutex
			var order []string
			record := func(id string) graph.Func {
				return func(context.Context) error {
					mu.Lock()
					defer mu.Unlock()
					order = append(order, id)
					return nil
				}
			}
			g := graph.New[string](graph.Options{SizeHint: 4})
			mustAdd(t, g, "a", record("a"))
			mustAdd(t, g, "b", record("b"), "a")
			mustAdd(t, g, "c", record("c"), "a")
			mustAdd(t, g, "d", record("d"), "b", "c")

			res, err := g.Run(context.Background(), graph.RunOptions{MaxParallel: p})
			if err != nil {
				t.Fatalf("Run() error = %v", err)
			}
			if len(order) != 4 || order[0] != "a" || order[3] != "d" {
				t.Errorf("run order = %v, want a first, d last, each once", order)
			}
			if p == 1 && !slices.Equal(order, []string{"a", "b", "c", "d"}) {
				t.Errorf("run order with MaxParallel=1 = %v, want insertion order", order)
			}
			for i, id := range []string{"a", "b", "c", "d"} {
				n, ok := res.Node(id)
				if !ok || n.ID != id || n.Outcome != graph.Succeeded || n.Err != nil || res.Nodes[i].ID != id {
					t.Errorf("Node(%q) = %+v, %v; Nodes[%d].ID = %v", id, n, ok, i, res.Nodes[i].ID)
				}
			}
			if _, ok := res.Node("zz"); ok {
				t.Error(`Node("zz") found`)
			}
			if res.Count(graph.Succeeded) != 4 {
				t.Errorf("Count(Succeeded) = %d, want 4", res.Count(graph.Succeeded))
			}
		})
	}
}

func TestRunEmptyGraph(t *testing.T) {
	var g graph.Graph[string]
	res, err := g.Run(context.Background(), graph.RunOptions{})
	if err != nil || len(res.Nodes) != 0 || res.End.Before(res.Start) {
		t.Errorf("Run() = %+v, %v", res, err)
	}
}

// failureGraph is
//
//	a -> b -> d -> g
//	a -> c -> d
//	e -> f -> g
func failureGraph(t *testing.T, failing ...string) *graph.Graph[string] {
	g := graph.New[string](graph.Options{})
	node := func(id string, blockers ...string) {
		fn := noop
		if slices.Contains(failing, id) {
			fn = func(context.Context) error { return errors.New("boom " + id) }
		}
		mustAdd(t, g, id, fn, blockers...)
	}
	node("a")
	node("b", "a")
	node("c", "a")
	node("d", "b", "c")
	node("e")
	node("f", "e")
	node("g", "d", "f")
	return g
}

func TestRunIsolatesFailures(t *testing.T) {
	// want maps each node to its outcome; blocked nodes as "blocked:<ancestor>".
	tests := []struct {
		failing []string
		want    map[string]string
	}{
		{nil, map[string]string{}},
		{[]string{"b"}, map[string]string{"b": "failed", "d": "blocked:b", "g": "blocked:b"}},
		{[]string{"b", "c"}, map[string]string{"b": "failed", "c": "failed", "d": "blocked:b", "g": "blocked:b"}},
		{[]string{"c", "f"}, map[string]string{"c": "failed", "f": "failed", "d": "blocked:c", "g": "blocked:c"}},
		{[]string{"f"}, map[string]string{"f": "failed", "g": "blocked:f"}},
		{[]string{"a"}, map[string]string{"a": "failed", "b": "blocked:a", "c": "blocked:a", "d": "blocked:a", "g": "blocked:a"}},
		{[]string{"a", "e"}, map[string]string{"a": "failed", "b": "blocked:a", "c": "blocked:a", "d": "blocked:a", "e": "failed", "f": "blocked:e", "g": "blocked:a"}},
		{[]string{"a", "d"}, map[string]string{"a": "failed", "b": "blocked:a", "c": "blocked:a", "d": "blocked:a", "g": "blocked:a"}},
		{[]string{"g"}, map[string]string{"g": "failed"}},
	}
	for _, tt := range tests {
		for _, p := range parallelisms {
			t.Run(fmt.Sprintf("failing=%v/parallel=%d", tt.failing, p), func(t *testing.T) {
				res, err := failureGraph(t, tt.failing...).Run(context.Background(), graph.RunOptions{MaxParallel: p})
				var failed []string
				for _, n := range res.Nodes {
					want := tt.want[n.ID]
					if want == "" {
						want = "succeeded"
					}
					got := n.Outcome.String()
					if n.Outcome == graph.Blocked {
						got += ":" + n.BlockedBy
					}
					if got != want {
						t.Errorf("node %s: %s, want %s", n.ID, got, want)
					}
					if (n.Err != nil) != (n.Outcome == graph.Failed) {
						t.Errorf("node %s: outcome %s with Err %v", n.ID, n.Outcome, n.Err)
					}
					if n.Outcome == graph.Failed {
						failed = append(failed, n.ID)
					}
				}
				checkJoined(t, err, failed)
			})
		}
	}
}

// checkJoined checks that err joins one *NodeError per failed node, in order.
func checkJoined(t *testing.T, err error, failed []string) {
	t.Helper()
	if len(failed) == 0 {
		if err != nil {
			t.Errorf("Run() error = %v, want nil", err)
		}
		return
	}
	joined, ok := err.(interface{ Unwrap() []error })
	if !ok {
		t.Fatalf("Run() error = %T %v, want a joined error", err, err)
	}
	var got []string
	for _, e := range joined.Unwrap() {
		var ne *graph.NodeError[string]
		if !errors.As(e, &ne) {
			t.Fatalf("joined error %T %v is not a *NodeError", e, e)
		}
		got = append(got, ne.ID)
		if !strings.HasPrefix(e.Error(), "node "+ne.ID+": ") {
			t.Errorf("error %q does not name node %s", e, ne.ID)
		}
	}
	if !slices.Equal(got, failed) {
		t.Errorf("joined failures = %v, want %v", got, failed)
	}
}

func TestRunJoinsAllFailures(t *testing.T) {
	errDB, errCache := errors.New("db down"), errors.New("cache down")
	g := graph.New[string](graph.Options{})
	mustAdd(t, g, "db", func(context.Context) error { return errDB })
	mustAdd(t, g, "cache", func(context.Context) error { return errCache })
	mustAdd(t, g, "web", noop, "db", "cache")
	mustAdd(t, g, "docs", noop)

	res, err := g.Run(context.Background(), graph.RunOptions{})
	if !errors.Is(err, errDB) || !errors.Is(err, errCache) {
		t.Fatalf("Run() error = %v, want both failures", err)
	}
	if want := "node db: db down\nnode cache: cache down"; err.Error() != want {
		t.Errorf("Run() error = %q, want %q", err, want)
	}
	var ne *graph.NodeError[string]
	if !errors.As(err, &ne) || ne.ID != "db" {
		t.Errorf("errors.As NodeError = %v, want node db", ne)
	}
	if n, _ := res.Node("web"); n.Outcome != graph.Blocked || n.BlockedBy != "db" {
		t.Errorf("web = %s by %q, want blocked by db", n.Outcome, n.BlockedBy)
	}
	if n, _ := res.Node("docs"); n.Outcome != graph.Succeeded {
		t.Errorf("docs = %s, want succeeded", n.Outcome)
	}
}

func panicking(context.Context) error { panic("kaboom") }

func TestRunTurnsPanicIntoError(t *testing.T) {
	errInner := errors.New("inner")
	g := graph.New[string](graph.Options{})
	mustAdd(t, g, "a", panicking)
	mustAdd(t, g, "b", noop, "a")
	mustAdd(t, g, "c", func(context.Context) error { panic(errInner) })
	mustAdd(t, g, "d", func(context.Context) error { panic(nil) })
	mustAdd(t, g, "e", noop)

	res, err := g.Run(context.Background(), graph.RunOptions{})
	if !errors.Is(err, graph.ErrPanic) || !errors.Is(err, errInner) {
		t.Fatalf("Run() error = %v, want ErrPanic and the panic's error", err)
	}
	a, _ := res.Node("a")
	var pe *graph.PanicError
	if a.Outcome != graph.Failed || !errors.As(a.Err, &pe) || pe.Value != "kaboom" {
		t.Fatalf("a = %s, %v; want failed with PanicError(kaboom)", a.Outcome, a.Err)
	}
	if !strings.Contains(string(pe.Stack), "graph_test.panicking") {
		t.Errorf("stack does not show the panicking function:\n%s", pe.Stack)
	}
	if got := fmt.Sprintf("%v", a.Err); got != "node panicked: kaboom" {
		t.Errorf("%%v = %q", got)
	}
	if got := fmt.Sprintf("%+v", &graph.NodeError[string]{ID: "a", Err: a.Err}); !strings.Contains(got, "graph_test.panicking") {
		t.Errorf("%%+v of NodeError has no stack: %q", got)
	}
	d, _ := res.Node("d")
	var nilPanic *runtime.PanicNilError
	if d.Outcome != graph.Failed || !errors.As(d.Err, &nilPanic) {
		t.Errorf("d = %s, %v; want failed with a PanicNilError", d.Outcome, d.Err)
	}
	want := map[string]graph.Outcome{"a": graph.Failed, "b": graph.Blocked, "c": graph.Failed, "d": graph.Failed, "e": graph.Succeeded}
	for id, o := range want {
		if n, _ := res.Node(id); n.Outcome != o {
			t.Errorf("%s = %s, want %s", id, n.Outcome, o)
		}
	}
}

func TestRunSurvivesGoexit(t *testing.T) {
	for _, p := range parallelisms {
		t.Run(fmt.Sprintf("parallel=%d", p), func(t *testing.T) {
			g := graph.New[int](graph.Options{})
			mustAdd(t, g, 0, func(context.Context) error { runtime.Goexit(); return nil })
			mustAdd(t, g, 1, noop, 0)
			for i := 2; i < 20; i++ {
				mustAdd(t, g, i, noop)
			}
			res, err := g.Run(context.Background(), graph.RunOptions{MaxParallel: p})
			if !errors.Is(err, graph.ErrGoexit) {
				t.Errorf("Run() error = %v, want ErrGoexit", err)
			}
			if res.Nodes[0].Outcome != graph.Failed || res.Nodes[1].Outcome != graph.Blocked || res.Count(graph.Succeeded) != 18 {
				t.Errorf("outcomes: 0=%s 1=%s succeeded=%d", res.Nodes[0].Outcome, res.Nodes[1].Outcome, res.Count(graph.Succeeded))
			}
		})
	}
}

func TestRunWithDoneContextRunsNothing(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var ran atomic.Int32
	count := func(context.Context) error { ran.Add(1); return nil }
	g := graph.New[string](graph.Options{})
	mustAdd(t, g, "a", count)
	mustAdd(t, g, "b", count, "a")
	mustAdd(t, g, "c", count)

	res, err := g.Run(ctx, graph.RunOptions{})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Run() error = %v, want context.Canceled", err)
	}
	if ran.Load() != 0 || res.Count(graph.Canceled) != 3 {
		t.Errorf("ran %d nodes, %d canceled; want 0 and 3", ran.Load(), res.Count(graph.Canceled))
	}
	for _, n := range res.Nodes {
		if n.Start != 0 || n.End != 0 || n.Err != nil {
			t.Errorf("canceled node %s has %+v", n.ID, n)
		}
	}
}

func TestRunCancelWaitsForRunningNodes(t *testing.T) {
	for _, p := range parallelisms {
		t.Run(fmt.Sprintf("parallel=%d", p), func(t *testing.T) {
			cause := errors.New("shutting down")
			ctx, cancel := context.WithCancelCause(context.Background())
			defer cancel(nil)
			started := make(chan struct{})
			var returned, ranLate atomic.Bool
			g := graph.New[string](graph.Options{})
			mustAdd(t, g, "slow", func(ctx context.Context) error {
				close(started)
				<-ctx.Done()
				time.Sleep(20 * time.Millisecond)
				returned.Store(true)
				return nil
			})
			mustAdd(t, g, "after-slow", func(context.Context) error { ranLate.Store(true); return nil }, "slow")
			mustAdd(t, g, "after-that", func(context.Context) error { ranLate.Store(true); return nil }, "after-slow")
			go func() {
				<-started
				cancel(cause)
			}()

			res, err := g.Run(ctx, graph.RunOptions{MaxParallel: p})
			if !returned.Load() {
				t.Error("Run returned before the running node")
			}
			if ranLate.Load() {
				t.Error("a node started after cancellation")
			}
			if !errors.Is(err, cause) {
				t.Errorf("Run() error = %v, want the cancel cause", err)
			}
			got := []graph.Outcome{res.Nodes[0].Outcome, res.Nodes[1].Outcome, res.Nodes[2].Outcome}
			if !slices.Equal(got, []graph.Outcome{graph.Succeeded, graph.Canceled, graph.Canceled}) {
				t.Errorf("outcomes = %v, want [succeeded canceled canceled]", got)
			}
		})
	}
}

func TestRunCancelStopsQueuedNodes(t *testing.T) {
	// With one slot, nodes queue; cancelling from inside a node must stop
	// every node after it, the failed ancestor still winning over the cancel.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var ran []int
	g := graph.New[int](graph.Options{})
	for i := range 10 {
		fn := func(context.Context) error {
			ran = append(ran, i)
			switch i {
			case 3:
				return errors.New("failed")
			case 4:
				cancel()
			}
			return nil
		}
		var blockers []int
		if i == 8 {
			blockers = []int{3}
		}
		mustAdd(t, g, i, fn, blockers...)
	}
	res, err := g.Run(ctx, graph.RunOptions{MaxParallel: 1})
	if !slices.Equal(ran, []int{0, 1, 2, 3, 4}) {
		t.Errorf("ran %v, want [0 1 2 3 4]", ran)
	}
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Run() error = %v, want context.Canceled", err)
	}
	if n := res.Nodes[8]; n.Outcome != graph.Blocked || n.BlockedBy != 3 {
		t.Errorf("node 8 = %s by %d, want blocked by 3", n.Outcome, n.BlockedBy)
	}
	if res.Count(graph.Canceled) != 4 {
		t.Errorf("%d canceled, want 4 (5, 6, 7, 9)", res.Count(graph.Canceled))
	}
}

func TestRunTimings(t *testing.T) {
	const work = 3 * time.Millisecond
	sleep := func(context.Context) error { time.Sleep(work); return nil }
	g := graph.New[string](graph.Options{})
	mustAdd(t, g, "a", sleep)
	mustAdd(t, g, "b", sleep, "a")
	mustAdd(t, g, "c", func(context.Context) error { return errors.New("no") }, "b")
	mustAdd(t, g, "d", sleep, "c")

	res, _ := g.Run(context.Background(), graph.RunOptions{})
	if res.End.Before(res.Start) {
		t.Fatalf("run ends %v before it starts %v", res.End, res.Start)
	}
	for _, n := range res.Nodes {
		if n.Wait < 0 {
			t.Errorf("%s: negative wait %v", n.ID, n.Wait)
		}
		if !n.Ran() {
			if n.Start != 0 || n.End != 0 || n.Wait != 0 {
				t.Errorf("%s did not run but has start %v end %v wait %v", n.ID, n.Start, n.End, n.Wait)
			}
			continue
		}
		start, end := res.At(n.Start), res.At(n.End)
		if n.Start < 0 || start.Before(res.Start) || end.Before(start) || res.End.Before(end) {
			t.Errorf("%s: run [%v, %v], node [%v, %v]", n.ID, res.Start, res.End, start, end)
		}
		if n.Start < n.Wait || start.Sub(res.Start) != n.Start {
			t.Errorf("%s: started %v (at %v) after the run start, before it was runnable (%v)", n.ID, n.Start, start, n.Wait)
		}
	}
	a, b := res.Nodes[0], res.Nodes[1]
	if a.Wait != 0 || a.Duration() < work || b.Wait != a.End {
		t.Errorf("a: wait %v duration %v; b: wait %v, want a's end %v", a.Wait, a.Duration(), b.Wait, a.End)
	}
}

// TestRunUnboundedStartsAllRunnableNodes checks that unbounded runs start every
// runnable node at once: each node of a layer waits until all nodes of the
// layer have started, which only finishes if they all run together.
func TestRunUnboundedStartsAllRunnableNodes(t *testing.T) {
	const width, layers = 300, 3
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var started [layers]atomic.Int32
	var all [layers]chan struct{}
	g := graph.New[int](graph.Options{})
	for l := range layers {
		all[l] = make(chan struct{})
		for j := range width {
			fn := func(ctx context.Context) error {
				if started[l].Add(1) == width {
					close(all[l])
				}
				select {
				case <-all[l]:
					return nil
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			var blockers []int
			if l > 0 {
				blockers = []int{(l-1)*width + j, (l-1)*width + (j+1)%width}
			}
			mustAdd(t, g, l*width+j, fn, blockers...)
		}
	}
	res, err := g.Run(ctx, graph.RunOptions{})
	if err != nil || res.Count(graph.Succeeded) != width*layers {
		t.Fatalf("Run() = %d succeeded, error %v", res.Count(graph.Succeeded), err)
	}
}

func TestRunTwice(t *testing.T) {
	var calls atomic.Int32
	fail := true
	g := graph.New[string](graph.Options{})
	mustAdd(t, g, "a", func(context.Context) error {
		calls.Add(1)
		if fail {
			return errors.New("first time")
		}
		return nil
	})
	mustAdd(t, g, "b", noop, "a")
	first, err1 := g.Run(context.Background(), graph.RunOptions{})
	fail = false
	second, err2 := g.Run(context.Background(), graph.RunOptions{})
	if err1 == nil || err2 != nil || calls.Load() != 2 {
		t.Fatalf("errors %v, %v; %d calls", err1, err2, calls.Load())
	}
	if first.Nodes[1].Outcome != graph.Blocked || second.Nodes[1].Outcome != graph.Succeeded {
		t.Errorf("b: first %s, second %s", first.Nodes[1].Outcome, second.Nodes[1].Outcome)
	}
}

func TestRunConcurrently(t *testing.T) {
	var calls atomic.Int32
	count := func(context.Context) error { calls.Add(1); return nil }
	g := graph.New[int](graph.Options{})
	for i := range 50 {
		var blockers []int
		if i > 0 {
			blockers = []int{i / 2}
		}
		mustAdd(t, g, i, count, blockers...)
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			res, err := g.Run(context.Background(), graph.RunOptions{MaxParallel: 3})
			if err != nil || res.Count(graph.Succeeded) != 50 {
				t.Errorf("Run() = %d succeeded, error %v", res.Count(graph.Succeeded), err)
			}
		})
	}
	wg.Wait()
	if calls.Load() != 200 {
		t.Errorf("%d calls, want 200", calls.Load())
	}
}

// TestRunBlockingNodeDoesNotHoldBackOthers checks that a node that blocks
// after many quick ones, from the same queue or at the end of a chain, does
// not keep the other runnable nodes waiting: it waits for the last of them.
func TestRunBlockingNodeDoesNotHoldBackOthers(t *testing.T) {
	const n = 2000
	for _, shape := range []string{"independent", "chain-then-independent"} {
		for _, p := range []int{0, 2} {
			t.Run(fmt.Sprintf("%s/parallel=%d", shape, p), func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				lastRan := make(chan struct{})
				g := graph.New[int](graph.Options{})
				for i := range n {
					fn := noop
					switch i {
					case n / 2:
						fn = func(ctx context.Context) error {
							select {
							case <-lastRan:
								return nil
							case <-ctx.Done():
								return ctx.Err()
							}
						}
					case n - 1:
						fn = func(context.Context) error { close(lastRan); return nil }
					}
					var blockers []int
					if shape == "chain-then-independent" && i > 0 {
						blockers = []int{min(i, n/2) - 1}
					}
					mustAdd(t, g, i, fn, blockers...)
				}
				res, err := g.Run(ctx, graph.RunOptions{MaxParallel: p})
				if err != nil || res.Count(graph.Succeeded) != n {
					t.Fatalf("Run() = %d succeeded, error %v", res.Count(graph.Succeeded), err)
				}
			})
		}
	}
}

// TestRunOneSlotGoesDepthFirst checks the order documented for MaxParallel 1:
// the worker runs the first node its node made runnable, then the queued ones
// first in, first out.
func TestRunOneSlotGoesDepthFirst(t *testing.T) {
	var order []string
	g := graph.New[string](graph.Options{})
	for _, n := range []struct {
		id       string
		blockers []string
	}{
		{"a", nil}, {"b", []string{"a"}}, {"c", []string{"a"}}, {"d", []string{"a"}},
		{"e", []string{"b"}}, {"f", []string{"e"}}, {"g", []string{"c", "d"}},
	} {
		mustAdd(t, g, n.id, func(context.Context) error { order = append(order, n.id); return nil }, n.blockers...)
	}
	if _, err := g.Run(context.Background(), graph.RunOptions{MaxParallel: 1}); err != nil {
		t.Fatal(err)
	}
	if want := []string{"a", "b", "e", "f", "c", "d", "g"}; !slices.Equal(order, want) {
		t.Errorf("order = %v, want %v", order, want)
	}
}
