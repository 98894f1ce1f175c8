package reconciler

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

// Report is what a reconcile found, for a StatusReporter (controller.Report wraps it).
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

// Manager is a controller.ResourceManager with its owner type erased, for the reconciler's code
// that does not depend on it (controller's adapter makes one).
type Manager interface {
	// NewOwner returns a new, empty owner.
	NewOwner() client.Object
	// OwnedTypes is the ResourceManager's OwnedTypes.
	OwnedTypes() []client.Object
	// AddResources calls the ResourceManager's AddResources with owner and a Graph over b.
	AddResources(ctx context.Context, owner client.Object, b *Builder) error
	// Validate, Cleanup and ReportStatus report false when the ResourceManager does not
	// implement the interface (controller.Validator, Cleaner, StatusReporter).
	Validate(ctx context.Context, owner client.Object) (bool, error)
	Cleanup(ctx context.Context, owner client.Object) (bool, error)
	ReportStatus(ctx context.Context, owner client.Object, report Report) (bool, error)
	IsCleaner() bool
	IsReporter() bool
}

// GVKOf returns obj's GroupVersionKind from scheme, naming what failed.
func GVKOf(obj runtime.Object, scheme *runtime.Scheme) (schema.GroupVersionKind, error) {
	gvk, err := apiutil.GVKForObject(obj, scheme)
	return gvk, errors.Wrapf(err, "%T is not in the scheme", obj)
}
