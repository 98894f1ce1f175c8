package workload

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestSetReady: what SetReady writes is what kstatus (the readiness kdag uses) calls Current,
// for the object's current generation and replicas; another type is an error.
func TestSetReady(t *testing.T) {
	meta := metav1.ObjectMeta{Name: "x", Namespace: "ns", Generation: 3}
	for _, tc := range []struct {
		name string
		obj  client.Object
		gvk  string // "apiVersion Kind"
	}{
		{"Deployment of 3 replicas", &appsv1.Deployment{ObjectMeta: meta, Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](3)}}, "apps/v1 Deployment"},
		{"Deployment, replicas defaulted", &appsv1.Deployment{ObjectMeta: meta}, "apps/v1 Deployment"},
		{"StatefulSet", &appsv1.StatefulSet{ObjectMeta: meta, Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](2)}}, "apps/v1 StatefulSet"},
		{"Job", &batchv1.Job{ObjectMeta: meta}, "batch/v1 Job"},
		{"PersistentVolumeClaim", &corev1.PersistentVolumeClaim{ObjectMeta: meta, Spec: corev1.PersistentVolumeClaimSpec{
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}},
			"v1 PersistentVolumeClaim"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before, err := kstatusOf(tc.obj, tc.gvk)
			if err != nil {
				t.Fatal(err)
			}
			if before == status.CurrentStatus {
				t.Fatalf("kstatus %s before SetReady: the case proves nothing", before)
			}
			if err := SetReady(tc.obj, metav1.Now()); err != nil {
				t.Fatal(err)
			}
			if got, err := kstatusOf(tc.obj, tc.gvk); err != nil || got != status.CurrentStatus {
				t.Errorf("kstatus %s (%v) after SetReady, want %s", got, err, status.CurrentStatus)
			}
		})
	}
	if err := SetReady(&corev1.ConfigMap{}, metav1.Now()); err == nil {
		t.Error("SetReady of a ConfigMap: no error, want one (no ready status to write)")
	}
}

// kstatusOf computes kstatus's status of obj, typed as gvk ("apps/v1 Deployment").
func kstatusOf(obj client.Object, gvk string) (status.Status, error) {
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return "", err
	}
	u := &unstructured.Unstructured{Object: content}
	apiVersion, kind, _ := strings.Cut(gvk, " ")
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	res, err := status.Compute(u)
	if err != nil {
		return "", err
	}
	return res.Status, nil
}
