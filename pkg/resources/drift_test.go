package resources

import (
	"errors"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	"sigs.k8s.io/structured-merge-diff/v6/typed"
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
// rarely shows (see internal/apiserver/drift_test.go for the real thing).
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

// thingSchema is a structured-merge-diff schema for a made-up kind with each kind of field the
// API server's schemas have: a keyed list with a defaulted key field, a set, an atomic map, an
// atomic list, a separable map of labels.
const thingSchema = `types:
- name: thing
  map:
    fields:
    - {name: apiVersion, type: {scalar: string}}
    - {name: kind, type: {scalar: string}}
    - {name: metadata, type: {namedType: meta}}
    - {name: spec, type: {namedType: spec}}
- name: meta
  map:
    fields:
    - {name: name, type: {scalar: string}}
    - {name: namespace, type: {scalar: string}}
    - {name: labels, type: {map: {elementType: {scalar: string}}}}
- name: spec
  map:
    fields:
    - {name: replicas, type: {scalar: numeric}}
    - {name: cpu, type: {scalar: string}}
    - {name: env, type: {namedType: envList}}
    - {name: ports, type: {namedType: portList}}
    - {name: tags, type: {list: {elementType: {scalar: string}, elementRelationship: associative}}}
    - {name: selector, type: {map: {elementType: {scalar: string}, elementRelationship: atomic}}}
    - {name: args, type: {list: {elementType: {scalar: string}, elementRelationship: atomic}}}
    - {name: volume, type: {namedType: volume}}
- name: envList
  list:
    elementType: {namedType: envVar}
    elementRelationship: associative
    keys: [name]
- name: envVar
  map:
    fields:
    - {name: name, type: {scalar: string}}
    - {name: value, type: {scalar: string}}
- name: portList
  list:
    elementType: {namedType: port}
    elementRelationship: associative
    keys: [port, protocol]
- name: port
  map:
    fields:
    - {name: port, type: {scalar: numeric}}
    - {name: protocol, type: {scalar: string}, default: TCP}
    - {name: name, type: {scalar: string}}
- name: volume
  map:
    fields:
    - {name: emptyDir, type: {map: {fields: [{name: medium, type: {scalar: string}}]}}}
`

// parserConverter types every object as thingSchema's "thing".
type parserConverter struct{ t typed.ParseableType }

func (c parserConverter) ObjectToTyped(obj runtime.Object, opts ...typed.ValidationOptions) (*typed.TypedValue, error) {
	return c.t.FromUnstructured(obj.(*unstructured.Unstructured).Object, opts...)
}

func (parserConverter) TypedToObject(*typed.TypedValue) (runtime.Object, error) {
	return nil, errors.New("not used")
}

func thingConverter(t *testing.T) parserConverter {
	t.Helper()
	p, err := typed.NewParser(thingSchema)
	if err != nil {
		t.Fatal(err)
	}
	return parserConverter{t: p.Type("thing")}
}

// TestMissingFields_Rules runs MissingFields on hand-written Apply entries and a hand-written
// schema, for each rule of its comment (see internal/apiserver/drift_test.go for the real API server).
func TestMissingFields_Rules(t *testing.T) {
	tc := thingConverter(t)
	desired := obj(t, `
apiVersion: example.com/v1
kind: Thing
metadata: {namespace: ns, name: t, labels: {app: web, tier: front}}
spec:
  replicas: 2
  cpu: "0.5"
  env: [{name: A, value: "1"}, {name: B, value: "2"}]
  ports: [{port: 80, name: http}]
  tags: [a, b]
  selector: {app: web}
  args: [run, --fast]
  volume: {emptyDir: {}}
`)
	tv, err := tc.ObjectToTyped(desired)
	if err != nil {
		t.Fatal(err)
	}
	full, err := tv.ToFieldSet()
	if err != nil {
		t.Fatal(err)
	}
	// What the API server records for an apply of desired: no identity fields.
	full = full.Difference(fieldpath.NewSet(
		fieldpath.MakePathOrDie("apiVersion"), fieldpath.MakePathOrDie("kind"),
		fieldpath.MakePathOrDie("metadata", "name"), fieldpath.MakePathOrDie("metadata", "namespace")))
	env := func(name string, rest ...any) fieldpath.Path {
		return fieldpath.MakePathOrDie(append([]any{"spec", "env", fieldpath.KeyByFields("name", name)}, rest...)...)
	}
	port80 := fieldpath.KeyByFields("port", 80, "protocol", "TCP")
	// entryWithout is kdag's Apply entry after someone took or removed the given fields.
	entryWithout := func(t *testing.T, paths ...fieldpath.Path) metav1.ManagedFieldsEntry {
		t.Helper()
		js, err := full.Difference(fieldpath.NewSet(paths...)).ToJSON()
		if err != nil {
			t.Fatal(err)
		}
		return entry("kdag", metav1.ManagedFieldsOperationApply, "", string(js))
	}
	edit := func(f func(spec map[string]any, meta map[string]any)) *unstructured.Unstructured {
		u := desired.DeepCopy()
		u.Object["spec"].(map[string]any)["cpu"] = "500m" // as the API server stores it
		f(u.Object["spec"].(map[string]any), u.Object["metadata"].(map[string]any))
		return u
	}
	unchanged := edit(func(map[string]any, map[string]any) {})
	tests := []struct {
		name string
		lost []fieldpath.Path // fields kdag's entry no longer holds
		live *unstructured.Unstructured
		want []string
	}{
		{name: "as applied", live: unchanged},
		{name: "identity fields are never reported", live: unchanged,
			lost: []fieldpath.Path{fieldpath.MakePathOrDie("apiVersion"), fieldpath.MakePathOrDie("metadata", "name")}},
		{name: "list item removed is reported once, not field by field",
			lost: []fieldpath.Path{env("B"), env("B", "name"), env("B", "value")},
			live: edit(func(s, _ map[string]any) { s["env"] = []any{map[string]any{"name": "A", "value": "1"}} }),
			want: []string{".spec.env[name=B]"}},
		{name: "list item value replaced",
			lost: []fieldpath.Path{env("B", "value")},
			live: edit(func(s, _ map[string]any) { s["env"].([]any)[1].(map[string]any)["value"] = "3" }),
			want: []string{".spec.env[name=B].value"}},
		{name: "list item held by another manager with the same value", live: unchanged,
			lost: []fieldpath.Path{env("B"), env("B", "name"), env("B", "value")}},
		{name: "keyed by a defaulted key field",
			lost: []fieldpath.Path{
				fieldpath.MakePathOrDie("spec", "ports", port80),
				fieldpath.MakePathOrDie("spec", "ports", port80, "port"),
				fieldpath.MakePathOrDie("spec", "ports", port80, "name"),
			},
			live: edit(func(s, _ map[string]any) { delete(s, "ports") }),
			want: []string{".spec.ports[port=80,protocol=TCP]"}},
		{name: "set item removed",
			lost: []fieldpath.Path{fieldpath.MakePathOrDie("spec", "tags", value.NewValueInterface("b"))},
			live: edit(func(s, _ map[string]any) { s["tags"] = []any{"a"} }),
			want: []string{".spec.tags[=b]"}},
		{name: "atomic map with a key added",
			lost: []fieldpath.Path{fieldpath.MakePathOrDie("spec", "selector")},
			live: edit(func(s, _ map[string]any) { s["selector"] = map[string]any{"app": "web", "extra": "x"} }),
			want: []string{".spec.selector"}},
		{name: "atomic map held by another manager with the same value", live: unchanged,
			lost: []fieldpath.Path{fieldpath.MakePathOrDie("spec", "selector")}},
		{name: "atomic list with an element added",
			lost: []fieldpath.Path{fieldpath.MakePathOrDie("spec", "args")},
			live: edit(func(s, _ map[string]any) { s["args"] = []any{"run", "--fast", "--debug"} }),
			want: []string{".spec.args"}},
		{name: "label removed",
			lost: []fieldpath.Path{fieldpath.MakePathOrDie("metadata", "labels", "tier")},
			live: edit(func(_, m map[string]any) { delete(m["labels"].(map[string]any), "tier") }),
			want: []string{".metadata.labels.tier"}},
		{name: "scalar removed",
			lost: []fieldpath.Path{fieldpath.MakePathOrDie("spec", "replicas")},
			live: edit(func(s, _ map[string]any) { delete(s, "replicas") }),
			want: []string{".spec.replicas"}},
		{name: "quantity in canonical form", live: unchanged,
			lost: []fieldpath.Path{fieldpath.MakePathOrDie("spec", "cpu")}},
		{name: "empty map holds defaults",
			lost: []fieldpath.Path{fieldpath.MakePathOrDie("spec", "volume", "emptyDir")},
			live: edit(func(s, _ map[string]any) {
				s["volume"] = map[string]any{"emptyDir": map[string]any{"medium": "Memory"}}
			})},
		{name: "empty map removed",
			lost: []fieldpath.Path{fieldpath.MakePathOrDie("spec", "volume", "emptyDir")},
			live: edit(func(s, _ map[string]any) { s["volume"] = map[string]any{} }),
			want: []string{".spec.volume.emptyDir"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			live := withManagedFields(t, tt.live, entryWithout(t, tt.lost...))
			got, err := MissingFields(live, desired, "kdag", tc)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("MissingFields = %q, want %q", got, tt.want)
			}
		})
	}
}

