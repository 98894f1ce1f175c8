package controller

import (
	"context"
	"strings"

	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"

	"go.opentelemetry.io/otel/attribute"

	"github.com/pkg/errors"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
		endSpan(span, r.err)
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
		if _, ok := inGraph[id]; ok || !obj.GetDeletionTimestamp().IsZero() || !c.owns(owner, obj) {
			continue // in the graph, going, or not owner's (a copy that kept the labels)
		}
		if kept(obj) {
			if err := c.orphan(ctx, owner, obj); err != nil {
				failed = append(failed, errors.Wrapf(err, "orphan kept %s", id).Error())
				continue
			}
			logFrom(ctx).Info("orphaned", "node", id.String(), "action", ActionOrphaned)
			r.orphaned = append(r.orphaned, id)
			continue
		}
		if err := c.deleteObject(ctx, obj); err != nil {
			failed = append(failed, errors.Wrapf(err, "prune %s", id).Error())
			continue
		}
		logFrom(ctx).Info("pruned", "node", id.String(), "action", ActionPruned)
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

// deleteObject deletes obj in the background if it is still the same object (UID
// precondition); an object already gone is not an error.
func (c *Controller) deleteObject(ctx context.Context, obj client.Object) error {
	uid := obj.GetUID()
	err := c.client.Delete(ctx, obj,
		client.PropagationPolicy(metav1.DeletePropagationBackground),
		client.Preconditions{UID: &uid})
	if err == nil || apierrors.IsNotFound(err) {
		c.forget(uid)
		return nil
	}
	return err
}

// kept reports whether obj's deletion policy is keep (kdagv1alpha1.AnnotationResourcePolicy).
func kept(obj client.Object) bool {
	return obj.GetAnnotations()[kdagv1alpha1.AnnotationResourcePolicy] == kdagv1alpha1.ResourcePolicyKeep
}

// orphan releases obj, which kdag applied for owner, instead of deleting it: it removes kdag's
// labels and any owner reference to owner, and sets kdagv1alpha1.AnnotationAdopt to owner, so that an owner of
// the same kind and name created later adopts it again. One merge patch, conditional on obj's
// resourceVersion (a conflict is retried by the next reconcile); the object's content is not
// touched, and kdag forgets it.
func (c *Controller) orphan(ctx context.Context, owner client.Object, obj client.Object) error {
	released, ok := obj.DeepCopyObject().(client.Object)
	if !ok {
		return errors.Errorf("%T is not a client.Object", obj)
	}
	lbls := released.GetLabels()
	delete(lbls, kdagv1alpha1.LabelController)
	delete(lbls, kdagv1alpha1.LabelOwnerUID)
	if lbls[kdagv1alpha1.LabelManagedBy] == "kdag" {
		delete(lbls, kdagv1alpha1.LabelManagedBy)
	}
	released.SetLabels(lbls)
	refs := released.GetOwnerReferences()[:0:0]
	for _, ref := range obj.GetOwnerReferences() {
		if ref.UID != owner.GetUID() {
			refs = append(refs, ref)
		}
	}
	released.SetOwnerReferences(refs)
	ann := released.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	ann[kdagv1alpha1.AnnotationAdopt] = c.adoptValue(owner, obj.GetNamespace())
	released.SetAnnotations(ann)
	patch := client.MergeFromWithOptions(obj, client.MergeFromWithOptimisticLock{})
	if err := c.client.Patch(ctx, released, patch, client.FieldOwner(c.opts.FieldManager)); err != nil {
		return client.IgnoreNotFound(err)
	}
	c.forget(obj.GetUID())
	return nil
}
