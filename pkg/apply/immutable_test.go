package apply_test

import (
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kdag-dev/kdag/pkg/apply"
	"github.com/kdag-dev/kdag/pkg/resources"
)

// TestImmutableFields asks the real API server to change what it refuses to change on an
// existing object, and what it refuses for another reason, and checks which refusals
// ImmutableFields recognizes and the fields the error names. It passes on every supported
// Kubernetes version (`make test-envtest-oldest` runs it on the oldest): up to 1.36 the API server
// refuses a StatefulSet's immutable fields with one cause on "spec", and the engine names the
// fields the desired object changes instead.
func TestImmutableFields(t *testing.T) {
	labels := map[string]string{"app": "x"}
	template := func(image string, restart corev1.RestartPolicy) corev1.PodTemplateSpec {
		return corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: labels},
			Spec:       corev1.PodSpec{RestartPolicy: restart, Containers: []corev1.Container{{Name: "c", Image: image}}},
		}
	}
	claimSpec := func(mode corev1.PersistentVolumeAccessMode, storage string) corev1.PersistentVolumeClaimSpec {
		return corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{mode},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(storage)}},
		}
	}
	statefulSet := func(storage string, replicas int32, serviceName string) *appsv1.StatefulSet {
		return &appsv1.StatefulSet{
			ObjectMeta: metav1.ObjectMeta{Name: "db"},
			Spec: appsv1.StatefulSetSpec{
				Replicas:    ptr.To(replicas),
				Selector:    &metav1.LabelSelector{MatchLabels: labels},
				ServiceName: serviceName,
				Template:    template("postgres:17", corev1.RestartPolicyAlways),
				VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{
					ObjectMeta: metav1.ObjectMeta{Name: "data"},
					Spec:       claimSpec(corev1.ReadWriteOnce, storage),
				}},
			},
		}
	}
	job := func(image string) *batchv1.Job {
		return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "migrate"}, Spec: batchv1.JobSpec{Template: template(image, corev1.RestartPolicyNever)}}
	}
	claim := func(mode corev1.PersistentVolumeAccessMode) *corev1.PersistentVolumeClaim {
		return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data"}, Spec: claimSpec(mode, "1Gi")}
	}
	for _, tc := range []struct {
		name          string
		before, after client.Object
		want          []string // nil: not an immutable-field refusal
	}{
		{"StatefulSet volumeClaimTemplates", statefulSet("1Gi", 1, "db"), statefulSet("2Gi", 1, "db"), []string{"spec.volumeClaimTemplates"}},
		{"StatefulSet volumeClaimTemplates with replicas, which may change", statefulSet("1Gi", 1, "db"), statefulSet("2Gi", 2, "db"),
			[]string{"spec.volumeClaimTemplates"}},
		{"StatefulSet serviceName and volumeClaimTemplates", statefulSet("1Gi", 1, "db"), statefulSet("2Gi", 1, "other"),
			[]string{"spec.serviceName", "spec.volumeClaimTemplates"}},
		{"Job template", job("migrate:1"), job("migrate:2"), []string{"spec.template"}},
		{"PersistentVolumeClaim accessModes", claim(corev1.ReadWriteOnce), claim(corev1.ReadWriteMany), []string{"spec.accessModes"}},
		{"invalid value, not immutable", statefulSet("1Gi", 1, "db"), statefulSet("1Gi", -1, "db"), nil},
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
			} else if isImmutable && !strings.Contains(err.Error(), strings.Join(tc.want, ", ")+" ") {
				t.Errorf("error %q does not name %s", err, strings.Join(tc.want, ", "))
			}
			if !apply.IsInvalid(err) {
				t.Errorf("IsInvalid = false for %v: the refusal must stay terminal", err)
			}
		})
	}
}

