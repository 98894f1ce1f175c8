package plan

import (
	"context"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kdag-dev/kdag/pkg/controller"
	"github.com/kdag-dev/kdag/pkg/internal/graphplan"
)

// Plan is the graph a ResourceManager builds for an owner, computed without a cluster: the same
// AddResources code that reconciles, for docs, reviews and the offline `plan` command. Its Nodes
// are in topological order; WriteText, WriteMermaid and WriteDOT print it, Render gives each node
// as a reconcile would apply it.
type Plan = graphplan.Plan

// PlannedNode is one node of a Plan: its ID, object, blockers and options.
type PlannedNode = graphplan.PlannedNode

// RenderedNode is a node of a Plan as a reconcile would apply it (Plan.Render).
type RenderedNode = graphplan.RenderedNode

// NewPlan builds owner's graph with rm, as a reconcile does (the same code, the same checks: a
// node of a type rm does not declare in OwnedTypes is a mistake here too), without a cluster.
// mapper may be nil: then every object without a namespace gets the owner's, cluster-scoped kinds
// included. It returns the AddResources error, or a *controller.GraphError listing the Graph
// mistakes. It is controller.Component.Plan for a component of rm.
func NewPlan[T client.Object](ctx context.Context, rm controller.ResourceManager[T], owner T, scheme *runtime.Scheme, mapper meta.RESTMapper) (*Plan, error) {
	return controller.For("plan", rm).Plan(ctx, owner, scheme, mapper)
}