// notCalled fails the test when MissingFields types an object it has no reason to.
type notCalled struct{ t *testing.T }

func (c notCalled) ObjectToTyped(runtime.Object, ...typed.ValidationOptions) (*typed.TypedValue, error) {
	c.t.Error("ObjectToTyped called")
	return nil, errors.New("not called")
}

func (notCalled) TypedToObject(*typed.TypedValue) (runtime.Object, error) {
	return nil, errors.New("not called")
}

func TestMissingFields_Errors(t *testing.T) {
	tc := thingConverter(t)
	desired := obj(t, `{apiVersion: example.com/v1, kind: Thing, metadata: {namespace: ns, name: t}, spec: {replicas: 2}}`)
	applied := withManagedFields(t, desired, entry("kdag", metav1.ManagedFieldsOperationApply, "", `{"f:spec":{"f:replicas":{}}}`))

	if _, err := MissingFields(nil, desired, "kdag", tc); err == nil {
		t.Error("MissingFields(nil live) returned no error")
	}
	if _, err := MissingFields(applied, nil, "kdag", tc); err == nil {
		t.Error("MissingFields(nil desired) returned no error")
	}
	t.Run("no Apply entry of the field manager: nothing to compare, no typing", func(t *testing.T) {
		for _, live := range []*unstructured.Unstructured{
			desired,
			withManagedFields(t, desired, entry("kdag", metav1.ManagedFieldsOperationUpdate, "", `{"f:spec":{}}`)),
			withManagedFields(t, desired, entry("kdag", metav1.ManagedFieldsOperationApply, "status", `{"f:status":{}}`)),
			withManagedFields(t, desired, entry("other", metav1.ManagedFieldsOperationApply, "", `{"f:spec":{}}`)),
		} {
			if got, err := MissingFields(live, desired, "kdag", notCalled{t}); got != nil || err != nil {
				t.Errorf("MissingFields = %q, %v; want nil, nil", got, err)
			}
		}
	})
	t.Run("entry that does not parse", func(t *testing.T) {
		bad := withManagedFields(t, desired, entry("kdag", metav1.ManagedFieldsOperationApply, "", `{"f:spec":[1]}`))
		_, err := MissingFields(bad, desired, "kdag", tc)
		if err == nil || !strings.Contains(err.Error(), "Thing ns/t") {
			t.Errorf("error = %v, want one naming Thing ns/t", err)
		}
	})
	t.Run("desired object that does not fit the schema: paths, no values", func(t *testing.T) {
		misfit := desired.DeepCopy()
		misfit.Object["spec"] = map[string]any{"replicas": "s3cr3t-value", "undeclared": "other-s3cr3t"}
		_, err := MissingFields(applied, misfit, "kdag", tc)
		if err == nil {
			t.Fatal("no error")
		}
		msg := err.Error()
		if !strings.Contains(msg, "Thing ns/t") {
			t.Errorf("error %q does not name Thing ns/t", msg)
		}
		// structured-merge-diff may stop at the first misfit it meets, in map order.
		if !strings.Contains(msg, ".spec.replicas") && !strings.Contains(msg, ".spec.undeclared: field not declared in schema") {
			t.Errorf("error %q names neither misfit path", msg)
		}
		if strings.Contains(msg, "s3cr3t") {
			t.Errorf("error %q quotes a value", msg)
		}
	})
}

