package apply_test

import (
	"errors"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kdag-dev/kdag/pkg/apply"
)

// TestImmutableFields asks the real API server to change what it refuses to change on an
// existing object, and what it refuses for another reason, and checks which refusals
// ImmutableFields recognizes and the fields it names (issue 14).
func TestImmutableFields(t *testing.T) {
	labels := map[string]string{"app": "x"}
	template := func(image string, restart corev1.RestartPolicy) corev1.PodTemplateSpec {
		return corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: labels},
			Spec:       corev1.PodSpec{RestartPolicy: restart, Containers: []corev1.Container{{Name: "c", Image: image}}},
		}
	}
	statefulSet := func(storage string, replicas int32) *appsv1.StatefulSet {
		return &appsv1.StatefulSet{
			ObjectMeta: metav1.ObjectMeta{Name: "db"},
			Spec: appsv1.StatefulSetSpec{
				Replicas: ptr.To(replicas),
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: template("postgres:17", corev1.RestartPolicyAlways),
				VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{
					ObjectMeta: metav1.ObjectMeta{Name: "data"},
					Spec: corev1.PersistentVolumeClaimSpec{
						AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
						Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(storage)}},
					},
				}},
			},
		}
	}
	job := func(image string) *batchv1.Job {
		return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "migrate"}, Spec: batchv1.JobSpec{Template: template(image, corev1.RestartPolicyNever)}}
	}
	for _, tc := range []struct {
		name          string
		before, after client.Object
		want          []string // nil: not an immutable-field refusal
	}{
		{"StatefulSet volumeClaimTemplates", statefulSet("1Gi", 1), statefulSet("2Gi", 1), []string{"spec.volumeClaimTemplates"}},
		{"Job template", job("migrate:1"), job("migrate:2"), []string{"spec.template"}},
		{"invalid value, not immutable", statefulSet("1Gi", 1), statefulSet("1Gi", -1), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newEngine(t)
			tc.before.SetNamespace(f.ns)
			tc.after.SetNamespace(f.ns)
			if _, err := f.engine.Apply(t.Context(), f.owner, f.desired(tc.before, apply.DesiredOptions{}), nil, apply.Policy{}); err != nil {
				t.Fatalf("create: %v", err)
			}
			live := f.live(tc.before)
			_, err := f.engine.Apply(t.Context(), f.owner, f.desired(tc.after, apply.DesiredOptions{}), live, apply.Policy{})
			if err == nil {
				t.Fatal("the API server accepted the update; want a refusal")
			}
			if got := apply.ImmutableFields(err); !slices.Equal(got, tc.want) {
				t.Errorf("ImmutableFields = %q, want %q (error: %v)", got, tc.want, err)
			}
			var immutable *apply.ImmutableFieldError
			if isImmutable := errors.As(err, &immutable); isImmutable != (tc.want != nil) {
				t.Errorf("error is an *ImmutableFieldError: %v, want %v (error: %v)", isImmutable, tc.want != nil, err)
			}
			if !apply.IsInvalid(err) {
				t.Errorf("IsInvalid = false for %v: the refusal must stay terminal", err)
			}
		})
	}
}
