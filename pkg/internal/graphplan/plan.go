// Package graphplan holds the plan of an owner's graph: what pkg/controller builds from a
// ResourceManager without a cluster and pkg/plan renders, dry-runs and prints. It sits below both
// (pkg/plan re-exports its types: plan.Plan, plan.PlannedNode, plan.RenderedNode), so that
// pkg/controller does not import pkg/plan, which imports pkg/controller's components.
package graphplan

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/pkg/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/kdag-dev/kdag/pkg/apply"
	"github.com/kdag-dev/kdag/pkg/graph"
	"github.com/kdag-dev/kdag/pkg/resources"
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
	// Keep is the node's deletion policy keep (controller.Keep): orphaned, never deleted.
	Keep bool
	// Recreate is the deletion propagation of the node's controller.Recreate option (an immutable-field
	// change deletes and re-creates the object), "" without it.
	Recreate metav1.DeletionPropagation
	// Finished is a node whose work is done (controller.Finished): never created again.
	Finished bool
	// BeforeDelete is the timeout of a BeforeDelete hook, 0 for any other node: a Job created
	// only by the owner's teardown, never by a reconcile.
	BeforeDelete time.Duration
	// OrderOnly are the blockers given with After: order only, their content not hashed.
	OrderOnly []graph.NodeID
	// Inferred are the blockers the Graph inferred from the object's references to other
	// nodes, not declared; they follow the declared ones in Blockers.
	Inferred []graph.NodeID
	// Protects names the data the node's object opens (controller.ProtectsData), or is the zero graph.NodeID.
	Protects graph.NodeID
	// Reference is a controller.Graph.Reference node: an object kdag needs but never writes.
	Reference bool
	// RequireKeys are the keys a Reference node's object must hold (controller.RequireKeys), sorted.
	RequireKeys []string
	// Object is the object as AddResources added it. Secrets carry their
	// generated values: never print them (see Plan's users for redaction).
	Object client.Object
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
// blockers or options ("reference: must exist, never written" for a controller.Graph.Reference node); a
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

// RenderedNode is a node of a Plan as a reconcile would apply it (Plan.Render).
type RenderedNode struct {
	PlannedNode
	// Desired is the object the apply engine would get: apply.Desired of the node's object with
	// kdag's labels, owner reference, keep annotation, dependencies hash and desired hash. Nil
	// for a Reference node, which is never written.
	Desired *unstructured.Unstructured
	// Waiting says why a reconcile would not apply the node yet: a controller.Graph.Reference, the node's
	// own or a blocker's (at any depth), that does not exist or lacks a required key. "" when
	// nothing holds it back that the plan can see (readiness is not predicted).
	Waiting string
}

// Render returns the nodes of p, in p's order, as a reconcile of owner would apply them (the
// live plan dry-runs exactly these objects). live returns the object of a node as the cluster
// holds it, or nil when it does not exist; it is called for create-only, finished and
// Reference nodes, whose content comes from the cluster as in a reconcile:
//
//   - a node kdag renders feeds its dependents the content hash of its desired object;
//   - a create-only node the content of its live object, or of its desired object when it does
//     not exist yet (what it would be created with; a value the API server generates would
//     differ);
//   - a finished node whose object is gone feeds "", as the reconcile does;
//   - a Reference node the content of the keys it requires (all of a Secret's or ConfigMap's
//     data without RequireKeys, another kind's spec); one that does not exist or lacks a key
//     feeds "" and marks itself and its dependents Waiting.
//
// scheme must know owner's type. It returns an error naming the node when an object cannot be
// converted or hashed (apply.Desired, resources.ContentHash).
func (p *Plan) Render(owner apply.Owner, scheme *runtime.Scheme, live func(graph.NodeID) *unstructured.Unstructured) ([]RenderedNode, error) {
	out := make([]RenderedNode, len(p.Nodes))
	index := make(map[graph.NodeID]int, len(p.Nodes))
	content := make([]string, len(p.Nodes))
	for i, n := range p.Nodes {
		index[n.ID] = i
		r := RenderedNode{PlannedNode: n}
		hashes := map[string]string{}
		for _, b := range n.Blockers {
			j, ok := index[b]
			if !ok {
				return nil, errors.Errorf("%s: blocker %s is not before it in the plan", n.ID, b)
			}
			if r.Waiting == "" && out[j].Waiting != "" {
				r.Waiting = out[j].Waiting
			}
			if !slices.Contains(n.OrderOnly, b) {
				hashes[b.String()] = content[j]
			}
		}
		depHash := ""
		if len(hashes) > 0 {
			depHash = resources.CombineHashes(hashes)
		}
		var err error
		if n.Reference {
			var waiting string
			content[i], waiting, err = referenceContent(n, live(n.ID))
			if r.Waiting == "" {
				r.Waiting = waiting
			}
			if err != nil {
				return nil, err
			}
			out[i] = r
			continue
		}
		r.Desired, err = apply.Desired(owner, n.Object, n.GVK, scheme, apply.DesiredOptions{Keep: n.Keep, DependenciesHash: depHash})
		if err != nil {
			return nil, err
		}
		hashed := r.Desired
		if n.CreateOnly || n.Finished {
			switch l := live(n.ID); {
			case l == nil && n.Finished:
				hashed = nil
			case l != nil && n.CreateOnly:
				hashed = l
			}
		}
		if hashed != nil {
			if content[i], err = resources.ContentHash(hashed); err != nil {
				return nil, errors.Wrapf(err, "%s: hash content", n.ID)
			}
		}
		out[i] = r
	}
	return out, nil
}

// referenceContent returns the content hash of a Reference node's object u as the reconcile
// computes it (references.content), or "" and why the reconcile would wait when u is nil or
// lacks a required key.
func referenceContent(n PlannedNode, u *unstructured.Unstructured) (hash, waiting string, err error) {
	if u == nil {
		return "", n.ID.String() + " does not exist", nil
	}
	hashed := u
	if resources.HasDataKeys(n.GVK) {
		selected, missing, err := resources.SelectKeys(u, n.RequireKeys)
		if err != nil {
			return "", "", errors.Wrapf(err, "%s: select keys", n.ID)
		}
		if len(missing) > 0 {
			return "", fmt.Sprintf("%s lacks keys %s", n.ID, strings.Join(missing, ", ")), nil
		}
		hashed = selected
	}
	hash, err = resources.ContentHash(hashed)
	return hash, "", errors.Wrapf(err, "%s: hash content", n.ID)
}

// RedactSecretValues replaces, when gvk is a core/v1 Secret, every value of obj's data and
// stringData with placeholder(field, key) (field "data" or "stringData"), in place; other kinds
// are left alone. It is how Plan.WriteText and the live plan never print a Secret's
// values, its diffs included.
func RedactSecretValues(gvk schema.GroupVersionKind, obj map[string]any, placeholder func(field, key string) string) {
	if gvk.Group != "" || gvk.Kind != "Secret" {
		return
	}
	for _, field := range []string{"data", "stringData"} {
		values, ok := obj[field].(map[string]any)
		if !ok {
			continue
		}
		for k := range values {
			values[k] = placeholder(field, k)
		}
	}
}