// TestDriftAndMissingFields_TypedLiveAsUnstructured: a typed live object (as a controller-runtime
// cache holds it) gives the same answers as its unstructured form, for an object only kdag
// wrote (no conversion needed), a field another manager changed and a field someone removed.
func TestDriftAndMissingFields_TypedLiveAsUnstructured(t *testing.T) {
	const upd, apply = metav1.ManagedFieldsOperationUpdate, metav1.ManagedFieldsOperationApply
	tc := managedfields.NewDeducedTypeConverter()
	desired := obj(t, `{apiVersion: v1, kind: ConfigMap, metadata: {namespace: ns, name: cfg}, data: {a: "1", b: "2"}}`)
	kdagEntry := entry("kdag", apply, "", `{"f:data":{"f:a":{},"f:b":{}}}`)
	tests := []struct {
		name                string
		data                map[string]string
		entries             []metav1.ManagedFieldsEntry
		wantDrift, wantMiss []string
	}{
		{name: "only kdag wrote it", data: map[string]string{"a": "1", "b": "2"},
			entries: []metav1.ManagedFieldsEntry{kdagEntry}},
		{name: "another manager changed a field", data: map[string]string{"a": "x", "b": "2"},
			entries: []metav1.ManagedFieldsEntry{
				entry("kdag", apply, "", `{"f:data":{"f:b":{}}}`), entry("kubectl-edit", upd, "", `{"f:data":{"f:a":{}}}`)},
			wantDrift: []string{".data.a"}, wantMiss: []string{".data.a"}},
		{name: "someone removed a field", data: map[string]string{"a": "1"},
			entries:  []metav1.ManagedFieldsEntry{entry("kdag", apply, "", `{"f:data":{"f:a":{}}}`)},
			wantMiss: []string{".data.b"}},
		{name: "another manager holds a field at kdag's value", data: map[string]string{"a": "1", "b": "2"},
			entries: []metav1.ManagedFieldsEntry{
				entry("kdag", apply, "", `{"f:data":{"f:b":{}}}`), entry("kubectl-edit", upd, "", `{"f:data":{"f:a":{}}}`)}},
		{name: "a status writer is not drift", data: map[string]string{"a": "1", "b": "2"},
			entries: []metav1.ManagedFieldsEntry{kdagEntry, entry("other", upd, "status", `{"f:data":{"f:a":{}}}`)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			typedLive := &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cfg", ManagedFields: tt.entries},
				Data:       tt.data,
			}
			u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(typedLive)
			if err != nil {
				t.Fatal(err)
			}
			for _, live := range []Object{typedLive, &unstructured.Unstructured{Object: u}} {
				fields, err := DriftFields(live, desired, "kdag")
				if err != nil {
					t.Fatal(err)
				}
				var drift []string
				for _, f := range fields {
					drift = append(drift, f.Path)
				}
				miss, err := MissingFields(live, desired, "kdag", tc)
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(drift, tt.wantDrift) || !slices.Equal(miss, tt.wantMiss) {
					t.Errorf("%T: drift %q, missing %q; want %q, %q", live, drift, miss, tt.wantDrift, tt.wantMiss)
				}
			}
		})
	}
	if _, err := DriftFields((*corev1.ConfigMap)(nil), desired, "kdag"); err == nil {
		t.Error("DriftFields(nil typed live) returned no error")
	}
}
