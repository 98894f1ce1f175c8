package resources

import (
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	"sigs.k8s.io/structured-merge-diff/v6/value"
)

// withManagedFields returns a copy of live carrying the given entries.
func withManagedFields(t *testing.T, live *unstructured.Unstructured, entries ...metav1.ManagedFieldsEntry) *unstructured.Unstructured {
	t.Helper()
	out := live.DeepCopy()
	out.SetManagedFields(entries)
	return out
}

func entry(manager string, op metav1.ManagedFieldsOperationType, subresource, fields string) metav1.ManagedFieldsEntry {
	e := metav1.ManagedFieldsEntry{Manager: manager, Operation: op, Subresource: subresource, FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{}}
	e.FieldsV1.SetRawString(fields)
	return e
}

// TestDrift_Rules runs Drift on hand-written managed fields, for the rules a real API server
// rarely shows (see drift_envtest_test.go for the real thing).
func TestDrift_Rules(t *testing.T) {
	const upd, apply = metav1.ManagedFieldsOperationUpdate, metav1.ManagedFieldsOperationApply
	desired := obj(t, `
apiVersion: v1
kind: Service
metadata: {namespace: ns, name: web, labels: {app: web, app.kubernetes.io/name: a}}
spec:
  ports: [{port: 80, name: http, targetPort: 8080}]
  selector: {app: web}
  ipFamilies: [IPv4]
  extra: {cpu: "0.5", count: 3}
`)
	live := obj(t, `
apiVersion: v1
kind: Service
metadata: {namespace: ns, name: web, labels: {app: web, app.kubernetes.io/name: a}, annotations: {note: hi}}
spec:
  ports: [{port: 80, protocol: TCP, name: http, targetPort: 8080}, {port: 90, protocol: TCP, name: other}]
  selector: {app: web, tier: x}
  ipFamilies: [IPv4]
  extra: {cpu: "500m", count: 3.0}
`)
	tests := []struct {
		name    string
		live    *unstructured.Unstructured
		entries []metav1.ManagedFieldsEntry
		want    []string
	}{
		{name: "kdag's own entry is not drift",
			entries: []metav1.ManagedFieldsEntry{entry("kdag", apply, "", `{"f:metadata":{"f:labels":{"f:app":{}}}}`)},
			live:    withLabel(live, "app", "changed")},
		{name: "foreign annotation kdag does not set",
			entries: []metav1.ManagedFieldsEntry{entry("kubectl", upd, "", `{"f:metadata":{"f:annotations":{"f:note":{}}}}`)}},
		{name: "foreign label with another value",
			entries: []metav1.ManagedFieldsEntry{entry("kubectl", upd, "", `{"f:metadata":{"f:labels":{"f:app":{}}}}`)},
			live:    withLabel(live, "app", "changed"),
			want:    []string{".metadata.labels.app"}},
		{name: "label with a dotted key is quoted",
			entries: []metav1.ManagedFieldsEntry{entry("kubectl", upd, "", `{"f:metadata":{"f:labels":{"f:app.kubernetes.io/name":{}}}}`)},
			live:    withLabel(live, "app.kubernetes.io/name", "b"),
			want:    []string{`.metadata.labels["app.kubernetes.io/name"]`}},
		{name: "status subresource entry is ignored",
			entries: []metav1.ManagedFieldsEntry{entry("kubectl", upd, "status", `{"f:metadata":{"f:labels":{"f:app":{}}}}`)},
			live:    withLabel(live, "app", "changed")},
		{name: "unknown operation is ignored",
			entries: []metav1.ManagedFieldsEntry{entry("kubectl", "Patch", "", `{"f:metadata":{"f:labels":{"f:app":{}}}}`)},
			live:    withLabel(live, "app", "changed")},
		{name: "quantity in canonical form and float number are equal",
			entries: []metav1.ManagedFieldsEntry{entry("other", upd, "", `{"f:spec":{"f:extra":{"f:cpu":{},"f:count":{}}}}`)}},
		{name: "key field the desired element leaves out (protocol) still matches",
			entries: []metav1.ManagedFieldsEntry{entry("other", upd, "",
				`{"f:spec":{"f:ports":{"k:{\"port\":80,\"protocol\":\"TCP\"}":{".":{},"f:targetPort":{}}}}}`)},
			live: withPortTarget(live, 9090),
			want: []string{".spec.ports[port=80,protocol=TCP].targetPort"}},
		{name: "list element kdag does not set",
			entries: []metav1.ManagedFieldsEntry{entry("other", upd, "",
				`{"f:spec":{"f:ports":{"k:{\"port\":90,\"protocol\":\"TCP\"}":{".":{},"f:name":{}}}}}`)}},
		{name: "map kdag sets as a whole holds the desired keys",
			entries: []metav1.ManagedFieldsEntry{entry("other", upd, "", `{"f:spec":{"f:selector":{}}}`)}},
		{name: "set element present in both",
			entries: []metav1.ManagedFieldsEntry{entry("other", apply, "", `{"f:spec":{"f:ipFamilies":{"v:\"IPv4\"":{}}}}`)}},
		{name: "two foreign managers report one path once",
			entries: []metav1.ManagedFieldsEntry{
				entry("a", upd, "", `{"f:metadata":{"f:labels":{"f:app":{}}}}`),
				entry("b", apply, "", `{"f:metadata":{"f:labels":{"f:app":{}}}}`),
			},
			live: withLabel(live, "app", "changed"),
			want: []string{".metadata.labels.app"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := tt.live
			if l == nil {
				l = live
			}
			got, err := Drift(withManagedFields(t, l, tt.entries...), desired, "kdag")
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("Drift = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestDriftFields_NamesTheManagers: each drifted field comes with the foreign field manager that
// holds it; fields two managers hold are listed once per manager, sorted by path then manager.
func TestDriftFields_NamesTheManagers(t *testing.T) {
	const upd, apply = metav1.ManagedFieldsOperationUpdate, metav1.ManagedFieldsOperationApply
	desired := obj(t, `{apiVersion: v1, kind: ConfigMap, metadata: {namespace: ns, name: cfg}, data: {a: "1", b: "2", c: "3"}}`)
	live := obj(t, `{apiVersion: v1, kind: ConfigMap, metadata: {namespace: ns, name: cfg}, data: {a: "x", b: "y", c: "3"}}`)
	live = withManagedFields(t, live,
		entry("kdag", apply, "", `{"f:data":{"f:a":{},"f:b":{},"f:c":{}}}`),
		entry("rogue", apply, "", `{"f:data":{"f:b":{},"f:a":{}}}`),
		entry("kubectl-edit", upd, "", `{"f:data":{"f:b":{},"f:c":{}}}`),
	)
	got, err := DriftFields(live, desired, "kdag")
	if err != nil {
		t.Fatal(err)
	}
	want := []FieldDrift{{".data.a", "rogue"}, {".data.b", "kubectl-edit"}, {".data.b", "rogue"}}
	if !slices.Equal(got, want) {
		t.Errorf("DriftFields = %+v, want %+v", got, want)
	}
	paths, err := Drift(live, desired, "kdag")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{".data.a", ".data.b"}; !slices.Equal(paths, want) {
		t.Errorf("Drift = %q, want %q", paths, want)
	}
}

func withLabel(u *unstructured.Unstructured, k, v string) *unstructured.Unstructured {
	out := u.DeepCopy()
	labels := out.GetLabels()
	labels[k] = v
	out.SetLabels(labels)
	return out
}

func withPortTarget(u *unstructured.Unstructured, port int64) *unstructured.Unstructured {
	out := u.DeepCopy()
	out.Object["spec"].(map[string]any)["ports"].([]any)[0].(map[string]any)["targetPort"] = port
	return out
}

func TestDrift_Errors(t *testing.T) {
	u := obj(t, `{apiVersion: v1, kind: ConfigMap, metadata: {namespace: ns, name: cfg}}`)
	if _, err := Drift(nil, u, "kdag"); err == nil {
		t.Error("Drift(nil live) returned no error")
	}
	if _, err := Drift(u, nil, "kdag"); err == nil {
		t.Error("Drift(nil desired) returned no error")
	}
	bad := withManagedFields(t, u, entry("other", metav1.ManagedFieldsOperationUpdate, "", `{"f:data":[1]}`))
	_, err := Drift(bad, u, "kdag")
	if err == nil || !strings.Contains(err.Error(), "ConfigMap ns/cfg") || !strings.Contains(err.Error(), `"other"`) {
		t.Errorf("error = %v, want one naming ConfigMap ns/cfg and manager \"other\"", err)
	}
}

func TestResolve(t *testing.T) {
	o := obj(t, `
apiVersion: v1
kind: Pod
metadata: {name: p, finalizers: [a, b]}
spec:
  containers:
  - {name: web, ports: [{containerPort: 80, protocol: TCP}, {containerPort: 80, protocol: UDP}]}
  - {name: side, args: ["x", "y"]}
  - {name: bare, ports: [{containerPort: 53}, {containerPort: 53, protocol: UDP}]}
`)
	key := func(kv ...any) fieldpath.PathElement { return fieldpath.KeyElementByFields(kv...) }
	tests := []struct {
		name   string
		path   fieldpath.Path
		want   any
		wantOK bool
	}{
		{"field", fieldpath.MakePathOrDie("metadata", "name"), "p", true},
		{"missing field", fieldpath.MakePathOrDie("metadata", "uid"), nil, false},
		{"field of a scalar", fieldpath.MakePathOrDie("metadata", "name", "x"), nil, false},
		{"key", fieldpath.MakePathOrDie("spec", "containers", key("name", "side"), "args", 1), "y", true},
		{"missing key", fieldpath.MakePathOrDie("spec", "containers", key("name", "nope")), nil, false},
		{"compound key picks the exact element",
			fieldpath.MakePathOrDie("spec", "containers", key("name", "web"), "ports", key("containerPort", 80, "protocol", "UDP"), "protocol"), "UDP", true},
		{"exact match wins over a partial one",
			fieldpath.MakePathOrDie("spec", "containers", key("name", "bare"), "ports", key("containerPort", 53, "protocol", "UDP"), "protocol"), "UDP", true},
		{"unique partial match",
			fieldpath.MakePathOrDie("spec", "containers", key("name", "bare"), "ports", key("containerPort", 53, "protocol", "TCP"), "containerPort"), int64(53), true},
		{"value", fieldpath.MakePathOrDie("metadata", "finalizers", value.NewValueInterface("b")), "b", true},
		{"missing value", fieldpath.MakePathOrDie("metadata", "finalizers", value.NewValueInterface("c")), nil, false},
		{"index out of range", fieldpath.MakePathOrDie("spec", "containers", key("name", "side"), "args", 2), nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := resolve(o.Object, tt.path)
			if ok != tt.wantOK || (ok && got != tt.want) {
				t.Errorf("resolve(%s) = %v, %v; want %v, %v", tt.path, got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

// Two elements that both match a key only partially are ambiguous: nothing resolves.
func TestFindKeyed_AmbiguousPartialMatch(t *testing.T) {
	l := []any{
		map[string]any{"containerPort": int64(53)},
		map[string]any{"containerPort": int64(53), "name": "x"},
	}
	if e, ok := findKeyed(l, *fieldpath.KeyByFields("containerPort", 53, "protocol", "TCP")); ok {
		t.Fatalf("findKeyed resolved an ambiguous key to %v", e)
	}
}

func TestEqualSemantic(t *testing.T) {
	tests := []struct {
		name          string
		desired, live any
		want          bool
	}{
		{"same string", "a", "a", true},
		{"other string", "a", "b", false},
		{"int and float", int64(3), 3.0, true},
		{"int and other float", int64(3), 3.5, false},
		{"number and string", int64(3), "3", false},
		{"quantity in canonical form", "0.5", "500m", true},
		{"quantity Gi", "1024Mi", "1Gi", true},
		{"different quantity", "0.5", "501m", false},
		{"non-canonical live string is a real change", "1", "1.0", false},
		{"bool", true, true, true},
		{"bool changed", true, false, false},
		{"map subset", map[string]any{"a": "1"}, map[string]any{"a": "1", "b": "2"}, true},
		{"map missing key", map[string]any{"a": "1", "c": "3"}, map[string]any{"a": "1"}, false},
		{"list", []any{"x", "y"}, []any{"x", "y"}, true},
		{"list order", []any{"x", "y"}, []any{"y", "x"}, false},
		{"list longer", []any{"x"}, []any{"x", "y"}, false},
		{"list of maps with defaults", []any{map[string]any{"k": "v"}}, []any{map[string]any{"k": "v", "d": "x"}}, true},
		{"map against scalar", map[string]any{}, "x", false},
		{"null", nil, nil, true},
		{"null against value", nil, "x", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := equalSemantic(tt.desired, tt.live); got != tt.want {
				t.Errorf("equalSemantic(%v, %v) = %v, want %v", tt.desired, tt.live, got, tt.want)
			}
		})
	}
}

func TestPathString(t *testing.T) {
	tests := []struct {
		path fieldpath.Path
		want string
	}{
		{fieldpath.MakePathOrDie("spec", "replicas"), ".spec.replicas"},
		{fieldpath.MakePathOrDie("spec", "containers", fieldpath.KeyElementByFields("name", "web"), "image"), ".spec.containers[name=web].image"},
		{fieldpath.MakePathOrDie("spec", "ports", fieldpath.KeyElementByFields("protocol", "TCP", "port", 80)), ".spec.ports[port=80,protocol=TCP]"},
		{fieldpath.MakePathOrDie("metadata", "finalizers", value.NewValueInterface("example.com/x")), ".metadata.finalizers[=example.com/x]"},
		{fieldpath.MakePathOrDie("spec", "args", 0), ".spec.args[0]"},
		{fieldpath.MakePathOrDie("metadata", "annotations", "kdag.dev/checksum"), `.metadata.annotations["kdag.dev/checksum"]`},
	}
	for _, tt := range tests {
		if got := pathString(tt.path); got != tt.want {
			t.Errorf("pathString(%s) = %q, want %q", tt.path, got, tt.want)
		}
	}
}
