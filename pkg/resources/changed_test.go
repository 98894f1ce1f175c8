package resources

import (
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// TestChangedFields compares a desired StatefulSet with a live one as a cache holds it (typed,
// with the API server's defaults), as an operator does when the API server names only "spec"
// in its refusal.
func TestChangedFields(t *testing.T) {
	// live is the StatefulSet as the API server stores it: defaults filled in, the claim
	// template's status and volumeMode included, its quantity canonical.
	live := &appsv1.StatefulSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "StatefulSet"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "db"},
		Spec: appsv1.StatefulSetSpec{
			Replicas:            ptr.To[int32](1),
			Selector:            &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}},
			ServiceName:         "db",
			PodManagementPolicy: appsv1.OrderedReadyPodManagement,
			UpdateStrategy:      appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType},
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{
				TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaim"},
				ObjectMeta: metav1.ObjectMeta{Name: "data"},
				Spec: corev1.PersistentVolumeClaimSpec{
					AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
					VolumeMode:  ptr.To(corev1.PersistentVolumeFilesystem),
				},
				Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimPending},
			}},
		},
	}
	desired := func(replicas, storage, serviceName string) string {
		return `
apiVersion: apps/v1
kind: StatefulSet
metadata: {namespace: ns, name: db}
spec:
  replicas: ` + replicas + `
  selector: {matchLabels: {app: db}}
  serviceName: ` + serviceName + `
  volumeClaimTemplates:
  - metadata: {name: data}
    spec:
      accessModes: [ReadWriteOnce]
      resources: {requests: {storage: "` + storage + `"}}
`
	}
	updatable := []string{"replicas", "ordinals", "template", "updateStrategy", "revisionHistoryLimit", "persistentVolumeClaimRetentionPolicy", "minReadySeconds"}
	for _, tc := range []struct {
		name      string
		desired   string
		at        string
		updatable []string
		want      []string
	}{
		{"unchanged: defaults and canonical quantities are no change", desired("1", "1024Mi", "db"), "spec", updatable, nil},
		{"updatable fields are left out", desired("3", "1Gi", "db"), "spec", updatable, nil},
		{"a claim template grows", desired("1", "2Gi", "db"), "spec", updatable, []string{"spec.volumeClaimTemplates"}},
		{"two fields, sorted", desired("3", "2Gi", "other"), "spec", updatable, []string{"spec.serviceName", "spec.volumeClaimTemplates"}},
		{"without updatable fields", desired("3", "1Gi", "db"), "spec", nil, []string{"spec.replicas"}},
		{"deeper at", desired("1", "2Gi", "db"), "spec.selector", nil, nil},
		{"nothing at at", desired("1", "2Gi", "db"), "status", nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ChangedFields(live, obj(t, tc.desired), tc.at, tc.updatable)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("ChangedFields = %q, want %q", got, tc.want)
			}
		})
	}

	// An updatable field with a dot: a claim's "resources.requests" may change, its limits not.
	claim := &corev1.PersistentVolumeClaim{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaim"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "data"},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
	desiredClaim := func(mode, storage, limit string) string {
		return `
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {namespace: ns, name: data}
spec:
  accessModes: [` + mode + `]
  resources: {requests: {storage: ` + storage + `}` + limit + `}
`
	}
	claimUpdatable := []string{"resources.requests", "volumeAttributesClassName"}
	for _, tc := range []struct {
		name, desired string
		want          []string
	}{
		{"requests grow: updatable", desiredClaim("ReadWriteOnce", "2Gi", ""), nil},
		{"access mode", desiredClaim("ReadWriteMany", "2Gi", ""), []string{"spec.accessModes"}},
		{"limits, below resources", desiredClaim("ReadWriteOnce", "1Gi", ", limits: {storage: 3Gi}"), []string{"spec.resources.limits"}},
	} {
		t.Run("claim: "+tc.name, func(t *testing.T) {
			got, err := ChangedFields(claim, obj(t, tc.desired), "spec", claimUpdatable)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("ChangedFields = %q, want %q", got, tc.want)
			}
		})
	}

	if _, err := ChangedFields(nil, obj(t, desired("1", "1Gi", "db")), "spec", nil); err == nil || !strings.Contains(err.Error(), "StatefulSet ns/db") {
		t.Errorf("nil live: error %v, want one naming the desired object", err)
	}
}
