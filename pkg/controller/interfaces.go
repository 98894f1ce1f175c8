package controller

import (
	"context"
	"reflect"

	"github.com/pkg/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/graph"
)

// ResourceManager is what an operator author writes for one owner type T, a pointer to the Go
// type of the reconciled custom resource (*v1alpha1.Valkey): the types of the objects an owner
// has, and the objects themselves with their dependencies. The reconciler calls it on every
// reconcile; New infers T from it.
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

	nodes     []nodeReport
	scheme    *runtime.Scheme
	namespace string // the owner's
}

// nodeReport is one node of a Report.
type nodeReport struct {
	id    graph.NodeID
	state kdagv1alpha1.NodeState
	// object is the node's object as applied or read from the cache; nil when the node did not
	// get to it (blocked, canceled, failed first, a Finished node whose object is gone). Read it
	// only: a typed object is the one the cache read gave the reconcile.
	object client.Object
}

// find returns the node of obj's kind, namespace (the owner's when empty) and name, or nil.
func (r Report) find(obj client.Object) (*nodeReport, error) {
	gvk, err := apiutil.GVKForObject(obj, r.scheme)
	if err != nil {
		return nil, errors.Wrapf(err, "report: %T is not in the scheme", obj)
	}
	ns := obj.GetNamespace()
	if ns == "" {
		ns = r.namespace
	}
	for i := range r.nodes {
		id := r.nodes[i].id
		if id.Group == gvk.Group && id.Kind == gvk.Kind && id.Name == obj.GetName() && (id.Namespace == ns || id.Namespace == "") {
			return &r.nodes[i], nil
		}
	}
	return nil, nil
}

// State returns the state of the node whose object has obj's type, namespace (the owner's when
// empty) and name, or "" when the graph has no such node.
func (r Report) State(obj client.Object) kdagv1alpha1.NodeState {
	n, err := r.find(obj)
	if err != nil || n == nil {
		return ""
	}
	return n.state
}

// Get fills obj, whose type, namespace (the owner's when empty) and name select a node, with the
// node's object as applied or read in this reconcile (typed: report.Get(&svc)). It returns false,
// and leaves obj alone, when the graph has no such node or the node did not get to its object
// (blocked, failed first, a Finished node whose object is gone); an error when obj's type is not
// in the scheme or the object does not convert to it.
func (r Report) Get(obj client.Object) (bool, error) {
	n, err := r.find(obj)
	if err != nil || n == nil || n.object == nil {
		return false, err
	}
	if src := reflect.ValueOf(n.object); src.Type() == reflect.TypeOf(obj) {
		reflect.ValueOf(obj).Elem().Set(reflect.ValueOf(n.object.DeepCopyObject()).Elem())
		return true, nil
	}
	content, ok := n.object.(runtime.Unstructured)
	var u map[string]any
	if ok {
		u = content.UnstructuredContent()
	} else if u, err = runtime.DefaultUnstructuredConverter.ToUnstructured(n.object); err != nil {
		return false, errors.Wrapf(err, "report: convert %s", n.id)
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u, obj); err != nil {
		return false, errors.Wrapf(err, "report: convert %s to %T", n.id, obj)
	}
	return true, nil
}

// manager is a ResourceManager with its owner type erased, for the reconciler's code that does not
// depend on it. adapt makes one.
type manager interface {
	newOwner() client.Object
	ownedTypes() []client.Object
	addResources(ctx context.Context, owner client.Object, b *Graph) error
	// validate, cleanup and reportStatus report false when the ResourceManager does not
	// implement the interface.
	validate(ctx context.Context, owner client.Object) (bool, error)
	cleanup(ctx context.Context, owner client.Object) (bool, error)
	reportStatus(ctx context.Context, owner client.Object, report Report) (bool, error)
	isCleaner() bool
	isReporter() bool
}

// typed is the manager of a ResourceManager[T].
type typed[T client.Object] struct {
	rm  ResourceManager[T]
	typ reflect.Type // T's element type
}

// adapt erases rm's owner type. It returns an error when T is not a pointer to a struct.
func adapt[T client.Object](rm ResourceManager[T]) (manager, error) {
	t := reflect.TypeFor[T]()
	if t.Kind() != reflect.Pointer || t.Elem().Kind() != reflect.Struct {
		return nil, errors.Errorf("owner type %s is not a pointer to a struct", t)
	}
	return typed[T]{rm: rm, typ: t.Elem()}, nil
}

func (m typed[T]) newOwner() client.Object { return reflect.New(m.typ).Interface().(T) }

func (m typed[T]) ownedTypes() []client.Object { return m.rm.OwnedTypes() }

func (m typed[T]) addResources(ctx context.Context, owner client.Object, b *Graph) error {
	return m.rm.AddResources(ctx, owner.(T), b)
}

func (m typed[T]) validate(ctx context.Context, owner client.Object) (bool, error) {
	v, ok := m.rm.(Validator[T])
	if !ok {
		return false, nil
	}
	return true, v.Validate(ctx, owner.(T))
}

func (m typed[T]) cleanup(ctx context.Context, owner client.Object) (bool, error) {
	c, ok := m.rm.(Cleaner[T])
	if !ok {
		return false, nil
	}
	return true, c.Cleanup(ctx, owner.(T))
}

func (m typed[T]) isCleaner() bool {
	_, ok := m.rm.(Cleaner[T])
	return ok
}

func (m typed[T]) isReporter() bool {
	_, ok := m.rm.(StatusReporter[T])
	return ok
}

func (m typed[T]) reportStatus(ctx context.Context, owner client.Object, report Report) (bool, error) {
	sr, ok := m.rm.(StatusReporter[T])
	if !ok {
		return false, nil
	}
	return true, sr.ReportStatus(ctx, owner.(T), report)
}

// gvkOf returns obj's GroupVersionKind from scheme, naming what failed.
func gvkOf(obj runtime.Object, scheme *runtime.Scheme) (schema.GroupVersionKind, error) {
	gvk, err := apiutil.GVKForObject(obj, scheme)
	return gvk, errors.Wrapf(err, "%T is not in the scheme", obj)
}
