package apply

import (
	"fmt"
	"net/http"
	"sort"
	"strings"

	"github.com/pkg/errors"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
)

// Owns reports whether obj is owner's object, applied by this engine's field manager. Its
// controller owner reference decides: owner's UID, or someone else's. Without one, obj is
// owner's only if it cannot carry one (ExpectsOwnerReference is false: another namespace,
// cluster-scoped, kept) and holds both owner's UID label and an entry of the engine's field
// manager. A label alone never makes an object kdag's: a user's renamed copy of a generated
// Secret keeps the labels, not the owner reference.
func (e *Engine) Owns(owner Owner, obj metav1.Object) bool {
	if ref := metav1.GetControllerOfNoCopy(obj); ref != nil {
		return ref.UID == owner.Object.GetUID()
	}
	if ExpectsOwnerReference(owner.Object, obj) {
		return false
	}
	return obj.GetLabels()[kdagv1alpha1.LabelOwnerUID] == string(owner.Object.GetUID()) && hasManagerEntry(obj, e.opts.FieldManager)
}

// ExpectsOwnerReference reports whether kdag gives obj a controller owner reference to owner:
// unless obj is kept (Kept), in another namespace than a namespaced owner, or cluster-scoped under
// a namespaced owner (an owner reference cannot cross namespaces).
func ExpectsOwnerReference(owner client.Object, obj metav1.Object) bool {
	return !Kept(obj) && (owner.GetNamespace() == "" || obj.GetNamespace() == owner.GetNamespace())
}

// Kept reports whether obj's deletion policy is keep: it is annotated kdag.dev/resource-policy:
// keep (set by kdag on Keep nodes, or by a user) or kdag.dev/keep: "true" (the users' short
// alias). Evaluated on the live object, it is what makes kdag drop the owner reference
// of an object a user annotated, and orphan rather than delete it on prune and teardown.
func Kept(obj metav1.Object) bool {
	return KeptBy(obj) != ""
}

// KeptBy returns the annotation that keeps obj, as "key: value" for events and logs
// ("kdag.dev/resource-policy: keep" or "kdag.dev/keep: true"), or "" when obj is not kept.
func KeptBy(obj metav1.Object) string {
	ann := obj.GetAnnotations()
	switch {
	case ann[kdagv1alpha1.AnnotationResourcePolicy] == kdagv1alpha1.ResourcePolicyKeep:
		return kdagv1alpha1.AnnotationResourcePolicy + ": " + kdagv1alpha1.ResourcePolicyKeep
	case ann[kdagv1alpha1.AnnotationKeep] == "true":
		return kdagv1alpha1.AnnotationKeep + ": true"
	}
	return ""
}

// hasManagerEntry reports whether obj's managed fields hold an entry of fieldManager on the main
// resource: its server-side applies, or the merge patch with which kdag takes ownership of an
// object without rewriting it (takeOwnership).
func hasManagerEntry(obj metav1.Object, fieldManager string) bool {
	for _, mf := range obj.GetManagedFields() {
		if mf.Manager == fieldManager && mf.Subresource == "" {
			return true
		}
	}
	return false
}

// hasOwnerLabels reports whether obj carries kdag's labels for owner, its shard label included
// (the owner's value, or none when the owner has none).
func hasOwnerLabels(owner Owner, obj metav1.Object) bool {
	l := obj.GetLabels()
	return l[kdagv1alpha1.LabelOwnerUID] == string(owner.Object.GetUID()) && l[kdagv1alpha1.LabelController] == owner.Controller &&
		l[kdagv1alpha1.LabelManagedBy] == "kdag" && hasOwnerShard(owner, obj)
}

// hasOwnerShard reports whether obj's kdag.dev/shard label is its owner's (none when the owner
// has none).
func hasOwnerShard(owner Owner, obj metav1.Object) bool {
	shard, sharded := owner.Object.GetLabels()[kdagv1alpha1.LabelShard]
	got, has := obj.GetLabels()[kdagv1alpha1.LabelShard]
	return has == sharded && got == shard
}

// mayAdopt reports whether an existing object that is not owner's may be taken over: with the
// Adopt policy, or when its kdag.dev/adopt annotation names owner.
func (e *Engine) mayAdopt(owner Owner, p Policy, obj metav1.Object) bool {
	if p.Adopt {
		return true
	}
	want, ok := obj.GetAnnotations()[kdagv1alpha1.AnnotationAdopt]
	if !ok {
		return false
	}
	return want == owner.AdoptValue(obj.GetNamespace()) ||
		want == owner.Kind+"/"+owner.Object.GetNamespace()+"/"+owner.Object.GetName()
}

// refusal returns the AdoptionError for obj, which exists but is not owner's.
func (e *Engine) refusal(owner Owner, desired, obj metav1.Object) *AdoptionError {
	u, _ := desired.(interface{ GetKind() string })
	kind := ""
	if u != nil {
		kind = u.GetKind()
	}
	err := &AdoptionError{Object: describeKind(kind, obj), Annotation: owner.AdoptValue(obj.GetNamespace())}
	if uid := obj.GetLabels()[kdagv1alpha1.LabelOwnerUID]; uid != "" && uid != string(owner.Object.GetUID()) {
		err.OtherOwnerUID = uid
	} else {
		err.Manager = foreignManager(obj.GetManagedFields(), e.opts.FieldManager)
	}
	return err
}

