package controller

import (
	"fmt"
	"slices"
	"strings"

	"github.com/pkg/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kdag-dev/kdag/pkg/apply"
	"github.com/kdag-dev/kdag/pkg/graph"
	"github.com/kdag-dev/kdag/pkg/resources"
)

// RenderedNode is a node of a Plan as a reconcile would apply it (Plan.Render).
type RenderedNode struct {
	PlannedNode
	// Desired is the object the apply engine would get: apply.Desired of the node's object with
	// kdag's labels, owner reference, keep annotation, dependencies hash and desired hash. Nil
	// for a Reference node, which is never written.
	Desired *unstructured.Unstructured
	// Waiting says why a reconcile would not apply the node yet: a Graph.Reference, the node's
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
	if hasKeys(n.GVK) {
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
