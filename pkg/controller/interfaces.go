package controller

import (
	"context"
	"reflect"

	"github.com/pkg/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/controller/internal/reconciler"
)

// ResourceManager is what an operator author writes for one owner type T, a pointer to the Go
// type of the reconciled custom resource (*v1alpha1.Valkey): the types of the objects an owner
// has, and the objects themselves with their dependencies. The reconciler calls it on every
// reconcile; For infers T from it.
type ResourceManager[T client.Object] interface {
	// OwnedTypes returns one empty object per type AddResources may add, for example
	// &appsv1.Deployment{}. The reconciler watches them (owner references, or kdag's labels,
	// lead back to the owner), prunes among them and refuses a node of another type; CacheOptions
	// keeps only kdag's objects of these types in the manager's cache, and Setup checks at start
	// that the manager's RBAC allows what the reconciler does with them. Declare each type here
	// only: everything else comes from this list.
	OwnedTypes() []client.Object
	// AddResources adds to b the objects owner needs (b.Add) with their blockers (DependsOn,
	// After) and the objects it reads but does not own (b.Reference). owner is a deep copy from
	// the cache: reading it is free, changing it has no effect. It must not call the API server
	// for objects it adds: the reconciler reads and writes them.
	//
	// A returned error fails the reconcile: wrapped with reconcile.TerminalError it marks the
	// owner Stalled and waits for the owner to change; any other error is retried with backoff.
	AddResources(ctx context.Context, owner T, b *Graph) error
}

// Validator is an optional ResourceManager interface for semantic checks the API server's schema
// and CEL rules cannot express (for example, names derived from the owner's name must be valid).
type Validator[T client.Object] interface {
	// Validate returns nil when owner can be reconciled; no object is applied otherwise. An
	// error wrapped with reconcile.TerminalError says the spec can never work: the owner is
	// Stalled (reason Invalid) with the error as message, a Warning event is emitted, and the
	// reconcile is not retried until the owner changes; say what to change in the message. Any
	// other error is transient (a Secret the check reads does not exist yet): the owner is
	// Ready=False and Reconciling=True (reason ValidationFailed) and the reconcile is retried
	// with backoff. This is the rule AddResources errors follow too (design.md §2.9).
	Validate(ctx context.Context, owner T) error
}

// Cleaner is an optional ResourceManager interface for cleanup that owner references cannot do
// (external resources). When implemented, the reconciler holds a finalizer on every owner,
// deletes the owner's objects in reverse dependency order once the owner is deleted, then calls
// Cleanup, then removes the finalizer.
type Cleaner[T client.Object] interface {
	// Cleanup releases what owner holds outside its objects. An error is reported (event and
	// condition) and retried with backoff; the finalizer stays until Cleanup returns nil, so
	// Cleanup must be idempotent.
	Cleanup(ctx context.Context, owner T) error
}

// StatusReporter is an optional ResourceManager interface for status fields of the owner's own
// (a component's outputs, the state of a long operation).
type StatusReporter[T client.Object] interface {
	// ReportStatus sets owner's own status fields from report (owner.Status.URL = ...). owner is
	// a copy of the live owner; kdag writes its status, with kdag's block (which ReportStatus must
	// not set), in one server-side apply of the status subresource, and only when it differs from
	// the live one. It must be a pure function of owner and report (no API calls) and must not
	// write secret values. A returned error fails the status write, which is retried.
	ReportStatus(ctx context.Context, owner T, report Report) error
}

// Report is what a reconcile found, for StatusReporter.
type Report struct {
	// Ready is true when every node is applied and ready.
	Ready bool

	r reconciler.Report
}

// State returns the state of the node whose object has obj's type, namespace (the owner's when
// empty) and name, or "" when the graph has no such node.
func (r Report) State(obj client.Object) kdagv1alpha1.NodeState { return r.r.State(obj) }

// Get fills obj, whose type, namespace (the owner's when empty) and name select a node, with the
// node's object as applied or read in this reconcile (typed: report.Get(&svc)). It returns false,
// and leaves obj alone, when the graph has no such node or the node did not get to its object
// (blocked, failed first, a Finished node whose object is gone); an error when obj's type is not
// in the scheme or the object does not convert to it.
func (r Report) Get(obj client.Object) (bool, error) { return r.r.Get(obj) }

// typed is the reconciler.Manager of a ResourceManager[T].
type typed[T client.Object] struct {
	rm  ResourceManager[T]
	typ reflect.Type // T's element type
}

// adapt erases rm's owner type. It returns an error when T is not a pointer to a struct.
func adapt[T client.Object](rm ResourceManager[T]) (reconciler.Manager, error) {
	t := reflect.TypeFor[T]()
	if t.Kind() != reflect.Pointer || t.Elem().Kind() != reflect.Struct {
		return nil, errors.Errorf("owner type %s is not a pointer to a struct", t)
	}
	return typed[T]{rm: rm, typ: t.Elem()}, nil
}

func (m typed[T]) NewOwner() client.Object { return reflect.New(m.typ).Interface().(T) }

func (m typed[T]) OwnedTypes() []client.Object { return m.rm.OwnedTypes() }

func (m typed[T]) AddResources(ctx context.Context, owner client.Object, b *reconciler.Builder) error {
	return m.rm.AddResources(ctx, owner.(T), &Graph{b: b})
}

func (m typed[T]) Validate(ctx context.Context, owner client.Object) (bool, error) {
	v, ok := m.rm.(Validator[T])
	if !ok {
		return false, nil
	}
	return true, v.Validate(ctx, owner.(T))
}

func (m typed[T]) Cleanup(ctx context.Context, owner client.Object) (bool, error) {
	c, ok := m.rm.(Cleaner[T])
	if !ok {
		return false, nil
	}
	return true, c.Cleanup(ctx, owner.(T))
}

func (m typed[T]) IsCleaner() bool {
	_, ok := m.rm.(Cleaner[T])
	return ok
}

func (m typed[T]) IsReporter() bool {
	_, ok := m.rm.(StatusReporter[T])
	return ok
}

func (m typed[T]) ReportStatus(ctx context.Context, owner client.Object, report reconciler.Report) (bool, error) {
	sr, ok := m.rm.(StatusReporter[T])
	if !ok {
		return false, nil
	}
	return true, sr.ReportStatus(ctx, owner.(T), Report{Ready: report.Ready, r: report})
}
