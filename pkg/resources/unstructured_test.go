package resources

import (
	"strings"
	"testing"

	"github.com/pkg/errors"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
)

const (
	deploymentKind = "Deployment"
	secretKind     = "Secret"
)

// liveDeployment is a typed Deployment as a controller-runtime cache returns it: empty TypeMeta,
// server-set metadata and status filled in, and the zero values a Go literal leaves behind.
func liveDeployment() *appsv1.Deployment {
	labels := map[string]string{"app": "web"}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "ns", Name: "web", Labels: labels,
			ResourceVersion: "42", UID: "0c1d", Generation: 3,
			CreationTimestamp: metav1.Now(),
			ManagedFields:     []metav1.ManagedFieldsEntry{{Manager: "kdag", Operation: metav1.ManagedFieldsOperationApply}},
		},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](2),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{{Name: "web", Image: "nginx:1.27"}},
					Volumes: []corev1.Volume{{
						Name: "cache", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}},
					}},
				},
			},
		},
		Status: appsv1.DeploymentStatus{Replicas: 2, ObservedGeneration: 3},
	}
}

func TestToUnstructured(t *testing.T) {
	typedWithKind := liveDeployment()
	typedWithKind.TypeMeta = metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"namespace": "ns", "name": "cfg"},
		"data":     map[string]any{"k": "v"},
	}}
	tests := []struct {
		name    string
		obj     runtime.Object
		gvk     schema.GroupVersionKind
		wantAV  string
		wantErr string
	}{
		{name: "typed with empty TypeMeta takes gvk", obj: liveDeployment(), gvk: appsv1.SchemeGroupVersion.WithKind(deploymentKind), wantAV: "apps/v1"},
		{name: "typed with TypeMeta and zero gvk", obj: typedWithKind, wantAV: "apps/v1"},
		{name: "unstructured keeps own kind", obj: u, wantAV: "v1"},
		{name: "gvk overrides unstructured", obj: u, gvk: schema.GroupVersionKind{Version: "v2", Kind: "ConfigMap"}, wantAV: "v2"},
		{name: "no kind anywhere", obj: liveDeployment(), wantErr: "object ns/web"},
		{name: "nil object", obj: nil, gvk: corev1.SchemeGroupVersion.WithKind(secretKind), wantErr: "nil object"},
		{name: "typed nil pointer", obj: (*corev1.Secret)(nil), gvk: corev1.SchemeGroupVersion.WithKind(secretKind), wantErr: "nil object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ToUnstructured(tt.obj, tt.gvk)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ToUnstructured: %v", err)
			}
			if got.GetAPIVersion() != tt.wantAV {
				t.Errorf("apiVersion = %q, want %q", got.GetAPIVersion(), tt.wantAV)
			}
			if got.GetName() == "" {
				t.Errorf("name lost in conversion: %v", got.Object)
			}
		})
	}
}

func TestToUnstructured_NoKindIsErrNoKind(t *testing.T) {
	_, err := ToUnstructured(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"}}, schema.GroupVersionKind{})
	if !errors.Is(err, ErrNoKind) {
		t.Fatalf("error = %v, want ErrNoKind", err)
	}
}

func TestToUnstructured_CopiesUnstructured(t *testing.T) {
	in := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "cfg"},
		"data":     map[string]any{"k": "v"},
	}}
	out, err := ToUnstructured(in, schema.GroupVersionKind{})
	if err != nil {
		t.Fatal(err)
	}
	out.Object["data"].(map[string]any)["k"] = "changed"
	if in.Object["data"].(map[string]any)["k"] != "v" {
		t.Fatal("ToUnstructured returned the caller's maps instead of a copy")
	}
}

