package controllertest

import (
	"testing"

	"github.com/pkg/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
)

// Graph is a fake of what a StatusReporter reads of a controller.Report (State and Get), for
// unit tests of status logic written against those two methods:
//
//	type graph interface {
//		State(client.Object) kdagv1alpha1.NodeState
//		Get(client.Object) (bool, error)
//	}
//
//	func (rm RM) ReportStatus(ctx context.Context, s *v1.Server, r controller.Report) error {
//		return reportStatus(s, r.Ready, r)
//	}
//
// and in the test, reportStatus(s, false, controllertest.NewGraph(t, scheme).With(job, NodeWaiting)).
type Graph struct {
	t      testing.TB
	scheme *runtime.Scheme
	nodes  []graphNode
}

type graphNode struct {
	gvkKind, group, namespace, name string
	state                           kdagv1alpha1.NodeState
	object                          client.Object // nil: the node did not get to its object
}

// NewGraph returns an empty Graph whose objects' kinds come from scheme; adding an object whose
// type scheme does not know fails t.
func NewGraph(t testing.TB, scheme *runtime.Scheme) *Graph { return &Graph{t: t, scheme: scheme} }

// With adds a node in state whose object is obj (type, namespace and name select it; its content
// is what Get returns). It returns g.
func (g *Graph) With(obj client.Object, state kdagv1alpha1.NodeState) *Graph {
	return g.add(obj, state, true)
}

// WithoutObject adds a node in state that did not get to its object (blocked, failed first, a
// Finished node whose object is gone): State answers, Get finds nothing. It returns g.
func (g *Graph) WithoutObject(obj client.Object, state kdagv1alpha1.NodeState) *Graph {
	return g.add(obj, state, false)
}

func (g *Graph) add(obj client.Object, state kdagv1alpha1.NodeState, withObject bool) *Graph {
	g.t.Helper()
	gvk, err := apiutil.GVKForObject(obj, g.scheme)
	if err != nil {
		g.t.Fatalf("controllertest.Graph: %T is not in the scheme: %v", obj, err)
	}
	n := graphNode{gvkKind: gvk.Kind, group: gvk.Group, namespace: obj.GetNamespace(), name: obj.GetName(), state: state}
	if withObject {
		n.object = obj.DeepCopyObject().(client.Object)
	}
	g.nodes = append(g.nodes, n)
	return g
}

func (g *Graph) find(obj client.Object) (*graphNode, error) {
	gvk, err := apiutil.GVKForObject(obj, g.scheme)
	if err != nil {
		return nil, errors.Wrapf(err, "%T is not in the scheme", obj)
	}
	for i := range g.nodes {
		n := &g.nodes[i]
		if n.group == gvk.Group && n.gvkKind == gvk.Kind && n.name == obj.GetName() &&
			(obj.GetNamespace() == "" || n.namespace == obj.GetNamespace()) {
			return n, nil
		}
	}
	return nil, nil
}

// State returns the state of obj's node, or "" when the graph has none (controller.Report.State).
func (g *Graph) State(obj client.Object) kdagv1alpha1.NodeState {
	n, err := g.find(obj)
	if err != nil || n == nil {
		return ""
	}
	return n.state
}

// Get fills obj with its node's object and returns true, or false when there is none
// (controller.Report.Get).
func (g *Graph) Get(obj client.Object) (bool, error) {
	n, err := g.find(obj)
	if err != nil || n == nil || n.object == nil {
		return false, err
	}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(n.object)
	if err != nil {
		return false, err
	}
	return true, runtime.DefaultUnstructuredConverter.FromUnstructured(u, obj)
}
