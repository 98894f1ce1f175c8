package apply

import (
	"context"

	"github.com/pkg/errors"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
)

// Delete deletes obj in the background if it is still the same object (UID precondition); an
// object already gone is not an error. The engine forgets it.
func (e *Engine) Delete(ctx context.Context, obj client.Object) error {
	uid := obj.GetUID()
	err := e.client.Delete(ctx, obj,
		client.PropagationPolicy(metav1.DeletePropagationBackground),
		client.Preconditions{UID: &uid})
	if err == nil || apierrors.IsNotFound(err) {
		e.Forget(uid)
		return nil
	}
	return err
}

// Orphan releases obj, which kdag applied for owner, instead of deleting it: it removes kdag's
// labels (the shard label too) and any owner reference to owner, and sets kdag.dev/adopt to owner, so that an owner of
// the same kind and name created later adopts it again. One merge patch, conditional on obj's
// resourceVersion (a conflict is for the caller to retry); the object's content is not touched,
// and the engine forgets it. An object already gone is not an error.
func (e *Engine) Orphan(ctx context.Context, owner Owner, obj client.Object) error {
	released, ok := obj.DeepCopyObject().(client.Object)
	if !ok {
		return errors.Errorf("%T is not a client.Object", obj)
	}
	lbls := released.GetLabels()
	delete(lbls, kdagv1alpha1.LabelController)
	delete(lbls, kdagv1alpha1.LabelOwnerUID)
	// Its owner's shard is none of its business any more (a kept child owner would otherwise
	// stay on that shard for good).
	delete(lbls, kdagv1alpha1.LabelShard)
	if lbls[kdagv1alpha1.LabelManagedBy] == "kdag" {
		delete(lbls, kdagv1alpha1.LabelManagedBy)
	}
	released.SetLabels(lbls)
	refs := released.GetOwnerReferences()[:0:0]
	for _, ref := range obj.GetOwnerReferences() {
		if ref.UID != owner.Object.GetUID() {
			refs = append(refs, ref)
		}
	}
	released.SetOwnerReferences(refs)
	ann := released.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	ann[kdagv1alpha1.AnnotationAdopt] = owner.AdoptValue(obj.GetNamespace())
	released.SetAnnotations(ann)
	patch := client.MergeFromWithOptions(obj, client.MergeFromWithOptimisticLock{})
	if err := e.client.Patch(ctx, released, patch, client.FieldOwner(e.opts.FieldManager)); err != nil {
		return client.IgnoreNotFound(err)
	}
	e.Forget(obj.GetUID())
	return nil
}

// Prune takes obj, an object of owner's that left its graph, out of the cluster: a kept object
// (Kept: the node's Keep, or a user's annotation) is orphaned (Action Orphaned, Entry.KeptBy
// names the annotation), an object already being deleted is left alone (Action Skipped,
// Entry.Waiting says so: the caller waits for it to go), any other is deleted (Action Pruned).
// Errors are Orphan's and Delete's.
func (e *Engine) Prune(ctx context.Context, owner Owner, obj client.Object) (Entry, error) {
	return e.remove(ctx, owner, obj, Pruned)
}

// Teardown is Prune for the owner's own deletion: Action Deleted instead of Pruned.
func (e *Engine) Teardown(ctx context.Context, owner Owner, obj client.Object) (Entry, error) {
	return e.remove(ctx, owner, obj, Deleted)
}

func (e *Engine) remove(ctx context.Context, owner Owner, obj client.Object, deleted Action) (Entry, error) {
	if by := KeptBy(obj); by != "" {
		if err := e.Orphan(ctx, owner, obj); err != nil {
			return Entry{Action: Orphaned, KeptBy: by}, errors.Wrap(err, "orphan kept object")
		}
		return Entry{Action: Orphaned, KeptBy: by}, nil
	}
	if !obj.GetDeletionTimestamp().IsZero() {
		return Entry{Action: Skipped, Waiting: "being deleted"}, nil
	}
	if err := e.Delete(ctx, obj); err != nil {
		return Entry{Action: deleted}, errors.Wrap(err, "delete")
	}
	return Entry{Action: deleted}, nil
}

// LeftToGarbageCollector reports whether the garbage collector deletes obj with owner (it holds
// owner's controller owner reference and is not kept), so that a teardown need not.
func (e *Engine) LeftToGarbageCollector(owner Owner, obj client.Object) bool {
	return metav1.IsControlledBy(obj, owner.Object) && !Kept(obj)
}
