package controller

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/pkg/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/yaml"

	"github.com/kdag-dev/kdag/pkg/graph"
)

// Plan is the graph a ResourceManager builds for an owner, computed without a cluster: the
// same AddResources code that reconciles, for docs, reviews and the offline `plan` command.
type Plan struct {
	// Nodes in the order AddResources added them, a node moved after a later-added node it
	// references (an inferred blocker): a topological order.
	Nodes []PlannedNode
}

// PlannedNode is one node of a Plan.
type PlannedNode struct {
	ID graph.NodeID
	// GVK is the object's group, version and kind, from the scheme.
	GVK        schema.GroupVersionKind
	Blockers   []graph.NodeID
	CreateOnly bool
	Adopt      bool
	// Keep is the node's deletion policy keep (Keep): orphaned, never deleted.
	Keep bool
	// Recreate is the deletion propagation of the node's Recreate option (an immutable-field
	// change deletes and re-creates the object), "" without it.
	Recreate metav1.DeletionPropagation
	// Finished is a node whose work is done (Finished): never created again.
	Finished bool
	// BeforeDelete is the timeout of a BeforeDelete hook, 0 for any other node: a Job created
	// only by the owner's teardown, never by a reconcile.
	BeforeDelete time.Duration
	// OrderOnly are the blockers given with After: order only, their content not hashed.
	OrderOnly []graph.NodeID
	// Inferred are the blockers the Graph inferred from the object's references to other
	// nodes, not declared; they follow the declared ones in Blockers.
	Inferred []graph.NodeID
	// Protects names the data the node's object opens (ProtectsData), or is the zero graph.NodeID.
	Protects graph.NodeID
	// Reference is a Graph.Reference node: an object kdag needs but never writes.
	Reference bool
	// RequireKeys are the keys a Reference node's object must hold (RequireKeys), sorted.
	RequireKeys []string
	// Object is the object as AddResources added it. Secrets carry their
	// generated values: never print them (see Plan's users for redaction).
	Object client.Object
}

// NewPlan builds owner's graph with rm, as a reconcile does (the same code, the same checks: a
// node of a type rm does not declare in OwnedTypes is a mistake here too), without a cluster.
// mapper may be nil: then every object without a namespace gets the owner's, cluster-scoped kinds
// included. It returns the AddResources error, or a *GraphError listing the Graph mistakes.
func NewPlan[T client.Object](ctx context.Context, rm ResourceManager[T], owner T, scheme *runtime.Scheme, mapper meta.RESTMapper) (*Plan, error) {
	m, err := adapt(rm)
	if err != nil {
		return nil, err
	}
	return newPlan(ctx, m, owner, scheme, mapper)
}

// newPlan is NewPlan with the owner type erased.
func newPlan(ctx context.Context, m manager, owner client.Object, scheme *runtime.Scheme, mapper meta.RESTMapper) (*Plan, error) {
	owned := map[schema.GroupKind]bool{}
	for _, obj := range m.ownedTypes() {
		gvk, err := gvkOf(obj, scheme)
		if err != nil {
			return nil, errors.Wrap(err, "owned type")
		}
		owned[gvk.GroupKind()] = true
	}
	b, err := buildGraph(ctx, m, owner, scheme, mapper, owned)
	if err != nil {
		return nil, err
	}
	p := &Plan{Nodes: make([]PlannedNode, len(b.nodes))}
	for i, s := range b.nodes {
		n := PlannedNode{ID: s.id, GVK: s.gvk, CreateOnly: s.createOnly, Adopt: s.adopt, Keep: s.keep, Reference: s.reference, RequireKeys: s.requireKeys, Object: s.obj}
		if s.recreate != nil {
			n.Recreate = *s.recreate
		}
		for k, bl := range s.blockers {
			n.Blockers = append(n.Blockers, bl.id)
			if s.orderOnly(bl) {
				n.OrderOnly = append(n.OrderOnly, bl.id)
			}
			if s.inferredBlocker(k) {
				n.Inferred = append(n.Inferred, bl.id)
			}
		}
		n.Finished = s.finished
		if s.beforeDelete != nil {
			n.BeforeDelete = *s.beforeDelete
		}
		if s.protects != nil {
			n.Protects = graph.NodeID{Namespace: s.protects.GetNamespace(), Name: s.protects.GetName()}
			if gvk, err := apiutil.GVKForObject(s.protects, scheme); err == nil {
				n.Protects.Group, n.Protects.Kind = gvk.Group, gvk.Kind
			}
			if n.Protects.Namespace == "" {
				n.Protects.Namespace = s.id.Namespace
			}
		}
		p.Nodes[i] = n
	}
	return p, nil
}

// graph returns the plan as a graph with no-op work, for rendering.
func (p *Plan) graph() (*graph.Graph[graph.NodeID], error) {
	g := graph.New[graph.NodeID](graph.Options{SizeHint: len(p.Nodes)})
	noop := func(context.Context) error { return nil }
	for _, n := range p.Nodes {
		if err := g.AddNode(n.ID, noop, n.Blockers...); err != nil {
			return nil, err
		}
	}
	return g, nil
}

