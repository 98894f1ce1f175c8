package apply

import (
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
)

// TestParseFieldPath: IgnoreFields' paths (issue 14) are written as kdag names drifted fields,
// with or without the leading dot; list elements are refused.
func TestParseFieldPath(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    FieldPath
		wantErr bool
	}{
		{in: "spec.replicas", want: FieldPath{"spec", "replicas"}},
		{in: ".spec.replicas", want: FieldPath{"spec", "replicas"}},
		{in: `metadata.annotations["example.com/x"]`, want: FieldPath{"metadata", "annotations", "example.com/x"}},
		{in: `.data["a.b"].c`, want: FieldPath{"data", "a.b", "c"}},
		{in: "", wantErr: true},
		{in: ".", wantErr: true},
		{in: "spec..replicas", wantErr: true},
		{in: "spec.containers[name=web].image", wantErr: true},
		{in: "spec.args[0]", wantErr: true},
		{in: `data["x`, wantErr: true},
	} {
		got, err := ParseFieldPath(tc.in)
		if (err != nil) != tc.wantErr || !slices.Equal(got, tc.want) {
			t.Errorf("ParseFieldPath(%q) = %v, %v; want %v, error %v", tc.in, got, err, tc.want, tc.wantErr)
		}
		if err == nil {
			if again, err := ParseFieldPath(got.String()); err != nil || !slices.Equal(again, got) {
				t.Errorf("ParseFieldPath(%q.String() = %q) = %v, %v; want it back", tc.in, got.String(), again, err)
			}
		}
	}
}

// TestWithoutFields: the ignored fields are removed from a copy; the desired object is not
// changed, and is returned as is when it sets none of them.
func TestWithoutFields(t *testing.T) {
	desired := &unstructured.Unstructured{Object: map[string]any{
		"spec": map[string]any{"replicas": int64(3), "paused": false},
	}}
	out := withoutFields(desired, []FieldPath{{"spec", "replicas"}, {"spec", "absent"}})
	if _, found, _ := unstructured.NestedFieldNoCopy(out.Object, "spec", "replicas"); found {
		t.Error("spec.replicas still set")
	}
	if _, found, _ := unstructured.NestedFieldNoCopy(desired.Object, "spec", "replicas"); !found {
		t.Error("the desired object was changed")
	}
	if same := withoutFields(desired, []FieldPath{{"spec", "absent"}}); same != desired {
		t.Error("a copy made although no field was removed")
	}
}

// TestKeptBy: both annotations keep an object (issue 14), and KeptBy names the one present.
func TestKeptBy(t *testing.T) {
	for _, tc := range []struct {
		ann  map[string]string
		want string
	}{
		{nil, ""},
		{map[string]string{kdagv1alpha1.AnnotationResourcePolicy: "keep"}, "kdag.dev/resource-policy: keep"},
		{map[string]string{kdagv1alpha1.AnnotationKeep: "true"}, "kdag.dev/keep: true"},
		{map[string]string{kdagv1alpha1.AnnotationKeep: "false"}, ""},
		{map[string]string{kdagv1alpha1.AnnotationResourcePolicy: "delete"}, ""},
	} {
		obj := &metav1.ObjectMeta{Annotations: tc.ann}
		if got := KeptBy(obj); got != tc.want || Kept(obj) != (tc.want != "") {
			t.Errorf("KeptBy(%v) = %q, Kept %v; want %q", tc.ann, got, Kept(obj), tc.want)
		}
	}
}

// TestParseDriftPolicy: the kdag.dev/drift values.
func TestParseDriftPolicy(t *testing.T) {
	for in, want := range map[string]DriftPolicy{"repair": DriftRepair, "report": DriftReport} {
		if got, err := ParseDriftPolicy(in); err != nil || got != want {
			t.Errorf("ParseDriftPolicy(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"", "Report", "ignore"} {
		if _, err := ParseDriftPolicy(in); err == nil {
			t.Errorf("ParseDriftPolicy(%q): no error", in)
		}
	}
}
