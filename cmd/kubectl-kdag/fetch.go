package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/pkg/errors"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
)

// ownerTree is one kdag owner as its status describes it, with the nested owners that were
// read below its nodes.
type ownerTree struct {
	Kind, Namespace, Name string
	Generation            int64
	Status                kdagv1alpha1.Status
	// Children holds the expanded nested owners by their index in Status.Graph.Nodes.
	Children map[int]*ownerTree
}

// notReady returns the NotReady entry of node n, if the status lists one.
func (t *ownerTree) notReady(n kdagv1alpha1.GraphNode) (kdagv1alpha1.NodeStatus, bool) {
	if t.Status.Graph == nil {
		return kdagv1alpha1.NodeStatus{}, false
	}
	for _, s := range t.Status.Graph.NotReady {
		if s.Kind == n.Kind && s.Namespace == n.Namespace && s.Name == n.Name {
			return s, true
		}
	}
	return kdagv1alpha1.NodeStatus{}, false
}

// pathNode returns the entry of the owner's last critical path (status.lastReconcile.criticalPath)
// for the node of kind, namespace and name, and of group unless anyGroup (NotReady entries carry
// no group), and its position on the path; -1 when the node is not on it.
func (t *ownerTree) pathNode(group, kind, namespace, name string, anyGroup bool) (kdagv1alpha1.PathNode, int) {
	if t.Status.LastReconcile == nil {
		return kdagv1alpha1.PathNode{}, -1
	}
	for i, p := range t.Status.LastReconcile.CriticalPath {
		if p.Kind == kind && p.Namespace == namespace && p.Name == name && (anyGroup || p.Group == group) {
			return p, i
		}
	}
	return kdagv1alpha1.PathNode{}, -1
}

// parseOwner reads the kdag status of u. ok is false when u is not a kdag owner: its status has
// neither a graph nor the operator version and conditions kdag writes.
func parseOwner(u *unstructured.Unstructured) (t *ownerTree, ok bool, err error) {
	t = &ownerTree{Kind: u.GetKind(), Namespace: u.GetNamespace(), Name: u.GetName(), Generation: u.GetGeneration()}
	raw, found, err := unstructured.NestedMap(u.Object, "status")
	if err != nil || !found {
		return t, false, err
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, &t.Status); err != nil {
		return t, false, errors.Wrapf(err, "%s %s: read status", t.Kind, t.Name)
	}
	isOwner := t.Status.Graph != nil ||
		(t.Status.OperatorVersion != "" && meta.FindStatusCondition(t.Status.Conditions, kdagv1alpha1.ConditionReady) != nil)
	return t, isOwner, nil
}

// mappingFor resolves a resource or kind argument as kubectl's resource builder does:
// resource[.version][.group] first, then Kind[.version][.group].
func mappingFor(mapper meta.RESTMapper, arg string) (*meta.RESTMapping, error) {
	fullGVR, gr := schema.ParseResourceArg(arg)
	var gvk schema.GroupVersionKind
	if fullGVR != nil {
		gvk, _ = mapper.KindFor(*fullGVR)
	}
	if gvk.Empty() {
		var err error
		if gvk, err = mapper.KindFor(gr.WithVersion("")); err != nil && !meta.IsNoMatchError(err) {
			return nil, err
		}
	}
	if !gvk.Empty() {
		return mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	}
	fullGVK, gk := schema.ParseKindArg(arg)
	if fullGVK != nil {
		if m, err := mapper.RESTMapping(fullGVK.GroupKind(), fullGVK.Version); err == nil {
			return m, nil
		}
	}
	return mapper.RESTMapping(gk)
}

// reader reads owners with the dynamic client.
type reader struct {
	client dynamic.Interface
	mapper meta.RESTMapper
	warn   io.Writer // nested owners that cannot be read are reported here
}

// load reads the owner name of mapping's type and expands its nested owners up to depth levels.
func (r *reader) load(ctx context.Context, mapping *meta.RESTMapping, namespace, name string, depth int) (*ownerTree, error) {
	u, err := r.get(ctx, mapping, namespace, name)
	if err != nil {
		return nil, err
	}
	t, ok, err := parseOwner(u)
	if err != nil {
		return nil, err
	}
	if !ok {
		where := ""
		if t.Namespace != "" {
			where = " in namespace " + t.Namespace
		}
		return nil, errors.Errorf("%s %s%s has no status.graph: it is not reconciled by a kdag controller, or has not been reconciled yet",
			mapping.Resource.GroupResource(), name, where)
	}
	r.expand(ctx, t, depth)
	return t, nil
}

func (r *reader) get(ctx context.Context, mapping *meta.RESTMapping, namespace, name string) (*unstructured.Unstructured, error) {
	var ri dynamic.ResourceInterface = r.client.Resource(mapping.Resource)
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		ri = r.client.Resource(mapping.Resource).Namespace(namespace)
	}
	u, err := ri.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, errors.Wrapf(err, "get %s %s", mapping.Resource.GroupResource(), name)
	}
	return u, nil
}

// expand reads the nodes of t that may be kdag owners and attaches those that are, recursively,
// while depth > 0. Nodes not found (blocked ones not created yet) are skipped silently. Only custom resources are candidates: built-in kinds never have status.graph,
// and reading them (Secrets above all) would cost reads and permissions for nothing.
func (r *reader) expand(ctx context.Context, t *ownerTree, depth int) {
	if depth <= 0 || t.Status.Graph == nil {
		return
	}
	for i, n := range t.Status.Graph.Nodes {
		if !maybeOwner(n.Group) {
			continue
		}
		mapping, err := r.mapper.RESTMapping(schema.GroupKind{Group: n.Group, Kind: n.Kind})
		if err != nil {
			fmt.Fprintf(r.warn, "Warning: %s %s: %v\n", n.Kind, n.Name, err)
			continue
		}
		u, err := r.get(ctx, mapping, n.Namespace, n.Name)
		if apierrors.IsNotFound(err) {
			continue // a blocked node not created yet
		}
		if err != nil {
			fmt.Fprintf(r.warn, "Warning: %v\n", err)
			continue
		}
		child, ok, err := parseOwner(u)
		if err != nil {
			fmt.Fprintf(r.warn, "Warning: %v\n", err)
			continue
		}
		if !ok {
			continue
		}
		r.expand(ctx, child, depth-1)
		if t.Children == nil {
			t.Children = map[int]*ownerTree{}
		}
		t.Children[i] = child
	}
}

// maybeOwner reports whether objects of group may be custom resources: CRD groups have a dot and
// the *.k8s.io groups are reserved for Kubernetes.
func maybeOwner(group string) bool {
	return strings.Contains(group, ".") && group != "k8s.io" && !strings.HasSuffix(group, ".k8s.io")
}