// Refusals as the API server words them for an update, captured from kube-apiserver v1.37.1 and
// v1.34.4 (v1.35 and v1.36 word the StatefulSet's as v1.34 does, the others as both do: see
// k8s.io/kubernetes's pkg/apis/apps/validation and pkg/apis/core/validation). Dumps of the invalid
// value are shortened to "…".
var (
	v137StatefulSetClaims = metav1.StatusCause{Type: metav1.CauseTypeFieldValueInvalid, Field: "spec.volumeClaimTemplates",
		Message: `Invalid value: [{"name":"data","Spec":{"AccessModes":["ReadWriteOnce"],…}}]: field is immutable`}
	v137StatefulSetServiceName = metav1.StatusCause{Type: metav1.CauseTypeFieldValueInvalid, Field: "spec.serviceName",
		Message: `Invalid value: "other": field is immutable`}
	v134StatefulSetSpec = metav1.StatusCause{Type: metav1.CauseType(field.ErrorTypeForbidden), Field: "spec",
		Message: "Forbidden: updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', " +
			"'revisionHistoryLimit', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden"}
	jobTemplate = metav1.StatusCause{Type: metav1.CauseTypeFieldValueInvalid, Field: "spec.template",
		Message: `Invalid value: {"labels":{"app":"x"},"Spec":{…}}: field is immutable`}
	claimSpec = metav1.StatusCause{Type: metav1.CauseType(field.ErrorTypeForbidden), Field: "spec",
		Message: "Forbidden: spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims\n" +
			"@@ -1,6 +1,6 @@\n {\n  \"AccessModes\": [\n-  \"ReadWriteOnce\"\n+  \"ReadWriteMany\"\n  ],\n  \"Selector\": null,\n  \"Resources\": {\n"}
	negativeReplicas = metav1.StatusCause{Type: metav1.CauseTypeFieldValueInvalid, Field: "spec.replicas",
		Message: "Invalid value: -1: must be greater than or equal to 0"}
)

