package plan

import (
	"cmp"
	"context"
	"slices"

	"github.com/pkg/errors"
	"golang.org/x/sync/errgroup"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// OwnerPlan is the live plan of one owner of a fleet (Planner.Fleet): the owner's changes, then
// its child owners' (Planner.Changes), or the error that stopped it.
type OwnerPlan struct {
	// Owner is "Kind namespace/name".
	Owner string `json:"owner" yaml:"owner"`
	// Error is why the owner could not be planned (a read or a dry run the API server did not
	// answer: RBAC, a missing CRD), naming the object; Changes is then empty.
	Error string `json:"error,omitempty" yaml:"error,omitempty"`
	// Changes are the owner's, then each child owner's, in Walk's order.
	Changes []OwnerChanges `json:"changes,omitempty" yaml:"changes,omitempty"`
}

// changing reports whether applying would change anything of the owner or its child owners.
func (op OwnerPlan) changing() bool {
	for _, oc := range op.Changes {
		for _, c := range oc.Changes {
			if changing(c.Action) {
				return true
			}
		}
	}
	return false
}

// failed reports whether the plan failed or the API server refuses an object of it.
func (op OwnerPlan) failed() bool {
	if op.Error != "" {
		return true
	}
	for _, oc := range op.Changes {
		if oc.Error != "" {
			return true
		}
		for _, c := range oc.Changes {
			if c.Error != "" {
				return true
			}
		}
	}
	return false
}

// ListOwners returns the owners of every kind a component reconciles that r lists in namespace
// ("" for all namespaces) and that selector matches (nil: every one), typed and defaulted as
// ReadOwner's, sorted by namespace, kind and name: the owners of a fleet plan. An owner whose
// controller is another owner of the list is left out: it is planned as that owner's child, with
// the spec the owner's graph gives it. It returns the first error of a list (RBAC, a CRD the
// cluster lacks), naming the kind.
func (p *Planner) ListOwners(ctx context.Context, r client.Reader, namespace string, selector labels.Selector) ([]client.Object, error) {
	kinds := make([]schema.GroupKind, 0, len(p.components))
	for gk := range p.components {
		kinds = append(kinds, gk)
	}
	slices.SortFunc(kinds, func(a, b schema.GroupKind) int {
		return cmp.Or(cmp.Compare(a.Group, b.Group), cmp.Compare(a.Kind, b.Kind))
	})
	var listed []client.Object
	uids := map[types.UID]bool{}
	for _, gk := range kinds {
		gvk, err := apiutil.GVKForObject(p.components[gk].NewOwner(), p.scheme)
		if err != nil {
			return nil, errors.WithStack(err)
		}
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		opts := []client.ListOption{client.InNamespace(namespace)}
		if selector != nil {
			opts = append(opts, client.MatchingLabelsSelector{Selector: selector})
		}
		if err := r.List(ctx, list, opts...); err != nil {
			return nil, errors.Wrapf(err, "list %s", gk)
		}
		for i := range list.Items {
			o, err := p.typed(&list.Items[i])
			if err != nil {
				return nil, err
			}
			listed = append(listed, o)
			uids[o.GetUID()] = true
		}
	}
	var owners []client.Object
	for _, o := range listed {
		if ref := metav1.GetControllerOf(o); ref != nil && uids[ref.UID] {
			continue
		}
		owners = append(owners, o)
	}
	slices.SortStableFunc(owners, func(a, b client.Object) int {
		return cmp.Or(cmp.Compare(a.GetNamespace(), b.GetNamespace()),
			cmp.Compare(a.GetObjectKind().GroupVersionKind().Kind, b.GetObjectKind().GroupVersionKind().Kind),
			cmp.Compare(a.GetName(), b.GetName()))
	})
	return owners, nil
}

// Fleet plans each owner (from ListOwners) with its child owners against the cluster
// (Planner.Changes), parallel owners at once (0: 8), each owner's reads and dry runs one after
// the other: at most parallel requests in flight. One owner's failure is its OwnerPlan's Error,
// not the fleet's: the others are planned. It returns the plans in owners' order; c is asked to
// write only with DryRunAll. It stops early only when ctx ends (the owners not planned then carry
// ctx's error).
func (p *Planner) Fleet(ctx context.Context, c client.Client, owners []client.Object, parallel int) []OwnerPlan {
	if parallel <= 0 {
		parallel = 8
	}
	plans := make([]OwnerPlan, len(owners))
	var g errgroup.Group
	g.SetLimit(parallel)
	for i, owner := range owners {
		g.Go(func() error {
			gvk, err := apiutil.GVKForObject(owner, p.scheme)
			plans[i].Owner = owner.GetNamespace() + "/" + owner.GetName()
			if err == nil {
				plans[i].Owner = title(gvk, owner)
			}
			if err := ctx.Err(); err != nil {
				plans[i].Error = err.Error()
				return nil
			}
			changes, err := p.Changes(ctx, c, []client.Object{owner}, 1)
			if err != nil {
				plans[i].Error = err.Error()
				return nil
			}
			plans[i].Changes = changes
			return nil
		})
	}
	_ = g.Wait() // every worker records its error in its slot and returns nil
	return plans
}

// FleetStatus returns what a fleet plan returns for plans, as Status does for one owner: an
// error counting the owners whose plan failed or holds an object the API server refuses (exit
// status 2), else ErrChanges when an owner changes (1), else nil (0).
func FleetStatus(plans []OwnerPlan) error {
	failed, changed := 0, false
	for _, op := range plans {
		if op.failed() {
			failed++
		}
		changed = changed || op.changing()
	}
	switch {
	case failed > 0:
		return errors.Errorf("the plan of %d of %d owners failed or the API server refuses an object of it: see the errors above", failed, len(plans))
	case changed:
		return ErrChanges
	}
	return nil
}
