package apply

import (
	"context"
	"maps"
	"slices"

	"github.com/pkg/errors"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
)

// create writes an object the cache does not hold. The cache only holds objects with kdag's
// labels, so a miss does not tell a new object from one kdag did not create (or one the cache
// has not seen yet). create applies the object on the condition that it does not exist
// (CreateIfAbsent): one round trip for a new object, and a foreign object created between the
// cache miss and the write is never overwritten. The create sends the whole desired object, the
// fields of Policy.Ignore included; every other write leaves them out. Only if something of that
// name exists does it read the object to decide: refuse it, adopt it, or, when it is the owner's
// already, return it in Change.existing for the caller to update as a live object. Every create
// is that conditional apply: when the object it collided with is gone by the time it is read,
// create tries the conditional apply again rather than writing unconditionally.
func (e *Engine) create(ctx context.Context, owner Owner, desired *unstructured.Unstructured, p Policy) (Change, error) {
	const attempts = 3
	gvk := desired.GroupVersionKind()
	name := describe(desired, gvk)
	existing := &metav1.PartialObjectMetadata{}
	for attempt := 1; ; attempt++ {
		switch created, err := e.createIfAbsent(ctx, desired); {
		case err == nil:
			return Change{Action: Created, Object: created}, nil
		case !apierrors.IsConflict(err) && !apierrors.IsAlreadyExists(err):
			return Change{Action: Created}, err
		}
		existing.SetGroupVersionKind(gvk)
		err := e.reader.Get(ctx, client.ObjectKeyFromObject(desired), existing)
		switch {
		case apierrors.IsNotFound(err) && attempt < attempts:
			continue // deleted since the conditional apply: try it again
		case apierrors.IsNotFound(err):
			return Change{Action: Created}, errors.Errorf("%s: someone else keeps creating and deleting it while kdag creates it; kdag retries", name)
		case err != nil:
			return Change{}, errors.Wrapf(err, "%s: read", name)
		}
		break
	}
	if !e.Owns(owner, existing) {
		if !e.mayAdopt(owner, p, existing) {
			return Change{Action: Refused}, e.refusal(owner, desired, existing)
		}
		obj, err := e.adopt(ctx, withoutFields(desired, p.Ignore), existing, p)
		return Change{Action: Adopted, Object: obj}, err
	}
	// Ours, but not in the cache: the watch is behind, the response to our write was lost, its
	// owner just moved to this shard, or someone removed kdag's labels (the cache holds labelled
	// objects only). The caller decides on the whole live object as on a cached one (a user's
	// keep, create-only data, drift policy, labels back).
	live := &unstructured.Unstructured{}
	live.SetGroupVersionKind(gvk)
	if err := e.reader.Get(ctx, client.ObjectKeyFromObject(desired), live); err != nil {
		return Change{}, errors.Wrapf(err, "%s: read", name)
	}
	return Change{existing: live}, nil
}

// adopt takes over live, an existing object that is not the owner's. A create-only node's object
// keeps its content: only kdag's labels and the owner reference are set (takeOwnership), so a
// password a user or Helm generated is never replaced. Any other object gets the desired object,
// as on every later reconcile; first its ownership is taken the same way if another controller
// holds it (a StatefulSet's claim under a Delete retention policy), as an apply cannot remove
// another manager's owner reference and an object has one controller at most; that also holds
// for a kept object, which then has no controller. It returns the object as the API server
// stored it.
func (e *Engine) adopt(ctx context.Context, desired *unstructured.Unstructured, live metav1.Object, p Policy) (*unstructured.Unstructured, error) {
	if p.CreateOnly {
		return e.takeOwnership(ctx, desired)
	}
	if other, ours := metav1.GetControllerOfNoCopy(live), metav1.GetControllerOfNoCopy(desired); other != nil && (ours == nil || other.UID != ours.UID) {
		// Another controller holds it. Taken over, it is kdag's alone, also when kdag gives it no
		// owner reference (Keep): else the garbage collector deletes it with its old controller,
		// and it never counts as the owner's (Owns), so kdag would adopt it on every reconcile.
		if _, err := e.takeOwnership(ctx, desired); err != nil {
			return nil, err
		}
	}
	if err := e.apply(ctx, desired); err != nil {
		return nil, err
	}
	return desired, nil
}