func TestDesired_Deployment(t *testing.T) {
	d := liveDeployment()
	u, err := Desired(d, appsv1.SchemeGroupVersion.WithKind(deploymentKind))
	if err != nil {
		t.Fatal(err)
	}
	if u.GetAPIVersion() != "apps/v1" || u.GetKind() != "Deployment" {
		t.Errorf("apiVersion/kind = %s/%s", u.GetAPIVersion(), u.GetKind())
	}
	absent := [][]string{
		{"status"},
		{"metadata", "creationTimestamp"}, {"metadata", "resourceVersion"}, {"metadata", "uid"},
		{"metadata", "managedFields"}, {"metadata", "generation"},
		{"spec", "strategy"}, // strategy: {} from a zero struct
		{"spec", "template", "metadata", "creationTimestamp"},
	}
	for _, path := range absent {
		if _, found, _ := unstructured.NestedFieldNoCopy(u.Object, path...); found {
			t.Errorf("%s is still set", strings.Join(path, "."))
		}
	}
	c := u.Object["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
	container := c["containers"].([]any)[0].(map[string]any)
	if _, found := container["resources"]; found {
		t.Errorf("containers[0].resources: {} is still set: %v", container)
	}
	volume := c["volumes"].([]any)[0].(map[string]any)
	if v, found := volume["emptyDir"]; !found || !isEmptyMap(v) {
		t.Errorf("volumes[0].emptyDir: {} was removed, but it selects the volume type: %v", volume)
	}
	kept := map[string]any{
		"spec.replicas": int64(2), "metadata.labels.app": "web", "spec.template.metadata.labels.app": "web",
	}
	for path, want := range kept {
		got, _, _ := unstructured.NestedFieldNoCopy(u.Object, strings.Split(path, ".")...)
		if got != want {
			t.Errorf("%s = %v, want %v", path, got, want)
		}
	}
	assertNoNulls(t, "", u.Object)
	if d.Status.Replicas != 2 || d.ResourceVersion != "42" {
		t.Error("Desired modified its input")
	}
}

func TestDesired_Secret(t *testing.T) {
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "creds", UID: "u1", ResourceVersion: "7"},
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{"password": []byte("hunter2")},
		StringData: map[string]string{"user": "admin"},
	}
	u, err := Desired(s, corev1.SchemeGroupVersion.WithKind(secretKind))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
		"metadata":   map[string]any{"namespace": "ns", "name": "creds"},
		"data":       map[string]any{"password": "aHVudGVyMg=="},
		"stringData": map[string]any{"user": "admin"},
	}
	if !equalJSON(t, u.Object, want) {
		t.Errorf("Desired(secret) = %v\nwant %v", u.Object, want)
	}
}

// A nil pointer field without omitempty (a Deployment's selector) converts to null, which would
// make server-side apply remove the field; Desired drops it.
func TestDesired_DropsNullFields(t *testing.T) {
	d := liveDeployment()
	d.Spec.Selector = nil
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(d)
	if err != nil {
		t.Fatal(err)
	}
	if v, found := m["spec"].(map[string]any)["selector"]; !found || v != nil {
		t.Fatalf("fixture: the converter no longer writes selector: null (got %v, %v)", v, found)
	}
	u, err := Desired(d, appsv1.SchemeGroupVersion.WithKind(deploymentKind))
	if err != nil {
		t.Fatal(err)
	}
	assertNoNulls(t, "", u.Object)
}

// A struct field without omitempty is required even when empty: NetworkPolicy's podSelector: {}
// selects all pods and must survive.
func TestDesired_KeepsRequiredEmptyStruct(t *testing.T) {
	np := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "deny"},
		Spec:       networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}},
	}
	u, err := Desired(np, networkingv1.SchemeGroupVersion.WithKind("NetworkPolicy"))
	if err != nil {
		t.Fatal(err)
	}
	if v, found, _ := unstructured.NestedFieldNoCopy(u.Object, "spec", "podSelector"); !found || !isEmptyMap(v) {
		t.Fatalf("spec.podSelector = %v (found %v), want {}", v, found)
	}
}

func TestDesired_Unstructured(t *testing.T) {
	in := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "cfg", "resourceVersion": "1", "creationTimestamp": nil, "labels": map[string]any{}},
		"data":     map[string]any{"a": "1", "b": nil},
		"status":   map[string]any{"x": "y"},
	}}
	u, err := Desired(in, schema.GroupVersionKind{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "cfg", "labels": map[string]any{}}, // written on purpose: kept
		"data":     map[string]any{"a": "1"},
	}
	if !equalJSON(t, u.Object, want) {
		t.Errorf("Desired(unstructured) = %v\nwant %v", u.Object, want)
	}
	if _, ok := in.Object["status"]; !ok {
		t.Error("Desired modified its input")
	}
}

// Quantities and other types with their own JSON form come out as strings and are left alone.
func TestDesired_KeepsCustomJSONTypes(t *testing.T) {
	d := liveDeployment()
	d.Spec.Template.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("0.5")}
	u, err := Desired(d, appsv1.SchemeGroupVersion.WithKind(deploymentKind))
	if err != nil {
		t.Fatal(err)
	}
	c := u.Object["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0]
	got, _, _ := unstructured.NestedString(c.(map[string]any), "resources", "limits", "cpu")
	if got != "500m" {
		t.Fatalf("resources.limits.cpu = %q, want 500m", got)
	}
}

func assertNoNulls(t *testing.T, path string, v any) {
	t.Helper()
	switch v := v.(type) {
	case nil:
		t.Errorf("%s is null", path)
	case map[string]any:
		for k, e := range v {
			assertNoNulls(t, path+"."+k, e)
		}
	case []any:
		for _, e := range v {
			assertNoNulls(t, path+"[]", e)
		}
	}
}

func equalJSON(t *testing.T, a, b any) bool {
	t.Helper()
	ha, err := hashJSON(a)
	if err != nil {
		t.Fatal(err)
	}
	hb, err := hashJSON(b)
	if err != nil {
		t.Fatal(err)
	}
	return ha == hb
}
