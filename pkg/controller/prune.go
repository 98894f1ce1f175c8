package controller

import (
	"context"
	"strings"

	"github.com/kdag-dev/kdag/pkg/apply"
	"github.com/kdag-dev/kdag/pkg/tracing"

	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"

	"go.opentelemetry.io/otel/attribute"

	"github.com/pkg/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

type pruneResult struct {
	pruned   []NodeID
	orphaned []NodeID // kept objects, released instead of deleted
	err      error
}

// prune deletes the objects of the owned types that carry this owner's UID label but are not in
// the graph any more (a component switched off). It reads from the cache, matches on the owner's
// UID (never on names) and deletes with a UID precondition, so it cannot touch an object that
// kdag did not apply for this owner.
func (c *Controller) prune(ctx context.Context, owner client.Object, inGraph map[NodeID]int) (r pruneResult) {
	ctx, span := startSpan(ctx, spanPrune)
	defer func() {
		span.SetAttributes(attribute.Int("kdag.prune.deleted", len(r.pruned)))
		tracing.EndSpan(span, r.err)
	}()
	var failed []string
	defer func() {
		if r.err != nil { // a list failed
			failed = append(failed, r.err.Error())
		}
		if len(failed) > 0 {
			r.err = errors.Errorf("%s; kdag retries with backoff: let the manager delete it (RBAC, an admission webhook), or delete it yourself",
				strings.Join(failed, "; "))
		}
	}()
	for _, obj := range c.ownedObjects(ctx, owner, &r.err) {
		gvk := obj.GetObjectKind().GroupVersionKind()
		id := NodeID{Group: gvk.Group, Kind: gvk.Kind, Namespace: obj.GetNamespace(), Name: obj.GetName()}
		if _, ok := inGraph[id]; ok || !obj.GetDeletionTimestamp().IsZero() || !c.engine.Owns(c.applyOwner(owner), obj) {
			continue // in the graph, going, or not owner's (a copy that kept the labels)
		}
		if apply.Kept(obj) {
			if err := c.engine.Orphan(ctx, c.applyOwner(owner), obj); err != nil {
				failed = append(failed, errors.Wrapf(err, "orphan kept %s", id).Error())
				continue
			}
			logFrom(ctx).Info("orphaned", "node", id.String(), "action", apply.Orphaned)
			r.orphaned = append(r.orphaned, id)
			continue
		}
		if err := c.engine.Delete(ctx, obj); err != nil {
			failed = append(failed, errors.Wrapf(err, "prune %s", id).Error())
			continue
		}
		logFrom(ctx).Info("pruned", "node", id.String(), "action", apply.Pruned)
		r.pruned = append(r.pruned, id)
	}
	return r
}

// ownedObjects lists, from the cache, every object of the owned types that carries the owner's
// UID label, with its GVK set. A failed list is recorded in *errp and skipped.
func (c *Controller) ownedObjects(ctx context.Context, owner client.Object, errp *error) []client.Object {
	var out []client.Object
	for _, t := range c.owned {
		obj, err := c.scheme.New(t.list)
		if err != nil {
			*errp = errors.Wrapf(err, "new %s", t.list.Kind)
			continue
		}
		list, ok := obj.(client.ObjectList)
		if !ok {
			continue
		}
		var match client.ListOption = client.MatchingLabels{kdagv1alpha1.LabelOwnerUID: string(owner.GetUID())}
		if t.indexed {
			match = client.MatchingFields{c.ownerIndex(): string(owner.GetUID())}
		}
		if err := c.client.List(ctx, list, match); err != nil {
			*errp = errors.Wrapf(err, "list %s", t.list.Kind)
			continue
		}
		items, err := meta.ExtractList(list)
		if err != nil {
			*errp = errors.Wrapf(err, "read %s", t.list.Kind)
			continue
		}
		for _, item := range items {
			o, ok := item.(client.Object)
			if !ok {
				continue
			}
			o.GetObjectKind().SetGroupVersionKind(t.gvk)
			out = append(out, o)
		}
	}
	return out
}