func describeKind(kind string, obj metav1.Object) string {
	if obj.GetNamespace() == "" {
		return kind + " " + obj.GetName()
	}
	return kind + " " + obj.GetNamespace() + "/" + obj.GetName()
}

// foreignManager names the field managers of an object kdag did not create, for the message.
func foreignManager(entries []metav1.ManagedFieldsEntry, self string) string {
	seen := map[string]bool{}
	for _, e := range entries {
		if e.Manager != self {
			seen[e.Manager] = true
		}
	}
	names := make([]string, 0, len(seen))
	for n := range seen {
		names = append(names, n)
	}
	sort.Strings(names)
	if len(names) == 0 {
		return "unknown"
	}
	return names[0]
}

// AdoptionError is Apply's error when the object exists but is not the owner's, which may not
// adopt it. The object is left untouched.
type AdoptionError struct {
	// Object names the refused object, "Kind namespace/name".
	Object string
	// Manager is a field manager of the existing object, when it has no kdag owner at all.
	Manager string
	// OtherOwnerUID is set when the object belongs to another kdag owner.
	OtherOwnerUID string
	// Annotation is the kdag.dev/adopt value with which a user lets the owner adopt the object.
	Annotation string
}

func (e *AdoptionError) Error() string {
	if e.OtherOwnerUID != "" {
		return fmt.Sprintf("%s exists and belongs to another owner (UID %s): rename one of them, or annotate it %s=%s to hand it over",
			e.Object, e.OtherOwnerUID, kdagv1alpha1.AnnotationAdopt, e.Annotation)
	}
	return fmt.Sprintf("%s exists and was not created by kdag (field manager %q): delete it, or annotate it %s=%s "+
		"to let this owner adopt it", e.Object, e.Manager, kdagv1alpha1.AnnotationAdopt, e.Annotation)
}

// IsInvalid reports whether err is the API server's own validation refusing an object: 422
// Invalid with at least one cause that points into the object (a field path). A
// ValidatingAdmissionPolicy's denial is also 422 Invalid, but its cause names no field, and an
// admission webhook's denial says so in its message: both are policy decisions an administrator
// can change, not errors of the object. Nor is a cause that is the server failing to allocate a
// Service's cluster IP (serverAllocationFailed): the same object goes through once the server
// can allocate again.
func IsInvalid(err error) bool {
	var status apierrors.APIStatus
	if err == nil || !errors.As(err, &status) {
		return false
	}
	st := status.Status()
	if st.Code != http.StatusUnprocessableEntity || st.Reason != metav1.StatusReasonInvalid || DeniedByAdmission(st.Message) {
		return false
	}
	if st.Details == nil {
		return false
	}
	for _, c := range st.Details.Causes {
		if c.Field != "" && !serverAllocationFailed(c) {
			return true
		}
	}
	return false
}

// serverAllocationFailed reports whether cause is kube-apiserver's IP allocator failing for a
// Service that asked for no particular IP, which kube-apiserver v1.36 and later report as
// spec.clusterIPs Invalid ("failed to allocate IP: <storage error>", while etcd is unavailable,
// say; before v1.36 it was a 500). A Service asking for a taken IP gets "failed to allocate IP
// <ip>: ...", an error of the object, which stays Invalid.
func serverAllocationFailed(cause metav1.StatusCause) bool {
	return cause.Field == "spec.clusterIPs" && strings.Contains(cause.Message, "failed to allocate IP: ")
}

// DeniedByAdmission reports whether an API error message comes from an admission webhook or an
// admission policy (k8s.io/apiserver's webhook and policy plugins word them so, the same in
// v0.34 to v0.37, the API servers of Kubernetes v1.34 to v1.37).
func DeniedByAdmission(msg string) bool {
	return strings.Contains(msg, "admission webhook ") && strings.Contains(msg, " denied the request") ||
		strings.Contains(msg, " denied request: ")
}

// Admits reports how Apply would treat live, an existing object of desired's name, for owner
// under policy p, without writing anything (the live plan asks it): adopt false and a
// nil error when live is owner's (Owns); adopt true when it is not but may be taken over (the
// Adopt policy, or its kdag.dev/adopt annotation names owner); an *AdoptionError, the one Apply
// would return, when it is not owner's and may not be adopted.
func (e *Engine) Admits(owner Owner, desired *unstructured.Unstructured, live client.Object, p Policy) (adopt bool, err error) {
	if e.Owns(owner, live) {
		return false, nil
	}
	if e.mayAdopt(owner, p, live) {
		return true, nil
	}
	return false, e.refusal(owner, desired, live)
}

// HasOwnerLabels reports whether obj carries kdag's labels for owner (kdag.dev/owner-uid,
// kdag.dev/controller, app.kubernetes.io/managed-by, and kdag.dev/shard as the owner has it): an
// owned create-only object without them gets them back with a merge patch, its only write (the
// live plan shows it as an update).
func HasOwnerLabels(owner Owner, obj metav1.Object) bool { return hasOwnerLabels(owner, obj) }

// sameScope reports whether obj can hold an owner reference to owner: owner is cluster-scoped,
// or both are in one namespace.
func sameScope(owner, obj metav1.Object) bool {
	return owner.GetNamespace() == "" || obj.GetNamespace() == owner.GetNamespace()
}

// controllerRef returns obj's controller owner reference, nil without one.
func controllerRef(obj metav1.Object) *metav1.OwnerReference {
	return metav1.GetControllerOfNoCopy(obj)
}
