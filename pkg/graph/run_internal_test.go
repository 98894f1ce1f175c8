package graph

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

// TestRunWorkerCount checks how many workers a run starts: few for quick
// nodes, which never block (a searching worker only gets a processor when one
// is free), and one per node for a layer of nodes that block until they all
// run.
func TestRunWorkerCount(t *testing.T) {
	const n, layer = 10000, 200
	quick := func(context.Context) error { return nil }
	// Each blocking node waits until the whole layer runs.
	var started atomic.Int32
	all := make(chan struct{})
	block := func(ctx context.Context) error {
		if started.Add(1) == layer {
			close(all)
		}
		select {
		case <-all:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	tests := []struct {
		name     string
		fn       Func
		nodes    int
		min, max int32
	}{
		// Each time the garbage collector or the Go scheduler frees a
		// processor, a searching worker runs and may start another: a few
		// per run, never one per node.
		{"quick", quick, n, 1, 100},
		{"blocking", block, layer, layer, layer},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := New[int](Options{SizeHint: tt.nodes})
			for i := range tt.nodes {
				if err := g.AddNode(i, tt.fn); err != nil {
					t.Fatal(err)
				}
			}
			res := &Result[int]{Nodes: make([]NodeResult[int], tt.nodes), g: g, Start: time.Now()}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			s := newRun(ctx, g, RunOptions{}, res)
			s.wake()
			s.wg.Wait()
			if s.started < tt.min || s.started > tt.max {
				t.Errorf("%d workers started for %d nodes on %d processors, want %d to %d",
					s.started, tt.nodes, runtime.GOMAXPROCS(0), tt.min, tt.max)
			}
			if res.Count(Succeeded) != tt.nodes {
				t.Errorf("%d nodes succeeded, want %d", res.Count(Succeeded), tt.nodes)
			}
		})
	}
}
