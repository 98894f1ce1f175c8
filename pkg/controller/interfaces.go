package controller

import (
	"context"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"sigs.k8s.io/controller-runtime/pkg/client"

	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
)

// ResourceManager is what an operator author writes: it names the owner type and lists the
// objects an owner needs, with their dependencies. The Controller calls it on every reconcile.
type ResourceManager interface {
	// NewEmpty returns a new, empty object of the owner type (the reconciled custom resource),
	// for example &v1alpha1.Gitea{}. It is called for every request and must not share state.
	NewEmpty() client.Object
	// AddResources adds to b the objects owner needs (b.Add) with their blockers (DependsOn).
	// owner is a deep copy from the cache: reading it is free, changing it has no effect. It must
	// not call the API server for objects it adds: the Controller reads and writes them.
	//
	// A returned error fails the reconcile: wrapped with reconcile.TerminalError it marks the
	// owner Stalled and waits for the owner to change; any other error is retried with backoff.
	AddResources(ctx context.Context, owner client.Object, b *Builder) error
}

// Validator is an optional ResourceManager interface for semantic checks the API server's schema
// and CEL rules cannot express (for example, names derived from the owner's name must be valid).
type Validator interface {
	// Validate returns nil when owner can be reconciled; no object is applied otherwise. An
	// error wrapped with reconcile.TerminalError says the spec can never work: the owner is
	// Stalled (reason Invalid) with the error as message, a Warning event is emitted, and the
	// reconcile is not retried until the owner changes; say what to change in the message. Any
	// other error is transient (a Secret the check reads does not exist yet): the owner is
	// Ready=False and Reconciling=True (reason ValidationFailed) and the reconcile is retried
	// with backoff. This is the rule AddResources errors follow too (design.md §2.9).
	Validate(ctx context.Context, owner client.Object) error
}

// Cleaner is an optional ResourceManager interface for cleanup that owner references cannot do
// (external resources, objects in other namespaces). When implemented, the Controller holds a
// finalizer on every owner, deletes the owner's objects in reverse dependency order once the
// owner is deleted, then calls Cleanup, then removes the finalizer.
type Cleaner interface {
	// Cleanup releases what owner holds outside its objects. An error is reported (event and
	// condition) and retried with backoff; the finalizer stays until Cleanup returns nil, so
	// Cleanup must be idempotent.
	Cleanup(ctx context.Context, owner client.Object) error
}

// OwnedTypes is an optional ResourceManager interface that declares the types of the objects
// AddResources may add. The Controller watches them (owner references lead back to the owner),
// prunes among them, and refuses a node of an undeclared type. Without it, pass WithOwnedTypes.
type OwnedTypes interface {
	// OwnedTypes returns one empty object per owned type, for example &appsv1.Deployment{}.
	OwnedTypes() []client.Object
}

// StatusReporter is an optional ResourceManager interface for status fields of the owner's own
// (a component's outputs, the state of a long operation), written in the same status apply as
// kdag's block and only when something changed.
type StatusReporter interface {
	// ReportStatus returns a pointer to a struct whose JSON fields are merged into the owner's
	// status, or nil for none. report describes the graph of this reconcile. It must be a pure
	// function of owner and report (no API calls), and must not return secret values.
	ReportStatus(ctx context.Context, owner client.Object, report Report) (any, error)
}

// Report is what a reconcile found, for StatusReporter.
type Report struct {
	// Ready is true when every node is applied and ready.
	Ready bool
	// Nodes in graph order.
	Nodes []NodeReport
}

// NodeReport is one node of a Report.
type NodeReport struct {
	ID    NodeID
	State kdagv1alpha1.NodeState
	// Object is the node's object as applied or read from the cache; nil when the node did
	// not run (blocked, canceled) or failed before reading it.
	Object *unstructured.Unstructured
}

// Node returns the report of the node with kind and name (in the owner's namespace or any), or
// nil.
func (r Report) Node(kind, name string) *NodeReport {
	for i := range r.Nodes {
		if r.Nodes[i].ID.Kind == kind && r.Nodes[i].ID.Name == name {
			return &r.Nodes[i]
		}
	}
	return nil
}
