package apply

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
)

// pendingSuffix marks the desired hash of a claim applied at its live size while its growth
// waits for it to be bound (applyPending).
const pendingSuffix = "/until-bound"

// pendingGrowth reports whether live is a PersistentVolumeClaim that is not bound yet while
// desired asks it to grow: the API server lets only a bound claim's request change (a
// WaitForFirstConsumer claim is Pending until its consumer's pod is scheduled). It returns the
// desired and the live storage requests.
func pendingGrowth(live client.Object, desired *unstructured.Unstructured) (want, has string, ok bool) {
	if desired.GetKind() != "PersistentVolumeClaim" || desired.GroupVersionKind().Group != "" {
		return "", "", false
	}
	var phase string
	switch l := live.(type) {
	case *corev1.PersistentVolumeClaim:
		phase = string(l.Status.Phase)
		if q, found := l.Spec.Resources.Requests[corev1.ResourceStorage]; found {
			has = q.String()
		}
	case *unstructured.Unstructured:
		phase, _, _ = unstructured.NestedString(l.Object, "status", "phase")
		has, _, _ = unstructured.NestedString(l.Object, "spec", "resources", "requests", "storage")
	default:
		return "", "", false
	}
	want, _, _ = unstructured.NestedString(desired.Object, "spec", "resources", "requests", "storage")
	if phase == string(corev1.ClaimBound) || want == "" || has == "" {
		return "", "", false
	}
	w, err1 := resource.ParseQuantity(want)
	h, err2 := resource.ParseQuantity(has)
	if err1 != nil || err2 != nil || w.Cmp(h) <= 0 {
		return "", "", false
	}
	return want, has, true
}

// applyPending applies desired to a claim that is not bound yet with its live storage request,
// so that the rest of the change lands and its consumers can start (which binds a
// WaitForFirstConsumer claim), and returns a Change whose pending says that the claim grows
// once it is bound. The applied object carries the desired hash marked pendingSuffix, so the
// next reconcile, once the claim is bound, applies the whole desired object; until then an
// unchanged claim costs no write.
func (e *Engine) applyPending(ctx context.Context, desired *unstructured.Unstructured, live client.Object, want, has string) (Change, error) {
	pending := "it grows from " + has + " to " + want + " once it is bound"
	marked := desired.GetAnnotations()[kdagv1alpha1.AnnotationDesiredHash] + pendingSuffix
	if e.isVerified(live, marked) {
		return Change{Action: Skipped, Object: live, pending: pending}, nil
	}
	partial := desired.DeepCopy()
	if err := unstructured.SetNestedField(partial.Object, has, "spec", "resources", "requests", "storage"); err != nil {
		return Change{Action: Applied}, err
	}
	setAnnotation(partial, kdagv1alpha1.AnnotationDesiredHash, marked)
	if err := e.apply(ctx, partial); err != nil {
		return Change{Action: Applied}, err
	}
	return Change{Action: Applied, Object: partial, pending: pending}, nil
}
