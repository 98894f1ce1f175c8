package resources

import (
	"fmt"

	"github.com/pkg/errors"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
)

// The values of Readiness.Status: kstatus statuses.
const (
	// StatusCurrent: the object is fully reconciled. The only ready status.
	StatusCurrent = string(status.CurrentStatus)
	// StatusInProgress: the object is on its way; wait for it.
	StatusInProgress = string(status.InProgressStatus)
	// StatusFailed: the object will not become ready without a change (a failed Job, a Deployment
	// past its progress deadline, a resource with Stalled=True). The caller should fail the node.
	StatusFailed = string(status.FailedStatus)
	// StatusTerminating: the object is being deleted.
	StatusTerminating = string(status.TerminatingStatus)
	// StatusNotFound: there is no object (Ready was given nil).
	StatusNotFound = string(status.NotFoundStatus)
)

// Readiness is the outcome of Ready.
type Readiness struct {
	// Ready is true only for Status Current.
	Ready bool
	// Status is one of the Status* constants (a kstatus status).
	Status string
	// Message says why, in kstatus' words; never object content.
	Message string
	// Inherited: the status claims a generation above the object's own (status.observedGeneration
	// > metadata.generation), so it was written for an earlier object of the same name. The
	// StatefulSet controller does that when a StatefulSet is re-created within moments of the old
	// one's deletion (kubernetes/kubernetes#126432), and writes the status again only once the
	// spec changes. Status is then InProgress, whatever the rest of the status says.
	Inherited bool
}

// Ready computes whether the live object u is ready, with kstatus' rules (sigs.k8s.io/cli-utils
// kstatus): Deployments, StatefulSets, DaemonSets, PVCs (Bound), Services (LoadBalancer with an
// IP), always-ready kinds (ConfigMap, Secret), and any resource with the standard conditions
// (Ready, Reconciling, Stalled) and status.observedGeneration equal to metadata.generation.
//
// Three rules differ from kstatus:
//   - A Job is ready only once it has the condition Complete=True. kstatus counts a started Job
//     as Current, but a Job a graph waits for (a migration) must have finished.
//   - A PersistentVolumeClaim is ready while Pending, not only once Bound, and Failed once Lost
//     (its volume is gone). A claim of a StorageClass with volumeBindingMode WaitForFirstConsumer
//     binds only once a pod that mounts it is scheduled: the pod's workload, a dependent of the
//     claim in the graph, would otherwise wait for the claim forever. The consumer's own readiness
//     covers the binding (its pod does not run before).
//   - A status whose observedGeneration is above the object's generation is InProgress with
//     Inherited set (an earlier object's status, see Readiness.Inherited); kstatus reports the
//     mismatch too, but says "not yet observed".
//
// A nil u gives StatusNotFound; an object with a deletionTimestamp StatusTerminating; both are not
// ready. Not ready is not an error: the error is returned only when kstatus cannot read the object
// (a malformed status, such as conditions that are not a list).
//
// Known kstatus limitation: a custom resource whose controller has not yet written any status
// (no conditions, no observedGeneration) is Current; use a per-node check for such kinds.
func Ready(u *unstructured.Unstructured) (Readiness, error) {
	if u == nil {
		return Readiness{Status: StatusNotFound, Message: "Resource not found"}, nil
	}
	if observed, ok, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration"); ok && u.GetDeletionTimestamp() == nil && observed > u.GetGeneration() {
		return Readiness{Status: StatusInProgress, Inherited: true, Message: fmt.Sprintf(
			"its status is an earlier object's of the same name (observedGeneration %d, generation %d): "+
				"its controller writes it again once its spec changes", observed, u.GetGeneration())}, nil
	}
	res, err := status.Compute(u)
	if err != nil {
		return Readiness{}, errors.Wrapf(err, "compute readiness of %s", describeU(u))
	}
	r := Readiness{Status: string(res.Status), Message: res.Message}
	switch {
	case r.Status == StatusCurrent && isJob(u) && !JobComplete(u):
		r.Status, r.Message = StatusInProgress, "Job not complete: "+res.Message
	case r.Status == StatusInProgress && isClaim(u):
		switch phase, _, _ := unstructured.NestedString(u.Object, "status", "phase"); phase {
		case "", string(corev1.ClaimPending):
			r.Status, r.Message = StatusCurrent, "PVC is Pending: it binds once a volume is provisioned or a pod that mounts it is scheduled"
		case string(corev1.ClaimLost):
			r.Status, r.Message = StatusFailed, "PVC is Lost: its PersistentVolume is gone; restore the volume or delete the claim"
		}
	}
	r.Ready = r.Status == StatusCurrent
	return r, nil
}

