package controller

import (
	"context"
	"io"

	"github.com/pkg/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kdag-dev/kdag/pkg/graph"
)

// Plan is the graph a ResourceManager builds for an owner, computed without a cluster: the
// same AddResources code that reconciles, for docs, reviews and the offline `plan` command.
type Plan struct {
	// Nodes in the order AddResources added them (a topological order).
	Nodes []PlannedNode
}

// PlannedNode is one node of a Plan.
type PlannedNode struct {
	ID         NodeID
	Blockers   []NodeID
	CreateOnly bool
	Adopt      bool
	// Object is the object as AddResources added it, before mutations. Secrets carry their
	// generated values: never print them (see Plan's users for redaction).
	Object client.Object
}

// NewPlan calls rm.AddResources for owner and returns the resulting graph. mapper may be nil:
// then every object without a namespace gets the owner's, cluster-scoped kinds included. It returns the AddResources error, or a
// *BuildError listing the Builder mistakes.
func NewPlan(ctx context.Context, rm ResourceManager, owner client.Object, scheme *runtime.Scheme, mapper meta.RESTMapper) (*Plan, error) {
	b := newBuilder(owner, scheme, mapper, nil)
	if err := rm.AddResources(ctx, owner, b); err != nil {
		return nil, errors.Wrap(err, "AddResources")
	}
	if err := b.err(); err != nil {
		return nil, err
	}
	p := &Plan{Nodes: make([]PlannedNode, len(b.nodes))}
	for i, s := range b.nodes {
		n := PlannedNode{ID: s.id, CreateOnly: s.createOnly, Adopt: s.adopt, Object: s.obj}
		for _, bl := range s.blockers {
			n.Blockers = append(n.Blockers, bl.id)
		}
		p.Nodes[i] = n
	}
	return p, nil
}

// graph returns the plan as a graph with no-op work, for rendering.
func (p *Plan) graph() (*graph.Graph[NodeID], error) {
	g := graph.New[NodeID](graph.Options{SizeHint: len(p.Nodes)})
	noop := func(context.Context) error { return nil }
	for _, n := range p.Nodes {
		if err := g.AddNode(n.ID, noop, n.Blockers...); err != nil {
			return nil, err
		}
	}
	return g, nil
}

// WriteMermaid writes the plan as a Mermaid flowchart, blockers pointing at their dependents.
// The same plan always gives the same bytes.
func (p *Plan) WriteMermaid(w io.Writer) error {
	g, err := p.graph()
	if err != nil {
		return err
	}
	return g.WriteMermaid(w, nil, graph.RenderOptions[NodeID]{Label: NodeID.String})
}

// WriteDOT writes the plan as a Graphviz DOT digraph; same plan, same bytes.
func (p *Plan) WriteDOT(w io.Writer) error {
	g, err := p.graph()
	if err != nil {
		return err
	}
	return g.WriteDOT(w, nil, graph.RenderOptions[NodeID]{Label: NodeID.String})
}
