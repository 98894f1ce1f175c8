package graph_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kdag-dev/kdag/pkg/graph"
)

const propertyRuns = 1000

// dag is a random DAG: node i is blocked by blockers[i], all < i, in random
// order.
type dag struct {
	blockers [][]int
}

func randomDAG(r *rand.Rand) dag {
	n := 1 + r.IntN(40)
	p := r.Float64() * 0.3
	d := dag{blockers: make([][]int, n)}
	for i := range n {
		for j := range i {
			if r.Float64() < p {
				d.blockers[i] = append(d.blockers[i], j)
			}
		}
		r.Shuffle(len(d.blockers[i]), func(a, b int) {
			d.blockers[i][a], d.blockers[i][b] = d.blockers[i][b], d.blockers[i][a]
		})
	}
	return d
}

func (d dag) n() int { return len(d.blockers) }

// build adds node i with fn(i).
func (d dag) build(t *testing.T, fn func(i int) graph.Func) *graph.Graph[int] {
	t.Helper()
	g := graph.New[int](graph.Options{SizeHint: d.n()})
	for i, blockers := range d.blockers {
		if err := g.AddNode(i, fn(i), blockers...); err != nil {
			t.Fatal(err)
		}
	}
	return g
}

// ancestors returns, for each node, the set of its ancestors.
func (d dag) ancestors() []map[int]bool {
	anc := make([]map[int]bool, d.n())
	for i, blockers := range d.blockers {
		anc[i] = map[int]bool{}
		for _, b := range blockers {
			anc[i][b] = true
			for a := range anc[b] {
				anc[i][a] = true
			}
		}
	}
	return anc
}

// descendants returns the nodes reachable from the given ones, excluding
// them unless reachable from another.
func (d dag) descendants(from []int) map[int]bool {
	deps := make([][]int, d.n())
	for i, blockers := range d.blockers {
		for _, b := range blockers {
			deps[b] = append(deps[b], i)
		}
	}
	seen := map[int]bool{}
	stack := slices.Clone(from)
	for len(stack) > 0 {
		x := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, y := range deps[x] {
			if !seen[y] {
				seen[y] = true
				stack = append(stack, y)
			}
		}
	}
	return seen
}

func seeded(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0x5eed)) }

// jitter sometimes yields or sleeps, to vary interleavings.
func jitter(r uint64) {
	switch r % 8 {
	case 0:
		runtime.Gosched()
	case 1:
		time.Sleep(time.Duration(r%50) * time.Microsecond)
	}
}

func TestPropertyNodesRunOnceAfterBlockers(t *testing.T) {
	for seed := uint64(1); seed <= propertyRuns; seed++ {
		r := seeded(seed)
		d := randomDAG(r)
		p := []int{0, 1, 2, 3, 5, 8}[r.IntN(6)]
		runs := make([]atomic.Int32, d.n())
		done := make([]atomic.Bool, d.n())
		var early atomic.Int32
		g := d.build(t, func(i int) graph.Func {
			j := r.Uint64()
			return func(context.Context) error {
				runs[i].Add(1)
				for _, b := range d.blockers[i] {
					if !done[b].Load() {
						early.Add(1)
					}
				}
				jitter(j)
				done[i].Store(true)
				return nil
			}
		})
		res, err := g.Run(context.Background(), graph.RunOptions{MaxParallel: p})
		if err != nil || early.Load() != 0 || res.Count(graph.Succeeded) != d.n() {
			t.Fatalf("seed %d: error %v, %d nodes ran before a blocker finished, %d/%d succeeded",
				seed, err, early.Load(), res.Count(graph.Succeeded), d.n())
		}
		for i := range runs {
			if runs[i].Load() != 1 {
				t.Fatalf("seed %d: node %d ran %d times", seed, i, runs[i].Load())
			}
		}
	}
}

func TestPropertyFailuresBlockExactlyTheirDescendants(t *testing.T) {
	for seed := uint64(1); seed <= propertyRuns; seed++ {
		r := seeded(seed)
		d := randomDAG(r)
		p := []int{0, 1, 2, 4}[r.IntN(4)]
		fails := make([]bool, d.n())
		for i := range fails {
			fails[i] = r.Float64() < 0.15
		}
		runs := make([]atomic.Int32, d.n())
		g := d.build(t, func(i int) graph.Func {
			return func(context.Context) error {
				runs[i].Add(1)
				if fails[i] {
					return errors.New("fail")
				}
				return nil
			}
		})
		res, err := g.Run(context.Background(), graph.RunOptions{MaxParallel: p})

		// Expected, computed from the edge list: nodes set to fail and with no
		// such ancestor fail; exactly their descendants are blocked.
		anc := d.ancestors()
		var failed []int
		for i := range fails {
			hasFailingAncestor := false
			for a := range anc[i] {
				hasFailingAncestor = hasFailingAncestor || fails[a]
			}
			if fails[i] && !hasFailingAncestor {
				failed = append(failed, i)
			}
		}
		blocked := d.descendants(failed)
		for i, n := range res.Nodes {
			want, ran := graph.Succeeded, int32(1)
			switch {
			case blocked[i]:
				want, ran = graph.Blocked, 0
			case slices.Contains(failed, i):
				want = graph.Failed
			}
			if n.Outcome != want || runs[i].Load() != ran {
				t.Fatalf("seed %d: node %d %s after %d runs, want %s", seed, i, n.Outcome, runs[i].Load(), want)
			}
			if want != graph.Blocked {
				continue
			}
			// BlockedBy: a failed ancestor, the one behind the first
			// non-succeeded blocker.
			if !slices.Contains(failed, n.BlockedBy) || !anc[i][n.BlockedBy] {
				t.Fatalf("seed %d: node %d blocked by %d, not a failed ancestor", seed, i, n.BlockedBy)
			}
			for _, b := range d.blockers[i] {
				if bo := res.Nodes[b].Outcome; bo != graph.Succeeded {
					wantBy := b
					if bo == graph.Blocked {
						wantBy = res.Nodes[b].BlockedBy
					}
					if n.BlockedBy != wantBy {
						t.Fatalf("seed %d: node %d blocked by %d, want %d (through blocker %d)", seed, i, n.BlockedBy, wantBy, b)
					}
					break
				}
			}
		}
		var got []int
		for _, e := range joinedErrors(err) {
			var ne *graph.NodeError[int]
			if !errors.As(e, &ne) {
				t.Fatalf("seed %d: joined error %v is not a NodeError", seed, e)
			}
			got = append(got, ne.ID)
		}
		if !slices.Equal(got, failed) {
			t.Fatalf("seed %d: Run() reports failures %v, want %v", seed, got, failed)
		}
	}
}

