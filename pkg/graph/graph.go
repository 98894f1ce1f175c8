package graph

import (
	"context"
	"slices"
	"sync"
)

// Func is the work of one node. It gets the context passed to Run and returns
// nil on success. A panic or a runtime.Goexit inside it is turned into the
// node's error.
type Func func(ctx context.Context) error

// Options configures New.
type Options struct {
	// SizeHint is the expected number of nodes; the graph pre-allocates for
	// it (and for as many blocker edges). Default 0: grow as nodes are added.
	SizeHint int
}

// Graph is a directed acyclic graph of nodes keyed by ID. Each node has a work
// function and blockers: nodes that must succeed before it runs. Nodes are
// kept in insertion order, which is also a topological order.
//
// The zero value is an empty graph ready to use. AddNode must not be called
// concurrently with any other method; all other methods, Run included, are
// safe to call concurrently with each other.
type Graph[ID comparable] struct {
	ids   []ID
	funcs []Func
	index map[ID]int32
	// The blockers of node i are blockers[blockerStart[i]:blockerStart[i+1]].
	blockerStart []int32
	blockers     []int32

	mu   sync.Mutex
	deps *adjacency // dependents; rebuilt when the node count changed
}

// adjacency is a compressed adjacency list: the neighbours of node i are
// nodes[start[i]:start[i+1]].
type adjacency struct {
	start []int32
	nodes []int32
}

func (a *adjacency) of(i int32) []int32 { return a.nodes[a.start[i]:a.start[i+1]] }

// New returns an empty graph.
func New[ID comparable](opts Options) *Graph[ID] {
	n := max(opts.SizeHint, 0)
	return &Graph[ID]{
		ids:          make([]ID, 0, n),
		funcs:        make([]Func, 0, n),
		index:        make(map[ID]int32, n),
		blockerStart: make([]int32, 1, n+1),
		blockers:     make([]int32, 0, n),
	}
}

// AddNode adds node id with work function fn, blocked by the given nodes,
// which must already be in the graph. Repeated blockers count once.
//
// It returns a *BuildError wrapping ErrDuplicateID if id is already in the
// graph, ErrNilFunc if fn is nil, or ErrUnknownBlocker (naming the first
// unknown blocker) if a blocker is not in the graph, checked in that order.
// On error the graph is unchanged.
func (g *Graph[ID]) AddNode(id ID, fn Func, blockers ...ID) error {
	if g.index == nil {
		g.index = make(map[ID]int32)
		g.blockerStart = []int32{0}
	}
	// Insert first and detect a duplicate by the unchanged map size: one map
	// operation instead of a lookup and an insert.
	i, size := int32(len(g.ids)), len(g.index)
	g.index[id] = i
	if len(g.index) == size {
		g.index[id] = int32(slices.Index(g.ids, id))
		return &BuildError[ID]{Node: id, Err: ErrDuplicateID}
	}
	if fn == nil {
		delete(g.index, id)
		return &BuildError[ID]{Node: id, Err: ErrNilFunc}
	}
	start := len(g.blockers)
	if start+len(blockers) > cap(g.blockers) {
		// Double: append grows large slices by a quarter, copying the
		// edges over and over in a big graph.
		g.blockers = slices.Grow(g.blockers, max(len(blockers), cap(g.blockers)))
	}
	for _, b := range blockers {
		bi, ok := g.index[b]
		if !ok || bi == i {
			delete(g.index, id)
			g.blockers = g.blockers[:start]
			return &BuildError[ID]{Node: id, Blocker: b, Err: ErrUnknownBlocker}
		}
		if !slices.Contains(g.blockers[start:], bi) {
			g.blockers = append(g.blockers, bi)
		}
	}
	g.ids = append(g.ids, id)
	g.funcs = append(g.funcs, fn)
	g.blockerStart = append(g.blockerStart, int32(len(g.blockers)))
	return nil
}

// Len returns the number of nodes.
func (g *Graph[ID]) Len() int { return len(g.ids) }

// Has reports whether id is a node of the graph.
func (g *Graph[ID]) Has(id ID) bool {
	_, ok := g.index[id]
	return ok
}

// IDs returns a copy of the node IDs in insertion order. Blockers always come
// before the nodes they block, so reverse order is a safe teardown order.
func (g *Graph[ID]) IDs() []ID { return slices.Clone(g.ids) }

// Blockers returns the blockers of id in the order given to AddNode, or nil if
// id is not in the graph.
func (g *Graph[ID]) Blockers(id ID) []ID {
	i, ok := g.index[id]
	if !ok {
		return nil
	}
	return g.idsOf(g.blockersOf(i))
}

// Dependents returns the nodes blocked by id, in insertion order, or nil if id
// is not in the graph.
func (g *Graph[ID]) Dependents(id ID) []ID {
	i, ok := g.index[id]
	if !ok {
		return nil
	}
	return g.idsOf(g.dependents().of(i))
}

func (g *Graph[ID]) blockersOf(i int32) []int32 {
	return g.blockers[g.blockerStart[i]:g.blockerStart[i+1]]
}

func (g *Graph[ID]) idsOf(nodes []int32) []ID {
	ids := make([]ID, len(nodes))
	for k, i := range nodes {
		ids[k] = g.ids[i]
	}
	return ids
}

// dependents returns the dependents of every node, each list in insertion
// order. It is computed on first use and cached until nodes are added.
func (g *Graph[ID]) dependents() *adjacency {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := len(g.ids)
	if g.deps != nil && len(g.deps.start) == n+1 {
		return g.deps
	}
	start := make([]int32, n+1)
	for _, b := range g.blockers {
		start[b+1]++
	}
	for i := 1; i <= n; i++ {
		start[i] += start[i-1]
	}
	// Fill using start[b] as the write cursor of b; afterwards start[b] holds
	// the end of b's list, which is the beginning of b+1's: shift by one.
	nodes := make([]int32, len(g.blockers))
	for i := range int32(n) {
		for _, b := range g.blockersOf(i) {
			nodes[start[b]] = i
			start[b]++
		}
	}
	copy(start[1:], start[:n])
	start[0] = 0
	g.deps = &adjacency{start: start, nodes: nodes}
	return g.deps
}
