package graph_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/kdag-dev/kdag/pkg/graph"
)

// FuzzBuild reads data as a list of AddNode calls: an ID byte, a flags byte
// (bit 0: nil function; bits 1-2: number of blockers) and that many blocker
// bytes. Invalid calls must fail with the right typed error and leave the
// graph unchanged; the built graph must run every node once, successfully,
// after its blockers.
func FuzzBuild(f *testing.F) {
	f.Add([]byte{1, 0, 2, 2, 1})             // a -> b
	f.Add([]byte{1, 0, 1, 0, 2, 6, 1, 1, 1}) // duplicate ID, repeated blocker
	f.Add([]byte{1, 1, 2, 2, 9})             // nil function, unknown blocker
	f.Add([]byte{5, 2, 5, 7, 0, 8, 4, 7, 7}) // self-blocker, diamond-ish
	f.Add([]byte{0, 0, 1, 2, 0, 2, 4, 0, 1, 3, 6, 0, 1, 2})
	f.Fuzz(func(t *testing.T, data []byte) {
		g := graph.New[byte](graph.Options{})
		added := map[byte][]byte{} // node -> blockers, deduplicated
		var order []byte
		runs := make([]atomic.Int32, 256)
		done := make([]atomic.Bool, 256)
		var early atomic.Int32

		for len(data) >= 2 {
			id, flags := data[0], data[1]
			k := min(int(flags>>1&3), len(data)-2)
			blockers := data[2 : 2+k]
			data = data[2+k:]

			var fn graph.Func
			if flags&1 == 0 {
				fn = func(context.Context) error {
					runs[id].Add(1)
					for _, b := range added[id] {
						if !done[b].Load() {
							early.Add(1)
						}
					}
					done[id].Store(true)
					return nil
				}
			}
			var want error
			var unknown byte
			if _, ok := added[id]; ok {
				want = graph.ErrDuplicateID
			} else if fn == nil {
				want = graph.ErrNilFunc
			} else {
				for _, b := range blockers {
					if _, ok := added[b]; !ok {
						want, unknown = graph.ErrUnknownBlocker, b
						break
					}
				}
			}

			err := g.AddNode(id, fn, blockers...)
			if want == nil {
				if err != nil {
					t.Fatalf("AddNode(%d, %v) = %v, want nil", id, blockers, err)
				}
				var dedup []byte
				for _, b := range blockers {
					if !contains(dedup, b) {
						dedup = append(dedup, b)
					}
				}
				added[id] = dedup
				order = append(order, id)
				continue
			}
			var be *graph.BuildError[byte]
			if !errors.Is(err, want) || !errors.As(err, &be) || be.Node != id || be.Blocker != unknown {
				t.Fatalf("AddNode(%d, %v) = %#v, want %v", id, blockers, err, want)
			}
			if g.Len() != len(order) {
				t.Fatalf("failed AddNode changed the graph: %d nodes, want %d", g.Len(), len(order))
			}
		}

		res, err := g.Run(context.Background(), graph.RunOptions{MaxParallel: len(order) % 3})
		if err != nil || early.Load() != 0 {
			t.Fatalf("Run() error = %v, %d nodes ran early", err, early.Load())
		}
		for i, id := range order {
			n := res.Nodes[i]
			if n.ID != id || n.Outcome != graph.Succeeded || runs[id].Load() != 1 {
				t.Fatalf("node %d: %+v after %d runs", id, n, runs[id].Load())
			}
			if got := g.Blockers(id); string(got) != string(added[id]) {
				t.Fatalf("Blockers(%d) = %v, want %v", id, got, added[id])
			}
		}
	})
}

func contains(s []byte, b byte) bool {
	for _, x := range s {
		if x == b {
			return true
		}
	}
	return false
}
