// Package workload writes the status that Kubernetes' built-in controllers write once a workload
// is ready, for tests on an API server that runs no controllers (envtest): a Deployment's
// available rollout, a StatefulSet's ready replicas, a Job's success, a claim's binding. One
// place for kdag's own tests and the test kit (controllertest.Harness.MarkReady).
package workload

import (
	"context"

	"github.com/pkg/errors"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// SetReady sets obj's status, in place, as its controller does at now once it is ready: a
// Deployment's rollout available (every replica of spec.replicas, default 1, updated, ready and
// available; Available and Progressing True), a StatefulSet's replicas ready at one revision, a
// Job succeeded (Complete, its start time kept), a PersistentVolumeClaim bound with the capacity
// it requests. Every status is for obj's current generation. Other types are an error.
func SetReady(obj client.Object, now metav1.Time) error {
	switch o := obj.(type) {
	case *appsv1.Deployment:
		n := ptr.Deref(o.Spec.Replicas, 1)
		o.Status = appsv1.DeploymentStatus{
			ObservedGeneration: o.Generation,
			Replicas:           n, UpdatedReplicas: n, ReadyReplicas: n, AvailableReplicas: n,
			Conditions: []appsv1.DeploymentCondition{
				{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable", LastUpdateTime: now, LastTransitionTime: now},
				{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "NewReplicaSetAvailable", LastUpdateTime: now, LastTransitionTime: now},
			},
		}
	case *appsv1.StatefulSet:
		n := ptr.Deref(o.Spec.Replicas, 1)
		o.Status = appsv1.StatefulSetStatus{
			ObservedGeneration: o.Generation,
			Replicas:           n, ReadyReplicas: n, CurrentReplicas: n, UpdatedReplicas: n, AvailableReplicas: n,
			CurrentRevision: o.Name + "-rev", UpdateRevision: o.Name + "-rev",
		}
	case *corev1.PersistentVolumeClaim:
		o.Status = corev1.PersistentVolumeClaimStatus{
			Phase: corev1.ClaimBound, AccessModes: o.Spec.AccessModes, Capacity: o.Spec.Resources.Requests,
		}
	case *batchv1.Job:
		start := now
		if o.Status.StartTime != nil {
			start = *o.Status.StartTime
		}
		o.Status = batchv1.JobStatus{StartTime: &start, CompletionTime: &now, Succeeded: ptr.Deref(o.Spec.Completions, 1),
			Conditions: []batchv1.JobCondition{
				{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastTransitionTime: now, LastProbeTime: now},
				{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: now, LastProbeTime: now},
			}}
	default:
		return errors.Errorf("workload: %T has no ready status here: want a Deployment, StatefulSet, Job or PersistentVolumeClaim", obj)
	}
	return nil
}

// MarkReady reads obj (selected by its namespace and name) from cl, sets its ready status
// (SetReady) and writes it to the status subresource, again on a conflict (client-go's
// retry.DefaultRetry). obj holds the written object afterwards, its resourceVersion included.
// It returns SetReady's error for another type, or the read's or write's.
func MarkReady(ctx context.Context, cl client.Client, obj client.Object) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := cl.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			return err
		}
		if err := SetReady(obj, metav1.Now()); err != nil {
			return err
		}
		return cl.Status().Update(ctx, obj)
	})
}