func joinedErrors(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

func TestPropertyMaxParallelBoundsRunningNodes(t *testing.T) {
	for seed := uint64(1); seed <= propertyRuns; seed++ {
		r := seeded(seed)
		d := randomDAG(r)
		k := 1 + r.IntN(5)
		var running, peak atomic.Int32
		g := d.build(t, func(i int) graph.Func {
			j := r.Uint64()
			return func(context.Context) error {
				now := running.Add(1)
				for old := peak.Load(); now > old && !peak.CompareAndSwap(old, now); old = peak.Load() {
				}
				jitter(j)
				running.Add(-1)
				return nil
			}
		})
		res, err := g.Run(context.Background(), graph.RunOptions{MaxParallel: k})
		if err != nil || res.Count(graph.Succeeded) != d.n() {
			t.Fatalf("seed %d: error %v, %d/%d succeeded", seed, err, res.Count(graph.Succeeded), d.n())
		}
		if peak.Load() > int32(k) {
			t.Fatalf("seed %d: %d nodes ran at once, MaxParallel %d", seed, peak.Load(), k)
		}
	}
}

func TestPropertyCancelMidRun(t *testing.T) {
	for seed := uint64(1); seed <= propertyRuns; seed++ {
		r := seeded(seed)
		d := randomDAG(r)
		p := []int{0, 1, 2, 4}[r.IntN(4)]
		cancelAt := 1 + r.IntN(d.n())
		fails := make([]bool, d.n())
		for i := range fails {
			fails[i] = r.Float64() < 0.1
		}
		ctx, cancel := context.WithCancel(context.Background())
		var started, late atomic.Int32
		var canceled atomic.Bool
		runs := make([]atomic.Int32, d.n())
		g := d.build(t, func(i int) graph.Func {
			j := r.Uint64()
			return func(context.Context) error {
				runs[i].Add(1)
				if canceled.Load() {
					late.Add(1)
				}
				if started.Add(1) == int32(cancelAt) {
					cancel()
					canceled.Store(true)
				}
				jitter(j)
				if fails[i] {
					return errors.New("fail")
				}
				return nil
			}
		})
		res, err := g.Run(ctx, graph.RunOptions{MaxParallel: p})
		cancel()

		// A node that passed the cancellation check just before cancel()
		// may start just after: at most one per other slot.
		if p > 0 && late.Load() > int32(p-1) {
			t.Fatalf("seed %d: %d nodes started after cancel with MaxParallel %d", seed, late.Load(), p)
		}
		sawCanceled := false
		for i, n := range res.Nodes {
			ran := runs[i].Load()
			switch n.Outcome {
			case graph.Succeeded, graph.Failed:
				if ran != 1 || (n.Outcome == graph.Failed) != fails[i] {
					t.Fatalf("seed %d: node %d %s after %d runs", seed, i, n.Outcome, ran)
				}
			case graph.Canceled, graph.Blocked:
				if ran != 0 {
					t.Fatalf("seed %d: node %d %s but ran", seed, i, n.Outcome)
				}
				sawCanceled = sawCanceled || n.Outcome == graph.Canceled
			default:
				t.Fatalf("seed %d: node %d has outcome %q", seed, i, n.Outcome)
			}
			if ran == 1 {
				for _, b := range d.blockers[i] {
					if res.Nodes[b].Outcome != graph.Succeeded {
						t.Fatalf("seed %d: node %d ran but blocker %d %s", seed, i, b, res.Nodes[b].Outcome)
					}
				}
			}
			if n.Outcome == graph.Blocked && res.Nodes[n.BlockedBy].Outcome != graph.Failed {
				t.Fatalf("seed %d: node %d blocked by %d, which %s", seed, i, n.BlockedBy, res.Nodes[n.BlockedBy].Outcome)
			}
		}
		if sawCanceled != errors.Is(err, context.Canceled) {
			t.Fatalf("seed %d: canceled nodes %v, Run() error %v", seed, sawCanceled, err)
		}
	}
}
