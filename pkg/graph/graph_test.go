package graph_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/kdag-dev/kdag/pkg/graph"
)

func noop(context.Context) error { return nil }

func TestAddNodeErrors(t *testing.T) {
	tests := []struct {
		name     string
		id       string
		fn       graph.Func
		blockers []string
		want     error
		blocker  string
	}{
		{name: "duplicate ID", id: "a", fn: noop, want: graph.ErrDuplicateID},
		{name: "duplicate ID wins over nil func", id: "a", want: graph.ErrDuplicateID},
		{name: "nil func", id: "x", want: graph.ErrNilFunc},
		{name: "nil func wins over unknown blocker", id: "x", blockers: []string{"nope"}, want: graph.ErrNilFunc},
		{name: "unknown blocker", id: "x", fn: noop, blockers: []string{"a", "nope", "b"}, want: graph.ErrUnknownBlocker, blocker: "nope"},
		{name: "self as blocker", id: "x", fn: noop, blockers: []string{"x"}, want: graph.ErrUnknownBlocker, blocker: "x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := graph.New[string](graph.Options{})
			mustAdd(t, g, "a", noop)
			mustAdd(t, g, "b", noop, "a")

			err := g.AddNode(tt.id, tt.fn, tt.blockers...)
			if !errors.Is(err, tt.want) {
				t.Fatalf("AddNode(%q) = %v, want errors.Is %v", tt.id, err, tt.want)
			}
			var be *graph.BuildError[string]
			if !errors.As(err, &be) {
				t.Fatalf("AddNode(%q) = %T, want *graph.BuildError[string]", tt.id, err)
			}
			if be.Node != tt.id || be.Blocker != tt.blocker {
				t.Errorf("BuildError{Node: %q, Blocker: %q}, want {%q, %q}", be.Node, be.Blocker, tt.id, tt.blocker)
			}
			// A failed AddNode leaves the graph unchanged.
			if got := g.IDs(); !slices.Equal(got, []string{"a", "b"}) {
				t.Errorf("IDs() = %v after failed AddNode, want [a b]", got)
			}
			if got := g.Dependents("a"); !slices.Equal(got, []string{"b"}) {
				t.Errorf("Dependents(a) = %v after failed AddNode, want [b]", got)
			}
		})
	}
}

func TestBuildErrorMessages(t *testing.T) {
	g := graph.New[string](graph.Options{})
	mustAdd(t, g, "db", noop)
	for _, tc := range []struct {
		err  error
		want string
	}{
		{g.AddNode("web", noop, "cache"), "graph: add node web: unknown blocker cache"},
		{g.AddNode("db", noop), "graph: add node db: duplicate node ID"},
		{g.AddNode("web", nil), "graph: add node web: nil node function"},
	} {
		if tc.err == nil || tc.err.Error() != tc.want {
			t.Errorf("error = %v, want %q", tc.err, tc.want)
		}
	}
}

func TestStructure(t *testing.T) {
	var g graph.Graph[int] // the zero value is ready to use
	mustAdd(t, &g, 1, noop)
	mustAdd(t, &g, 2, noop, 1)
	mustAdd(t, &g, 3, noop, 1, 1, 2) // the repeated blocker counts once
	mustAdd(t, &g, 4, noop, 3)

	if got, want := g.IDs(), []int{1, 2, 3, 4}; !slices.Equal(got, want) {
		t.Errorf("IDs() = %v, want %v", got, want)
	}
	if g.Len() != 4 || !g.Has(3) || g.Has(5) {
		t.Errorf("Len() = %d, Has(3) = %v, Has(5) = %v", g.Len(), g.Has(3), g.Has(5))
	}
	for _, tc := range []struct {
		id                   int
		blockers, dependents []int
	}{
		{1, []int{}, []int{2, 3}},
		{2, []int{1}, []int{3}},
		{3, []int{1, 2}, []int{4}},
		{4, []int{3}, []int{}},
		{5, nil, nil},
	} {
		if got := g.Blockers(tc.id); !slices.Equal(got, tc.blockers) || (got == nil) != (tc.blockers == nil) {
			t.Errorf("Blockers(%d) = %#v, want %#v", tc.id, got, tc.blockers)
		}
		if got := g.Dependents(tc.id); !slices.Equal(got, tc.dependents) || (got == nil) != (tc.dependents == nil) {
			t.Errorf("Dependents(%d) = %#v, want %#v", tc.id, got, tc.dependents)
		}
	}

	// Accessors return copies.
	g.IDs()[0] = 99
	g.Blockers(3)[0] = 99
	if g.IDs()[0] != 1 || g.Blockers(3)[0] != 1 {
		t.Error("accessors expose the graph's slices")
	}

	// Dependents follow nodes added after the first call.
	mustAdd(t, &g, 5, noop, 1)
	if got, want := g.Dependents(1), []int{2, 3, 5}; !slices.Equal(got, want) {
		t.Errorf("Dependents(1) after AddNode = %v, want %v", got, want)
	}
}

func mustAdd[ID comparable](t testing.TB, g *graph.Graph[ID], id ID, fn graph.Func, blockers ...ID) {
	t.Helper()
	if err := g.AddNode(id, fn, blockers...); err != nil {
		t.Fatal(err)
	}
}

// TestAddNodeWithHintsDoesNotAllocate checks that SizeHint and EdgeHint
// pre-allocate everything AddNode needs: building costs the allocations of
// New only.
func TestAddNodeWithHintsDoesNotAllocate(t *testing.T) {
	const n = 1000
	blockers := make([][]int, n)
	for i := 3; i < n; i++ {
		blockers[i] = []int{i - 3, i - 2, i - 1}
	}
	opts := graph.Options{SizeHint: n, EdgeHint: 3 * (n - 3)}
	newOnly := testing.AllocsPerRun(5, func() { graph.New[int](opts) })
	build := testing.AllocsPerRun(5, func() {
		g := graph.New[int](opts)
		for i := range n {
			if err := g.AddNode(i, noop, blockers[i]...); err != nil {
				t.Fatal(err)
			}
		}
	})
	if build != newOnly {
		t.Errorf("building %d nodes allocates %v times, New alone %v", n, build, newOnly)
	}
}
