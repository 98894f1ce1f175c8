package graph

import (
	"context"
	"slices"
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
	// EdgeHint is the expected number of edges: the sum over the nodes of
	// their blockers. The graph pre-allocates for it. Default 0: for
	// SizeHint edges, then for SizeHint nodes with one and a half times as
	// many edges as the nodes added so far have.
	EdgeHint int
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
	index index[ID]
	// The blockers of node i are blockers[blockerStart[i]:blockerStart[i+1]].
	blockerStart []int32
	blockers     []int32
	// The dependents of node i, latest first: the edges e = firstDep[i],
	// dep[e].next, ... until -1, each from node dep[e].node. The edge
	// blockers[e] is the same as dep[e], seen from the other end.
	firstDep []int32
	dep      []depEdge
	sizeHint int // Options.SizeHint
}

// depEdge is one blocker edge seen from the blocker: the node it blocks and
// the blocker's next (earlier) edge, or -1.
type depEdge struct{ node, next int32 }

// New returns an empty graph.
func New[ID comparable](opts Options) *Graph[ID] {
	n, edges := max(opts.SizeHint, 0), max(opts.EdgeHint, 0)
	if edges == 0 {
		edges = n
	}
	g := &Graph[ID]{
		ids:          make([]ID, 0, n),
		funcs:        make([]Func, 0, n),
		blockerStart: make([]int32, 1, n+1),
		blockers:     make([]int32, 0, edges),
		firstDep:     make([]int32, 0, n),
		dep:          make([]depEdge, 0, edges),
	}
	g.index.init(n)
	g.sizeHint = n
	return g
}

// AddNode adds node id with work function fn, blocked by the given nodes,
// which must already be in the graph. Repeated blockers count once.
//
// It returns a *BuildError wrapping ErrDuplicateID if id is already in the
// graph, ErrNilFunc if fn is nil, or ErrUnknownBlocker (naming the first
// unknown blocker) if a blocker is not in the graph, checked in that order.
// On error the graph is unchanged.
func (g *Graph[ID]) AddNode(id ID, fn Func, blockers ...ID) error {
	if g.index.slots == nil {
		g.index.init(0)
		g.blockerStart = []int32{0}
	}
	i := int32(len(g.ids))
	j, slot := g.index.find(g.ids, id)
	if j >= 0 {
		return &BuildError[ID]{Node: id, Err: ErrDuplicateID}
	}
	if fn == nil {
		return &BuildError[ID]{Node: id, Err: ErrNilFunc}
	}
	start := len(g.blockers)
	if start+len(blockers) > cap(g.blockers) {
		g.growEdges(len(blockers))
	}
	last := int32(-1) // the blocker before
	for _, b := range blockers {
		bi, ok := g.lookup(b, last)
		last = bi
		if !ok {
			g.blockers = g.blockers[:start]
			return &BuildError[ID]{Node: id, Blocker: b, Err: ErrUnknownBlocker}
		}
		if !slices.Contains(g.blockers[start:], bi) {
			g.blockers = append(g.blockers, bi)
		}
	}
	for e := start; e < len(g.blockers); e++ {
		b := g.blockers[e]
		g.dep = append(g.dep, depEdge{node: i, next: g.firstDep[b]})
		g.firstDep[b] = int32(e)
	}
	g.ids = append(g.ids, id)
	g.index.insert(g.ids, slot, i)
	g.funcs = append(g.funcs, fn)
	g.blockerStart = append(g.blockerStart, int32(len(g.blockers)))
	g.firstDep = append(g.firstDep, -1)
	return nil
}

// growEdges makes room for k more edges. Until the graph has SizeHint nodes
// it sizes the edge slices for SizeHint nodes with one and a half times as
// many edges per node as so far, else it doubles them: append would grow
// large slices by a quarter, copying the edges over and over.
func (g *Graph[ID]) growEdges(k int) {
	n, edges := len(g.ids), len(g.blockers)
	want := max(edges+k, 2*cap(g.blockers))
	if n > 0 && g.sizeHint > n {
		want = max(edges+k, (edges+k)*g.sizeHint/n*3/2)
	}
	g.blockers = slices.Grow(g.blockers, want-edges)
	g.dep = slices.Grow(g.dep, want-len(g.dep))
}

// lookup returns the index of blocker id of a new node; after is the index
// of the blocker given before it, or -1. Blockers are often given in the order
// they were added, a node is often blocked by the node added just before it
// (a chain), and consecutive nodes often share blockers (the objects of one
// namespace), so lookup compares id with those nodes before it hashes:
// comparing is cheaper.
func (g *Graph[ID]) lookup(id ID, after int32) (int32, bool) {
	if n := int32(len(g.ids)); n > 0 {
		if after >= 0 && after+1 < n && g.ids[after+1] == id {
			return after + 1, true
		}
		if g.ids[n-1] == id {
			return n - 1, true
		}
		prev := g.blockersOf(n - 1)
		for _, b := range prev[:min(len(prev), 4)] {
			if g.ids[b] == id {
				return b, true
			}
		}
	}
	return g.index.lookup(g.ids, id)
}

// Len returns the number of nodes.
func (g *Graph[ID]) Len() int { return len(g.ids) }

// Has reports whether id is a node of the graph.
func (g *Graph[ID]) Has(id ID) bool {
	_, ok := g.index.lookup(g.ids, id)
	return ok
}

// IDs returns a copy of the node IDs in insertion order. Blockers always come
// before the nodes they block, so reverse order is a safe teardown order.
func (g *Graph[ID]) IDs() []ID { return slices.Clone(g.ids) }

// Blockers returns the blockers of id in the order given to AddNode, or nil if
// id is not in the graph.
func (g *Graph[ID]) Blockers(id ID) []ID {
	i, ok := g.index.lookup(g.ids, id)
	if !ok {
		return nil
	}
	return g.idsOf(g.blockersOf(i))
}

// Dependents returns the nodes blocked by id, in insertion order, or nil if id
// is not in the graph.
func (g *Graph[ID]) Dependents(id ID) []ID {
	i, ok := g.index.lookup(g.ids, id)
	if !ok {
		return nil
	}
	var ids []ID
	for e := g.firstDep[i]; e >= 0; e = g.dep[e].next {
		ids = append(ids, g.ids[g.dep[e].node])
	}
	slices.Reverse(ids)
	if ids == nil {
		ids = []ID{}
	}
	return ids
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
