package reconciler

import (
	"slices"

	"github.com/kdag-dev/kdag/pkg/graph"
	"github.com/kdag-dev/kdag/pkg/resources"
)

// Dependencies inferred from references: the rules are in controller's infer.go, which authors
// read; the code is here.

// NoInferredDependencies is controller.NoInferredDependencies: no edge inferred from the node's
// references.
func NoInferredDependencies() Option { return func(s *nodeSpec) { s.noInfer = true } }

// inferDependencies adds to each node the edges its references to other nodes imply (see above),
// after the declared ones and in graph order, and reorders the nodes when an inferred blocker was added after its
// dependent. It runs once per graph built, so it reads typed objects only and allocates little.
func (b *Builder) inferDependencies() {
	var refs []graph.NodeID
	var forward [][2]int // dependent, blocker: blocker added after the dependent
	for i, s := range b.nodes {
		if s.reference || s.noInfer {
			continue
		}
		refs = resources.AppendReferences(refs[:0], s.obj, s.id.Namespace)
		for _, id := range refs {
			j, ok := b.index[id]
			if !ok || j == i || s.hasBlocker(j) {
				continue
			}
			if j > i {
				if !slices.Contains(forward, [2]int{i, j}) {
					forward = append(forward, [2]int{i, j})
				}
				continue
			}
			s.blockers = append(s.blockers, Node{id: id, index: j})
			s.inferred++
		}
	}
	if len(forward) == 0 {
		b.sortInferred()
		return
	}
	// An edge to a later node may close a cycle; the others cannot (every edge so far points to
	// an earlier node).
	seen := make([]bool, len(b.nodes))
	added := false
	for _, e := range forward {
		i, j := e[0], e[1]
		clear(seen)
		if b.reaches(j, i, seen) {
			continue
		}
		s := b.nodes[i]
		s.blockers = append(s.blockers, Node{id: b.nodes[j].id, index: j})
		s.inferred++
		added = true
	}
	if added {
		b.sortTopologically()
	}
	b.sortInferred()
}

// sortInferred puts each node's inferred blockers in graph order, as an author would list them,
// whatever the order of the references in the object.
func (b *Builder) sortInferred() {
	for _, s := range b.nodes {
		if s.inferred > 1 {
			slices.SortFunc(s.blockers[len(s.blockers)-s.inferred:], func(x, y Node) int { return x.index - y.index })
		}
	}
}

// hasBlocker reports whether the node already waits for the node at index j.
func (s *nodeSpec) hasBlocker(j int) bool {
	for _, bl := range s.blockers {
		if bl.index == j {
			return true
		}
	}
	return false
}

// inferredBlocker reports whether the k-th blocker of the node was inferred from a reference:
// inferred blockers follow the declared ones.
func (s *nodeSpec) inferredBlocker(k int) bool { return k >= len(s.blockers)-s.inferred }

// reaches reports whether node from waits, directly or through other nodes, for node to.
func (b *Builder) reaches(from, to int, seen []bool) bool {
	if from == to {
		return true
	}
	if seen[from] {
		return false
	}
	seen[from] = true
	for _, bl := range b.nodes[from].blockers {
		if b.reaches(bl.index, to, seen) {
			return true
		}
	}
	return false
}

// sortTopologically reorders the nodes so that each comes after its blockers, moving as few as
// it can: a node keeps its place unless a blocker comes later, and then follows it. Node
// indices in blockers and After lists and the index map follow.
func (b *Builder) sortTopologically() {
	order := make([]int, 0, len(b.nodes))
	placed := make([]bool, len(b.nodes))
	var place func(i int)
	place = func(i int) {
		if placed[i] {
			return
		}
		placed[i] = true
		blockers := make([]int, len(b.nodes[i].blockers))
		for k, bl := range b.nodes[i].blockers {
			blockers[k] = bl.index
		}
		slices.Sort(blockers)
		for _, j := range blockers {
			place(j)
		}
		order = append(order, i)
	}
	for i := range b.nodes {
		place(i)
	}
	moved := make([]int, len(b.nodes)) // old index → new index
	nodes := make([]*nodeSpec, len(b.nodes))
	for to, from := range order {
		moved[from] = to
		nodes[to] = b.nodes[from]
	}
	for i, s := range nodes {
		b.index[s.id] = i
		for k := range s.blockers {
			s.blockers[k].index = moved[s.blockers[k].index]
		}
		for k := range s.after {
			s.after[k].index = moved[s.after[k].index]
		}
	}
	b.nodes = nodes
}