// TypedReady answers Ready for a typed object of a kind that has no status (ConfigMap, Secret,
// ServiceAccount, Role, RoleBinding, ClusterRole, ClusterRoleBinding) without converting it:
// kstatus finds such an object Current unless it is being deleted (StatusTerminating). ok is
// false for any other object, typed or not: call Ready with its unstructured form. It exists
// because the conversion cost more than the answer for the objects most graphs hold most of.
func TypedReady(obj Object) (r Readiness, ok bool) {
	// kstatus' messages: its list of always-ready kinds, or its generic rule (no conditions).
	msg := "Resource is current"
	switch obj.(type) {
	case *corev1.ConfigMap, *corev1.Secret:
		msg = "Resource is always ready"
	case *corev1.ServiceAccount, *rbacv1.Role, *rbacv1.RoleBinding, *rbacv1.ClusterRole, *rbacv1.ClusterRoleBinding:
	default:
		return Readiness{}, false
	}
	if isNil(obj) {
		return Readiness{}, false
	}
	if obj.GetDeletionTimestamp() != nil {
		return Readiness{Status: StatusTerminating, Message: "Resource scheduled for deletion"}, true
	}
	return Readiness{Ready: true, Status: StatusCurrent, Message: msg}, true
}

func isJob(u *unstructured.Unstructured) bool {
	gvk := u.GroupVersionKind()
	return gvk.Group == "batch" && gvk.Kind == "Job"
}

func isClaim(u *unstructured.Unstructured) bool {
	gvk := u.GroupVersionKind()
	return gvk.Group == "" && gvk.Kind == "PersistentVolumeClaim"
}

// JobComplete reports whether u, a Job, has the condition Complete=True (it ran to completion).
func JobComplete(u *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if ok && m["type"] == "Complete" && m["status"] == "True" {
			return true
		}
	}
	return false
}

// GenerationObserved reports whether a custom resource's controller has written status for u's
// generation, as far as u's status can say: false when the status is empty, or when
// status.observedGeneration or the observedGeneration of any condition is another generation;
// true otherwise (a status that names no generation is kstatus' to judge). kdag waits for such a status before it trusts
// kstatus on a custom resource (controller.Options.ReadyWhen documents the rule).
func GenerationObserved(u *unstructured.Unstructured) bool {
	status, _ := u.Object["status"].(map[string]any)
	if len(status) == 0 {
		return false
	}
	gen := u.GetGeneration()
	if observed, ok, _ := unstructured.NestedInt64(status, "observedGeneration"); ok && observed != gen {
		return false
	}
	conditions, _, _ := unstructured.NestedSlice(status, "conditions")
	for _, c := range conditions {
		m, _ := c.(map[string]any)
		if observed, ok, _ := unstructured.NestedInt64(m, "observedGeneration"); ok && observed != gen {
			return false
		}
	}
	return true
}

// Failure returns the reason and message of u's first condition that says it failed for good: a
// True condition of type Failed or Stalled (a Job's Failed, a kstatus-style Stalled), or a
// Progressing=False condition (a Deployment past its progress deadline). ok is false when u has
// none; reason and message are the object's own, unchecked (an empty reason stays empty).
func Failure(u *unstructured.Unstructured) (reason, message string, ok bool) {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, isMap := c.(map[string]any)
		if !isMap {
			continue
		}
		typ, status := fmt.Sprint(m["type"]), fmt.Sprint(m["status"])
		if (typ == "Failed" || typ == "Stalled") && status == "True" || typ == "Progressing" && status == "False" {
			reason, _ = m["reason"].(string)
			message, _ = m["message"].(string)
			return reason, message, true
		}
	}
	return "", "", false
}
