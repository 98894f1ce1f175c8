package reconciler

import (
	"strconv"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kdag-dev/kdag/pkg/testing/testapi"
)

// BenchmarkInferDependencies measures the inference a graph build runs on every reconcile
// (issue 15), for 50 ConfigMaps, 25 Secrets and 25 Deployments that each mount a ConfigMap and
// read a Secret: the cost it adds to a reconcile of a 100-node graph.
func BenchmarkInferDependencies(b *testing.B) {
	owner := &testapi.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "w"}}
	bld := newBuilder(owner, scheme, nil, nil)
	for i := range 50 {
		bld.Add(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm-" + strconv.Itoa(i)}})
	}
	for i := range 25 {
		bld.Add(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s-" + strconv.Itoa(i)}})
	}
	for i := range 25 {
		bld.Add(&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "d-" + strconv.Itoa(i)},
			Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				Containers: []corev1.Container{{Name: "c", EnvFrom: []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{
					LocalObjectReference: corev1.LocalObjectReference{Name: "s-" + strconv.Itoa(i)}}}}}},
				Volumes: []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
					LocalObjectReference: corev1.LocalObjectReference{Name: "cm-" + strconv.Itoa(i)}}}}},
			}}}})
	}
	if err := bld.err(); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		for _, s := range bld.nodes {
			s.blockers, s.inferred = s.blockers[:len(s.blockers)-s.inferred], 0
		}
		bld.inferDependencies()
	}
	if got := bld.nodes[99].inferred; got != 2 {
		b.Fatalf("last Deployment has %d inferred blockers, want 2", got)
	}
}
