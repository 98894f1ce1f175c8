package graph_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/kdag-dev/kdag/pkg/graph"
)

// BenchmarkRun builds and runs a graph per iteration, with kdag and with the
// baseline engine; for the sleeping nodes also with floor, which is no engine
// (see floorRun). Compare with: benchstat -col /engine.
func BenchmarkRun(b *testing.B) {
	ctx := context.Background()
	sleep := func(context.Context) error { time.Sleep(time.Millisecond); return nil }
	for _, shape := range []string{"chain", "independent", "layered"} {
		for _, n := range []int{100, 1000, 10000} {
			edges := shapeEdges(shape, n)
			for _, engine := range []string{"kdag", "baseline"} {
				b.Run(fmt.Sprintf("shape=%s/n=%d/engine=%s", shape, n, engine), func(b *testing.B) {
					benchRun(b, ctx, engine, edges, noop, 0)
				})
			}
		}
	}
	for _, n := range []int{100, 1000, 10000} {
		edges := shapeEdges("layered", n)
		for _, p := range []int{0, 64} {
			parallel := "unbounded"
			if p > 0 {
				parallel = fmt.Sprint(p)
			}
			for _, engine := range []string{"kdag", "baseline", "floor"} {
				b.Run(fmt.Sprintf("shape=layered-sleep1ms/n=%d/parallel=%s/engine=%s", n, parallel, engine), func(b *testing.B) {
					benchRun(b, ctx, engine, edges, sleep, p)
				})
			}
		}
	}
}

// shapeEdges returns the blockers of each node of a benchmark graph:
// chain: node i is blocked by i-1; independent: no edges; layered: 10 layers
// of n/10 nodes, node j of a layer blocked by nodes j, j+1 and j+2 (mod the
// width) of the previous layer.
func shapeEdges(shape string, n int) [][]int {
	edges := make([][]int, n)
	switch shape {
	case "chain":
		for i := 1; i < n; i++ {
			edges[i] = []int{i - 1}
		}
	case "layered":
		w := n / 10
		for i := w; i < n; i++ {
			prev, j := i-w-i%w, i%w
			edges[i] = []int{prev + j, prev + (j+1)%w, prev + (j+2)%w}
		}
	}
	return edges
}

func benchRun(b *testing.B, ctx context.Context, engine string, edges [][]int, fn graph.Func, maxParallel int) {
	n, nedges := len(edges), 0
	for _, blockers := range edges {
		nedges += len(blockers)
	}
	b.ReportAllocs()
	switch engine {
	case "kdag":
		for b.Loop() {
			g := graph.New[int](graph.Options{SizeHint: n, EdgeHint: nedges})
			for i, blockers := range edges {
				if err := g.AddNode(i, fn, blockers...); err != nil {
					b.Fatal(err)
				}
			}
			if _, err := g.Run(ctx, graph.RunOptions{MaxParallel: maxParallel}); err != nil {
				b.Fatal(err)
			}
		}
	case "floor":
		for b.Loop() {
			floorRun(ctx, n, fn, maxParallel)
		}
	case "baseline":
		for b.Loop() {
			g := newBaseline(n)
			for i, blockers := range edges {
				if err := g.add(i, fn, blockers...); err != nil {
					b.Fatal(err)
				}
			}
			if err := g.run(ctx, maxParallel); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/node")
}

// floorRun is not an engine but the lower bound of any engine on the layered
// shape: it calls fn n times on as many goroutines as could run nodes at once
// (one per column of the 10 layers, or maxParallel if set and smaller), each
// calling fn back to back for its share of the nodes, ignoring the
// dependencies and without any coordination but a final wait. Unbounded, each
// goroutine makes the 10 calls of the critical path; with maxParallel, each
// makes n/maxParallel calls.
func floorRun(ctx context.Context, n int, fn graph.Func, maxParallel int) {
	workers := n / 10
	if maxParallel > 0 && maxParallel < workers {
		workers = maxParallel
	}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < n; i += workers {
				_ = fn(ctx)
			}
		})
	}
	wg.Wait()
}

// baseline is the design kdag replaces (as in Harbor Operator): one goroutine
// per node, which waits on a done channel per blocker, runs the node and
// closes its own channel; a blocker's error is passed on to its dependents.
// With maxParallel, a node takes a semaphore slot once its blockers are done.
type baseline struct {
	index map[int]*baselineNode
	nodes []*baselineNode
}

type baselineNode struct {
	id       int
	fn       graph.Func
	blockers []*baselineNode
	done     chan struct{}
	err      error
}

func newBaseline(n int) *baseline {
	return &baseline{index: make(map[int]*baselineNode, n), nodes: make([]*baselineNode, 0, n)}
}

func (g *baseline) add(id int, fn graph.Func, blockers ...int) error {
	if _, ok := g.index[id]; ok {
		return graph.ErrDuplicateID
	}
	nd := &baselineNode{id: id, fn: fn, done: make(chan struct{}), blockers: make([]*baselineNode, len(blockers))}
	for k, b := range blockers {
		if nd.blockers[k] = g.index[b]; nd.blockers[k] == nil {
			return graph.ErrUnknownBlocker
		}
	}
	g.index[id] = nd
	g.nodes = append(g.nodes, nd)
	return nil
}

func (g *baseline) run(ctx context.Context, maxParallel int) error {
	var sem chan struct{}
	if maxParallel > 0 {
		sem = make(chan struct{}, maxParallel)
	}
	var wg sync.WaitGroup
	for _, nd := range g.nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer close(nd.done)
			for _, b := range nd.blockers {
				<-b.done
				if b.err != nil {
					nd.err = b.err
					return
				}
			}
			if sem != nil {
				sem <- struct{}{}
				defer func() { <-sem }()
			}
			defer func() {
				if v := recover(); v != nil {
					nd.err = fmt.Errorf("node %d panicked: %v", nd.id, v)
				}
			}()
			if err := nd.fn(ctx); err != nil {
				nd.err = fmt.Errorf("node %d: %w", nd.id, err)
			}
		}()
	}
	wg.Wait()
	var errs []error
	for _, nd := range g.nodes {
		if nd.err != nil {
			errs = append(errs, nd.err)
		}
	}
	return errors.Join(errs...)
}

// TestBaseline checks that the benchmark's baseline engine is a fair one: it
// runs nodes after their blockers and blocks descendants of failures.
func TestBaseline(t *testing.T) {
	var mu sync.Mutex
	var order []int
	fn := func(i int) graph.Func {
		return func(context.Context) error {
			mu.Lock()
			defer mu.Unlock()
			order = append(order, i)
			if i == 3 {
				return errors.New("boom")
			}
			return nil
		}
	}
	for _, p := range []int{0, 2} {
		order = nil
		g := newBaseline(0)
		for i, blockers := range [][]int{nil, {0}, {1}, {0}, {3, 2}} {
			if err := g.add(i, fn(i), blockers...); err != nil {
				t.Fatal(err)
			}
		}
		if err := g.run(context.Background(), p); err == nil || len(order) != 4 || order[0] != 0 {
			t.Errorf("baseline ran %v, error %v", order, err)
		}
	}
}