// WriteMermaid writes the plan as a Mermaid flowchart, blockers pointing at their dependents,
// inferred edges dotted. The same plan always gives the same bytes.
func (p *Plan) WriteMermaid(w io.Writer) error {
	g, err := p.graph()
	if err != nil {
		return err
	}
	return g.WriteMermaid(w, nil, p.renderOptions())
}

// WriteDOT writes the plan as a Graphviz DOT digraph, inferred edges dashed; same plan,
// same bytes.
func (p *Plan) WriteDOT(w io.Writer) error {
	g, err := p.graph()
	if err != nil {
		return err
	}
	return g.WriteDOT(w, nil, p.renderOptions())
}

// renderOptions labels nodes with their IDs and dashes the inferred edges.
func (p *Plan) renderOptions() graph.RenderOptions[graph.NodeID] {
	inferred := map[[2]graph.NodeID]bool{}
	for _, n := range p.Nodes {
		for _, bl := range n.Inferred {
			inferred[[2]graph.NodeID{bl, n.ID}] = true
		}
	}
	return graph.RenderOptions[graph.NodeID]{
		Label:  graph.NodeID.String,
		Dashed: func(blocker, dependent graph.NodeID) bool { return inferred[[2]graph.NodeID{blocker, dependent}] },
	}
}

// redactedValue replaces every value of a Secret's data and stringData in WriteText.
const redactedValue = "<generated when created; never printed>"

// WriteText writes the plan for reading and for golden files, as multi-document YAML: one
// comment line per node in order, with its blockers and options, then each node's object as a YAML document (status and
// creationTimestamp left out, every Secret value replaced by redactedValue). The same plan
// always gives the same bytes.
func (p *Plan) WriteText(w io.Writer) error {
	var b strings.Builder
	for _, n := range p.Nodes {
		fmt.Fprintf(&b, "# %s%s\n", n.ID, n.describe())
	}
	for _, n := range p.Nodes {
		raw, err := n.yaml()
		if err != nil {
			return errors.Wrapf(err, "render %s", n.ID)
		}
		fmt.Fprintf(&b, "---\n# %s%s\n%s", n.ID, n.describe(), raw)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// String returns the node's ID followed by "  (after A, B; create-only; adopt; keep)" when it has
// blockers or options ("reference: must exist, never written" for a Graph.Reference node); a
// blocker reads "A (order only)" when given with After, "A (inferred)" when inferred from a
// reference.
func (n PlannedNode) String() string { return n.ID.String() + n.describe() }

// describe returns "  (after A, B; create-only; adopt)", or "" for a node with neither
// blockers nor options.
func (n PlannedNode) describe() string {
	var parts []string
	if len(n.Blockers) > 0 {
		names := make([]string, len(n.Blockers))
		for i, b := range n.Blockers {
			names[i] = b.String()
			if slices.Contains(n.OrderOnly, b) {
				names[i] += " (order only)"
			}
			if slices.Contains(n.Inferred, b) {
				names[i] += " (inferred)"
			}
		}
		parts = append(parts, "after "+strings.Join(names, ", "))
	}
	if n.CreateOnly {
		parts = append(parts, "create-only")
	}
	if n.Adopt {
		parts = append(parts, "adopt")
	}
	if n.Keep {
		parts = append(parts, "keep")
	}
	if n.Finished {
		parts = append(parts, "finished")
	}
	if n.BeforeDelete > 0 {
		parts = append(parts, "runs before the owner is deleted (timeout "+n.BeforeDelete.String()+")")
	}
	if n.Recreate != "" {
		parts = append(parts, "recreate on immutable change ("+string(n.Recreate)+")")
	}
	if n.Protects != (graph.NodeID{}) {
		parts = append(parts, "protects "+n.Protects.String())
	}
	if n.Reference {
		parts = append(parts, "reference: must exist, never written")
	}
	if len(n.RequireKeys) > 0 {
		parts = append(parts, "keys "+strings.Join(n.RequireKeys, ", "))
	}
	if len(parts) == 0 {
		return ""
	}
	return "  (" + strings.Join(parts, "; ") + ")"
}

// yaml renders the node's object with its apiVersion and kind, without status and
// creationTimestamp, Secret values redacted.
func (n PlannedNode) yaml() ([]byte, error) {
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(n.Object)
	if err != nil {
		return nil, err
	}
	obj := &unstructured.Unstructured{Object: u}
	obj.SetGroupVersionKind(n.GVK)
	unstructured.RemoveNestedField(obj.Object, "status")
	unstructured.RemoveNestedField(obj.Object, "metadata", "creationTimestamp")
	RedactSecretValues(n.GVK, obj.Object, func(string, string) string { return redactedValue })
	return yaml.Marshal(obj.Object)
}
