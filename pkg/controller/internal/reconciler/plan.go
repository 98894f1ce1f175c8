package reconciler

import (
	"context"

	"github.com/pkg/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/kdag-dev/kdag/pkg/graph"
	"github.com/kdag-dev/kdag/pkg/internal/graphplan"
)

// Plan builds owner's graph with m, as a reconcile does (the same code, the same checks: a
// node of a type m does not declare in OwnedTypes is a mistake here too), without a cluster, for
// Component.Plan (plan.NewPlan). mapper may be nil: then every object without a namespace gets
// the owner's, cluster-scoped kinds included. It returns the AddResources error, or a
// *GraphError listing the Graph mistakes.
func Plan(ctx context.Context, m Manager, owner client.Object, scheme *runtime.Scheme, mapper meta.RESTMapper) (*graphplan.Plan, error) {
	owned := map[schema.GroupKind]bool{}
	for _, obj := range m.OwnedTypes() {
		gvk, err := GVKOf(obj, scheme)
		if err != nil {
			return nil, errors.Wrap(err, "owned type")
		}
		owned[gvk.GroupKind()] = true
	}
	b, err := buildGraph(ctx, m, owner, scheme, mapper, owned)
	if err != nil {
		return nil, err
	}
	p := &graphplan.Plan{Nodes: make([]graphplan.PlannedNode, len(b.nodes))}
	for i, s := range b.nodes {
		n := graphplan.PlannedNode{ID: s.id, GVK: s.gvk, CreateOnly: s.createOnly, Adopt: s.adopt, Keep: s.keep, Reference: s.reference, RequireKeys: s.requireKeys, Object: s.obj}
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
