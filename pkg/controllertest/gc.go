package controllertest

import (
	"context"
	"slices"

	"github.com/pkg/errors"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
)

// kinds returns the kinds of the harness's components, owners first (each component's owner type,
// then the types it owns), each once, in a fixed order. A type missing from the scheme is an error.
func (h *Harness) kinds() ([]schema.GroupVersionKind, error) {
	var out []schema.GroupVersionKind
	add := func(obj client.Object) error {
		gvk, err := apiutil.GVKForObject(obj, h.scheme)
		if err != nil {
			return errors.Wrapf(err, "%T is not in the scheme", obj)
		}
		if !slices.Contains(out, gvk) {
			out = append(out, gvk)
		}
		return nil
	}
	for _, c := range h.components {
		if err := add(c.NewOwner()); err != nil {
			return nil, err
		}
	}
	for _, c := range h.components {
		for _, obj := range c.OwnedTypes() {
			if err := add(obj); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// list returns the objects of kind gvk in the harness's namespace, read from the API server, each
// with its kind set, and the list's resourceVersion.
func (h *Harness) list(ctx context.Context, gvk schema.GroupVersionKind) ([]unstructured.Unstructured, string, error) {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	if err := h.Client.List(ctx, list, client.InNamespace(h.Namespace)); err != nil {
		return nil, "", errors.Wrapf(err, "list %s in %s", gvk.Kind, h.Namespace)
	}
	for i := range list.Items {
		list.Items[i].SetGroupVersionKind(gvk)
	}
	return list.Items, list.GetResourceVersion(), nil
}

// CollectGarbage does what Kubernetes' garbage collector does and envtest lacks: it deletes, with
// background propagation, every object of the components' kinds (their owners' and the kinds
// they own) in the namespace whose owner references all name objects of those kinds that no
// longer exist, waits for kdag's finalizers on what it deleted to be released (a manager must
// run), and repeats until nothing is left to collect: a deleted owner's children, then theirs.
// Owner references to kinds outside the components' are taken to exist. An object held by
// another finalizer (a claim's kubernetes.io/pvc-protection, which no controller releases on
// envtest) counts as deleted. It fails t when objects are still to collect after Timeout.
func (h *Harness) CollectGarbage() {
	h.t.Helper()
	kinds, err := h.kinds()
	if err != nil {
		h.t.Fatalf("controllertest: collect garbage: %v", err)
	}
	h.Eventually("garbage collected in "+h.Namespace, func(ctx context.Context) (bool, error) {
		objs := map[schema.GroupVersionKind][]unstructured.Unstructured{}
		exists := map[types.UID]bool{}
		for _, gvk := range kinds {
			items, _, err := h.list(ctx, gvk)
			if err != nil {
				return false, err
			}
			objs[gvk] = items
			for _, o := range items {
				exists[o.GetUID()] = true
			}
		}
		known := func(ref metav1.OwnerReference) bool {
			gv, err := schema.ParseGroupVersion(ref.APIVersion)
			return err == nil && slices.ContainsFunc(kinds, func(k schema.GroupVersionKind) bool {
				return k.Group == gv.Group && k.Kind == ref.Kind
			})
		}
		done := true
		for _, gvk := range kinds {
			for _, o := range objs[gvk] {
				if o.GetDeletionTimestamp() != nil {
					if slices.Contains(o.GetFinalizers(), kdagv1alpha1.Finalizer) {
						done = false // kdag tears it down; its children come next
					}
					continue
				}
				refs := o.GetOwnerReferences()
				if len(refs) == 0 || slices.ContainsFunc(refs, func(r metav1.OwnerReference) bool { return !known(r) || exists[r.UID] }) {
					continue
				}
				done = false
				err := h.Client.Delete(ctx, &o, client.PropagationPolicy(metav1.DeletePropagationBackground),
					client.Preconditions{UID: ptr.To(o.GetUID())})
				// Gone, or replaced by a newer object of the same name (a failed precondition).
				if client.IgnoreNotFound(err) != nil && !apierrors.IsConflict(err) {
					return false, errors.Wrapf(err, "delete %s %s/%s, whose owners are gone", gvk.Kind, o.GetNamespace(), o.GetName())
				}
			}
		}
		return done, nil
	})
}