// TestChangedImmutableFields_Wordings checks the fields ImmutableFields and ChangedImmutableFields
// name for each supported version's refusal of the same change: the same fields on every version,
// where the server names them; where it names only "spec", ChangedImmutableFields names the fields
// under it that the desired object changes and the message does not list as updatable.
func TestChangedImmutableFields_Wordings(t *testing.T) {
	invalid := func(kind string, causes ...metav1.StatusCause) error {
		return &apierrors.StatusError{ErrStatus: metav1.Status{
			Status: metav1.StatusFailure, Code: http.StatusUnprocessableEntity, Reason: metav1.StatusReasonInvalid,
			Message: kind + ` "db" is invalid`, Details: &metav1.StatusDetails{Kind: kind, Name: "db", Causes: causes},
		}}
	}
	labels := map[string]string{"app": "x"}
	// live is a StatefulSet as the API server stores it: defaults filled in.
	live := &appsv1.StatefulSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "StatefulSet"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "db"},
		Spec: appsv1.StatefulSetSpec{
			Replicas:            ptr.To[int32](1),
			Selector:            &metav1.LabelSelector{MatchLabels: labels},
			ServiceName:         "db",
			PodManagementPolicy: appsv1.OrderedReadyPodManagement,
			UpdateStrategy:      appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "postgres:17", ImagePullPolicy: corev1.PullIfNotPresent}},
					RestartPolicy: corev1.RestartPolicyAlways, DNSPolicy: corev1.DNSClusterFirst},
			},
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
	// desired is the StatefulSet kdag applies: live without the defaults, with changes.
	desired := func(change func(*appsv1.StatefulSet)) *unstructured.Unstructured {
		s := &appsv1.StatefulSet{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "db"},
			Spec: appsv1.StatefulSetSpec{
				Replicas:    ptr.To[int32](1),
				Selector:    &metav1.LabelSelector{MatchLabels: labels},
				ServiceName: "db",
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "postgres:17"}}}},
				VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{
					ObjectMeta: metav1.ObjectMeta{Name: "data"},
					Spec: corev1.PersistentVolumeClaimSpec{
						AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
						Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
					},
				}},
			},
		}
		change(s)
		u, err := resources.Desired(s, appsv1.SchemeGroupVersion.WithKind("StatefulSet"))
		if err != nil {
			t.Fatal(err)
		}
		return u
	}
	grow := func(s *appsv1.StatefulSet) {
		s.Spec.VolumeClaimTemplates[0].Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse("2Gi")
	}
	growAndRename := func(s *appsv1.StatefulSet) { grow(s); s.Spec.ServiceName = "other"; s.Spec.Replicas = ptr.To[int32](3) }

	liveClaim := &corev1.PersistentVolumeClaim{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaim"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "db"},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
			VolumeMode:  ptr.To(corev1.PersistentVolumeFilesystem),
		},
	}
	desiredClaim := func(mode corev1.PersistentVolumeAccessMode, storage string) *unstructured.Unstructured {
		c := &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "db"},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes: []corev1.PersistentVolumeAccessMode{mode},
				Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(storage)}},
			},
		}
		u, err := resources.Desired(c, corev1.SchemeGroupVersion.WithKind("PersistentVolumeClaim"))
		if err != nil {
			t.Fatal(err)
		}
		return u
	}

	for _, tc := range []struct {
		name         string
		err          error
		desired      *unstructured.Unstructured
		live         client.Object
		server, want []string // ImmutableFields, ChangedImmutableFields
	}{
		{"v1.37 StatefulSet claim template", invalid("StatefulSet", v137StatefulSetClaims), desired(grow), live,
			[]string{"spec.volumeClaimTemplates"}, []string{"spec.volumeClaimTemplates"}},
		{"v1.34 StatefulSet claim template", invalid("StatefulSet", v134StatefulSetSpec), desired(grow), live,
			[]string{"spec"}, []string{"spec.volumeClaimTemplates"}},
		{"v1.37 StatefulSet claim template and serviceName, replicas may change",
			invalid("StatefulSet", v137StatefulSetClaims, v137StatefulSetServiceName), desired(growAndRename), live,
			[]string{"spec.serviceName", "spec.volumeClaimTemplates"}, []string{"spec.serviceName", "spec.volumeClaimTemplates"}},
		{"v1.34 StatefulSet claim template and serviceName, replicas may change", invalid("StatefulSet", v134StatefulSetSpec),
			desired(growAndRename), live, []string{"spec"}, []string{"spec.serviceName", "spec.volumeClaimTemplates"}},
		{"v1.34 StatefulSet, no change seen (a removed field): the server's field", invalid("StatefulSet", v134StatefulSetSpec),
			desired(func(*appsv1.StatefulSet) {}), live, []string{"spec"}, []string{"spec"}},
		{"v1.34 StatefulSet, no live object: the server's field", invalid("StatefulSet", v134StatefulSetSpec), desired(grow), nil,
			[]string{"spec"}, []string{"spec"}},
		{"v1.34 to v1.37 Job template", invalid("Job", jobTemplate), nil, nil, []string{"spec.template"}, []string{"spec.template"}},
		{"v1.34 to v1.37 PersistentVolumeClaim access mode", invalid("PersistentVolumeClaim", claimSpec),
			desiredClaim(corev1.ReadWriteMany, "1Gi"), liveClaim, []string{"spec"}, []string{"spec.accessModes"}},
		{"v1.34 to v1.37 PersistentVolumeClaim access mode, requests may change", invalid("PersistentVolumeClaim", claimSpec),
			desiredClaim(corev1.ReadWriteMany, "2Gi"), liveClaim, []string{"spec"}, []string{"spec.accessModes"}},
		{"v1.34 to v1.37 invalid value, not immutable", invalid("StatefulSet", negativeReplicas), desired(grow), live, nil, nil},
		{"an *ImmutableFieldError: its fields", &apply.ImmutableFieldError{Object: "StatefulSet ns/db", Fields: []string{"spec.volumeClaimTemplates"},
			Err: invalid("StatefulSet", v134StatefulSetSpec)}, nil, nil, []string{"spec.volumeClaimTemplates"}, []string{"spec.volumeClaimTemplates"}},
		{"not an API error", errors.New("connection refused"), desired(grow), live, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := apply.ImmutableFields(tc.err); !slices.Equal(got, tc.server) {
				t.Errorf("ImmutableFields = %q, want %q", got, tc.server)
			}
			if got := apply.ChangedImmutableFields(tc.err, tc.desired, tc.live); !slices.Equal(got, tc.want) {
				t.Errorf("ChangedImmutableFields = %q, want %q", got, tc.want)
			}
		})
	}
}
