package revision

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestChangedPaths(t *testing.T) {
	base := func() map[string]any {
		return map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": "a", "resourceVersion": "1", "annotations": map[string]any{
				"kdag.dev/desired-hash": "x", "kdag.dev/dependencies-hash": "d1"}},
			"data":   map[string]any{"a": "1", "b": "2"},
			"spec":   map[string]any{"replicas": int64(1), "containers": []any{map[string]any{"name": "c", "image": "i:1"}}},
			"status": map[string]any{"ready": true},
		}
	}
	for _, tc := range []struct {
		name   string
		change func(m map[string]any)
		want   []string
	}{
		{"nothing", func(map[string]any) {}, nil},
		{"bookkeeping only", func(m map[string]any) {
			md := m["metadata"].(map[string]any)
			md["resourceVersion"] = "2"
			md["annotations"].(map[string]any)["kdag.dev/desired-hash"] = "y"
			m["status"] = map[string]any{"ready": false}
			delete(m, "apiVersion")
		}, nil},
		{"values, keys added and removed", func(m map[string]any) {
			m["data"] = map[string]any{"a": "changed", "c": "3"}
		}, []string{"data.a", "data.b", "data.c"}},
		{"a list element by index", func(m map[string]any) {
			m["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)["image"] = "i:2"
		}, []string{"spec.containers[0].image"}},
		{"a list that grows, as a whole", func(m map[string]any) {
			spec := m["spec"].(map[string]any)
			spec["containers"] = append(spec["containers"].([]any), map[string]any{"name": "d"})
		}, []string{"spec.containers"}},
		{"a number decoded as float64 is the same", func(m map[string]any) {
			m["spec"].(map[string]any)["replicas"] = float64(1)
		}, nil},
		{"an annotation key with dots", func(m map[string]any) {
			m["metadata"].(map[string]any)["annotations"].(map[string]any)["kdag.dev/dependencies-hash"] = "d2"
		}, []string{"metadata.annotations[kdag.dev/dependencies-hash]"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			after := base()
			tc.change(after)
			if got := ChangedPaths(base(), after); !slices.Equal(got, tc.want) {
				t.Errorf("ChangedPaths = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestName(t *testing.T) {
	if got := Name("Gitea", "demo", 3); got != "gitea-demo-3" {
		t.Errorf("Name = %q", got)
	}
	long := Name("Gitea", strings.Repeat("a", 253), 12)
	if len(long) > 253 || !strings.HasSuffix(long, "-12") || long == Name("Gitea", strings.Repeat("a", 252)+"b", 12) {
		t.Errorf("long Name = %q (%d characters): want at most 253, unique, ending in -12", long, len(long))
	}
}

func TestEncodeDecode_RoundTrip(t *testing.T) {
	owner := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "x/v1", "kind": "K",
		"metadata": map[string]any{"name": "a"}, "spec": map[string]any{"v": "1"}, "status": map[string]any{"s": "x"}}}
	spec, err := Spec(owner)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := spec["status"]; ok || spec["spec"] == nil {
		t.Fatalf("Spec = %v: want spec without status", spec)
	}
	rec := &Record{Time: metav1.Now(), SpecHash: SpecHash(spec), Spec: spec, Nodes: []NodeChange{{Kind: "ConfigMap", Name: "a", Action: "applied", Fields: []string{"data.a"}}}}
	data, err := Encode(rec)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Decode(&appsv1.ControllerRevision{Data: data, Revision: 7})
	if err != nil {
		t.Fatal(err)
	}
	if got.Revision != 7 || got.SpecHash != rec.SpecHash || !slices.Equal(got.Nodes[0].Fields, []string{"data.a"}) {
		t.Errorf("Decode = %+v", got)
	}
	back := WithSpec(owner, map[string]any{"spec": map[string]any{"v": "0"}})
	if v, _, _ := unstructured.NestedString(back.Object, "spec", "v"); v != "0" || back.GetName() != "a" || back.Object["status"] == nil {
		t.Errorf("WithSpec = %v", back.Object)
	}
	if _, err := Decode(&appsv1.ControllerRevision{Data: data}); err != nil {
		t.Fatal(err)
	}
	if _, err := Decode(&appsv1.ControllerRevision{}); err == nil {
		t.Error("Decode of an empty ControllerRevision: no error")
	}
}

func TestHistoryLimit(t *testing.T) {
	for v, want := range map[string]int{"": -1, "3": 3, "0": 0, "-1": -2, "x": -2} {
		o := &metav1.ObjectMeta{}
		if v != "" {
			o.Annotations = map[string]string{AnnotationHistoryLimit: v}
		}
		n, ok := HistoryLimit(o)
		switch want {
		case -1:
			if n != DefaultHistoryLimit || !ok {
				t.Errorf("no annotation: %d, %v", n, ok)
			}
		case -2:
			if n != DefaultHistoryLimit || ok {
				t.Errorf("%q: %d, %v; want the default and false", v, n, ok)
			}
		default:
			if n != want || !ok {
				t.Errorf("%q: %d, %v", v, n, ok)
			}
		}
	}
}

// TestEncode_Canonical: the data is compact JSON with every object's keys sorted, as the API
// server re-encodes it for any patch of a ControllerRevision; other bytes would make a metadata
// patch (the garbage collector orphaning it) fail as a change of the immutable data.
func TestEncode_Canonical(t *testing.T) {
	rec := &Record{Generation: 3, SpecHash: "h", OperatorVersion: "v1",
		Spec:  map[string]any{"zeta": 1, "alpha": map[string]any{"y": "2", "b": []any{map[string]any{"k": 1, "a": 2}}}},
		Nodes: []NodeChange{{Kind: "ConfigMap", Name: "c", Action: "Applied", Fields: []string{"data.x"}}}}
	data, err := Encode(rec)
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := json.Unmarshal(data.Raw, &v); err != nil {
		t.Fatal(err)
	}
	canonical, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if string(data.Raw) != string(canonical) {
		t.Errorf("Encode() = %s\nwant the canonical %s", data.Raw, canonical)
	}
}