// takeOwnership makes an existing object kdag's without touching anything else: desired's labels
// and owner references are merged into it with a merge patch (an Update by kdag's field manager,
// conditional on the object's resourceVersion). Not a server-side apply: an apply that leaves out
// fields kdag's field manager owned before (an object kdag orphaned and now adopts again) would
// delete them, a generated password among them. It returns the whole object from the API
// server's response.
func (e *Engine) takeOwnership(ctx context.Context, desired *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	name := describe(desired, desired.GroupVersionKind())
	live := &unstructured.Unstructured{}
	live.SetGroupVersionKind(desired.GroupVersionKind())
	if err := e.reader.Get(ctx, client.ObjectKeyFromObject(desired), live); err != nil {
		return nil, errors.Wrapf(err, "%s: read", name)
	}
	owned := e.WithOwnership(desired, live)
	patch := client.MergeFromWithOptions(live, client.MergeFromWithOptimisticLock{})
	if err := e.client.Patch(ctx, owned, patch, client.FieldOwner(e.opts.FieldManager)); err != nil {
		return nil, errors.Wrapf(err, "%s: take ownership", name)
	}
	return owned, nil
}

// WithOwnership returns a copy of live with desired's ownership metadata merged in: what the
// engine's one write to a create-only or adopted object sends (as a merge patch from live), so
// that its content, a generated password among it, is never rewritten. Labels: desired's are set
// (live's kdag.dev/shard label goes when desired has none: its owner moved out of a shard).
// Owner references: desired's, and live's that are not a controller's (one controller: kdag's
// owner, if any; none when desired has none, as for a kept object). The keep annotation
// kdag.dev/resource-policy: set when desired has it, removed when desired has not and kdag's
// field manager alone set it (a user's stays). Neither argument is modified.
func (e *Engine) WithOwnership(desired, live *unstructured.Unstructured) *unstructured.Unstructured {
	owned := live.DeepCopy()
	lbls := owned.GetLabels()
	if lbls == nil {
		lbls = map[string]string{}
	}
	if _, ok := desired.GetLabels()[kdagv1alpha1.LabelShard]; !ok {
		delete(lbls, kdagv1alpha1.LabelShard)
	}
	maps.Copy(lbls, desired.GetLabels())
	owned.SetLabels(lbls)
	refs := desired.GetOwnerReferences()
	for _, ref := range live.GetOwnerReferences() {
		if (ref.Controller == nil || !*ref.Controller) && !slices.ContainsFunc(refs, func(r metav1.OwnerReference) bool { return r.UID == ref.UID }) {
			refs = append(refs, ref)
		}
	}
	owned.SetOwnerReferences(refs)
	ann := owned.GetAnnotations()
	switch want := desired.GetAnnotations()[kdagv1alpha1.AnnotationResourcePolicy]; {
	case want != "":
		if ann == nil {
			ann = map[string]string{}
		}
		ann[kdagv1alpha1.AnnotationResourcePolicy] = want
		owned.SetAnnotations(ann)
	case ann[kdagv1alpha1.AnnotationResourcePolicy] != "" && e.keepIsOurs(live):
		delete(ann, kdagv1alpha1.AnnotationResourcePolicy)
		owned.SetAnnotations(ann)
	}
	return owned
}

// ownershipMatches reports whether live carries desired's ownership metadata (what WithOwnership
// would write): kdag's labels for owner, the same controller owner reference or none, and the
// keep annotation when desired has it and not kdag's own when desired has not.
func (e *Engine) ownershipMatches(owner Owner, desired *unstructured.Unstructured, live client.Object) bool {
	return hasOwnerLabels(owner, live) && e.refsMatch(desired, live)
}

// refsMatch reports whether live has desired's controller owner reference (or none, as desired)
// and its keep annotation, as ownershipMatches says, labels aside.
func (e *Engine) refsMatch(desired *unstructured.Unstructured, live client.Object) bool {
	d, l := metav1.GetControllerOfNoCopy(desired), metav1.GetControllerOfNoCopy(live)
	if (d == nil) != (l == nil) || d != nil && d.UID != l.UID {
		return false
	}
	hasKeep := live.GetAnnotations()[kdagv1alpha1.AnnotationResourcePolicy] == kdagv1alpha1.ResourcePolicyKeep
	if desired.GetAnnotations()[kdagv1alpha1.AnnotationResourcePolicy] == kdagv1alpha1.ResourcePolicyKeep {
		return hasKeep
	}
	return !hasKeep || !e.keepIsOurs(live)
}
