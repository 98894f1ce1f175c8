package resources

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"maps"
	"reflect"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// obj parses a YAML manifest into an unstructured object the way a client decodes an API
// response: integers become int64, numbers with a fraction float64.
func obj(t *testing.T, manifest string) *unstructured.Unstructured {
	t.Helper()
	raw, err := yaml.YAMLToJSON([]byte(manifest))
	if err != nil {
		t.Fatalf("parse manifest: %v\n%s", err, manifest)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(raw); err != nil {
		t.Fatalf("decode manifest: %v\n%s", err, manifest)
	}
	return u
}

const (
	checksumAnnotation = "kdag.dev/checksum"
	traceAnnotation    = "kdag.dev/trace-context"
	baseDeployment     = `
apiVersion: apps/v1
kind: Deployment
metadata: {namespace: ns, name: web, labels: {app: web}, annotations: {team: a}}
spec: {replicas: 2, template: {spec: {containers: [{name: web, image: "nginx:1.27"}]}}}
`
)

func TestDesiredHash(t *testing.T) {
	tests := []struct {
		name      string
		other     string
		wantEqual bool
	}{
		{name: "same content, other key order", wantEqual: true, other: `
kind: Deployment
spec: {template: {spec: {containers: [{image: "nginx:1.27", name: web}]}}, replicas: 2}
metadata: {annotations: {team: a}, labels: {app: web}, name: web, namespace: ns}
apiVersion: apps/v1
`},
		{name: "server-set metadata and status differ", wantEqual: true, other: `
apiVersion: apps/v1
kind: Deployment
metadata: {namespace: ns, name: web, labels: {app: web}, annotations: {team: a},
  resourceVersion: "99", uid: abc, generation: 7, creationTimestamp: "2026-01-01T00:00:00Z",
  managedFields: [{manager: x}]}
spec: {replicas: 2, template: {spec: {containers: [{name: web, image: "nginx:1.27"}]}}}
status: {replicas: 2}
`},
		{name: "ignored annotations are ignored", wantEqual: true, other: `
apiVersion: apps/v1
kind: Deployment
metadata: {namespace: ns, name: web, labels: {app: web},
  annotations: {team: a, kdag.dev/checksum: abc, kdag.dev/trace-context: "00-1-2-01"}}
spec: {replicas: 2, template: {spec: {containers: [{name: web, image: "nginx:1.27"}]}}}
`},
		{name: "label differs", other: `
apiVersion: apps/v1
kind: Deployment
metadata: {namespace: ns, name: web, labels: {app: web2}, annotations: {team: a}}
spec: {replicas: 2, template: {spec: {containers: [{name: web, image: "nginx:1.27"}]}}}
`},
		{name: "other annotation differs", other: `
apiVersion: apps/v1
kind: Deployment
metadata: {namespace: ns, name: web, labels: {app: web}, annotations: {team: b}}
spec: {replicas: 2, template: {spec: {containers: [{name: web, image: "nginx:1.27"}]}}}
`},
		{name: "spec differs", other: `
apiVersion: apps/v1
kind: Deployment
metadata: {namespace: ns, name: web, labels: {app: web}, annotations: {team: a}}
spec: {replicas: 3, template: {spec: {containers: [{name: web, image: "nginx:1.27"}]}}}
`},
		{name: "apiVersion differs", other: strings.Replace(baseDeployment, "apps/v1", "apps/v1beta2", 1)},
	}
	base := obj(t, baseDeployment)
	if _, isInt := base.Object["spec"].(map[string]any)["replicas"].(int64); !isInt {
		t.Fatal("fixture: spec.replicas did not decode as int64")
	}
	baseHash, err := DesiredHash(base, checksumAnnotation, traceAnnotation)
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(baseHash) {
		t.Fatalf("hash %q is not 32 hex characters", baseHash)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			other := obj(t, tt.other)
			before := other.DeepCopy()
			h, err := DesiredHash(other, checksumAnnotation, traceAnnotation)
			if err != nil {
				t.Fatal(err)
			}
			if (h == baseHash) != tt.wantEqual {
				t.Errorf("hash equal = %v, want %v", h == baseHash, tt.wantEqual)
			}
			if !equalJSON(t, before.Object, other.Object) {
				t.Error("DesiredHash modified its input")
			}
		})
	}
}

// kdag writes its checksum annotation onto an object that had no annotations: the hash must not
// see the difference between "no annotations" and "an annotations map of ignored keys".
func TestDesiredHash_OnlyIgnoredAnnotations(t *testing.T) {
	bare := obj(t, `{apiVersion: v1, kind: ConfigMap, metadata: {namespace: ns, name: c}, data: {a: b}}`)
	annotated := bare.DeepCopy()
	annotated.SetAnnotations(map[string]string{checksumAnnotation: "abc"})
	hb, _ := DesiredHash(bare, checksumAnnotation)
	ha, _ := DesiredHash(annotated, checksumAnnotation)
	if ha != hb {
		t.Fatalf("hash with only the ignored annotation %s differs from the bare object's %s", ha, hb)
	}
}

// A typed object converts numbers to int64, JSON decoding may give float64: one number, one hash.
func TestDesiredHash_NumberForm(t *testing.T) {
	a := obj(t, baseDeployment)
	if _, isInt := a.Object["spec"].(map[string]any)["replicas"].(int64); !isInt {
		t.Fatal("fixture: spec.replicas did not decode as int64")
	}
	b := a.DeepCopy()
	b.Object["spec"].(map[string]any)["replicas"] = float64(2)
	c := a.DeepCopy()
	c.Object["spec"].(map[string]any)["replicas"] = 2.5
	ha, _ := DesiredHash(a)
	hb, _ := DesiredHash(b)
	hc, _ := DesiredHash(c)
	if ha != hb {
		t.Errorf("int64 2 and float64 2 hash differently: %s, %s", ha, hb)
	}
	if ha == hc {
		t.Error("2 and 2.5 hash the same")
	}
}

// The hash lands in annotations and is compared by every future process: it must not change
// between runs or releases without notice. The value is SHA-256 of the compact, key-sorted JSON
// of the manifest (as Python's json.dumps(o, sort_keys=True, separators=(",", ":")) writes it).
func TestDesiredHash_Golden(t *testing.T) {
	h, err := DesiredHash(obj(t, baseDeployment))
	if err != nil {
		t.Fatal(err)
	}
	if want := "4a6bb64b0d7aac0bda1033c67c5bb608"; h != want {
		t.Fatalf("DesiredHash = %s, want %s: the hash of an unchanged object changed", h, want)
	}
}

func TestDesiredHash_Nil(t *testing.T) {
	if _, err := DesiredHash(nil); err == nil {
		t.Fatal("DesiredHash(nil) returned no error")
	}
}

func TestContentHash(t *testing.T) {
	tests := []struct {
		name      string
		a, b      string
		wantEqual bool
	}{
		{name: "configmap: data key order", wantEqual: true,
			a: `{apiVersion: v1, kind: ConfigMap, metadata: {name: c}, data: {a: "1", b: "2"}}`,
			b: `{apiVersion: v1, kind: ConfigMap, metadata: {name: c}, data: {b: "2", a: "1"}}`},
		{name: "configmap: metadata is not content", wantEqual: true,
			a: `{apiVersion: v1, kind: ConfigMap, metadata: {name: c}, data: {a: "1"}}`,
			b: `{apiVersion: v1, kind: ConfigMap, metadata: {name: c, labels: {x: y}, resourceVersion: "5"}, data: {a: "1"}}`},
		{name: "configmap: empty and absent data", wantEqual: true,
			a: `{apiVersion: v1, kind: ConfigMap, metadata: {name: c}}`,
			b: `{apiVersion: v1, kind: ConfigMap, metadata: {name: c}, data: {}, binaryData: {}}`},
		{name: "configmap: data value",
			a: `{apiVersion: v1, kind: ConfigMap, metadata: {name: c}, data: {a: "1"}}`,
			b: `{apiVersion: v1, kind: ConfigMap, metadata: {name: c}, data: {a: "2"}}`},
		{name: "configmap: binaryData",
			a: `{apiVersion: v1, kind: ConfigMap, metadata: {name: c}, data: {a: "1"}}`,
			b: `{apiVersion: v1, kind: ConfigMap, metadata: {name: c}, data: {a: "1"}, binaryData: {b: AA==}}`},
		{name: "configmap: same bytes in data and binaryData are different content",
			a: `{apiVersion: v1, kind: ConfigMap, metadata: {name: c}, data: {a: AA==}}`,
			b: `{apiVersion: v1, kind: ConfigMap, metadata: {name: c}, binaryData: {a: AA==}}`},
		{name: "secret: stringData equals data", wantEqual: true,
			a: `{apiVersion: v1, kind: Secret, metadata: {name: s}, stringData: {password: hunter2}}`,
			b: `{apiVersion: v1, kind: Secret, metadata: {name: s}, data: {password: aHVudGVyMg==}}`},
		{name: "secret: stringData wins over data", wantEqual: true,
			a: `{apiVersion: v1, kind: Secret, metadata: {name: s}, data: {password: b2xk, user: YQ==}, stringData: {password: hunter2}}`,
			b: `{apiVersion: v1, kind: Secret, metadata: {name: s}, data: {password: aHVudGVyMg==, user: YQ==}}`},
		{name: "secret: type and labels are not content", wantEqual: true,
			a: `{apiVersion: v1, kind: Secret, metadata: {name: s}, type: Opaque, data: {k: YQ==}}`,
			b: `{apiVersion: v1, kind: Secret, metadata: {name: s, labels: {x: y}}, data: {k: YQ==}}`},
		{name: "secret: value",
			a: `{apiVersion: v1, kind: Secret, metadata: {name: s}, stringData: {password: hunter2}}`,
			b: `{apiVersion: v1, kind: Secret, metadata: {name: s}, stringData: {password: hunter3}}`},
		{name: "other kind: status and metadata are not content", wantEqual: true,
			a: `{apiVersion: v1, kind: Service, metadata: {name: x}, spec: {ports: [{port: 80}]}}`,
			b: `{apiVersion: v1, kind: Service, metadata: {name: x, uid: u}, spec: {ports: [{port: 80}]}, status: {loadBalancer: {}}}`},
		{name: "other kind: spec",
			a: `{apiVersion: v1, kind: Service, metadata: {name: x}, spec: {ports: [{port: 80}]}}`,
			b: `{apiVersion: v1, kind: Service, metadata: {name: x}, spec: {ports: [{port: 81}]}}`},
		{name: "no spec: the rest of the object", wantEqual: true,
			a: `{apiVersion: v1, kind: ServiceAccount, metadata: {name: x}, automountServiceAccountToken: false}`,
			b: `{apiVersion: v1, kind: ServiceAccount, metadata: {name: x, labels: {a: b}}, automountServiceAccountToken: false}`},
		{name: "no spec: a top-level field",
			a: `{apiVersion: v1, kind: ServiceAccount, metadata: {name: x}, automountServiceAccountToken: false}`,
			b: `{apiVersion: v1, kind: ServiceAccount, metadata: {name: x}, automountServiceAccountToken: true}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ha, err := ContentHash(obj(t, tt.a))
			if err != nil {
				t.Fatal(err)
			}
			hb, err := ContentHash(obj(t, tt.b))
			if err != nil {
				t.Fatal(err)
			}
			if (ha == hb) != tt.wantEqual {
				t.Errorf("hashes %s, %s: equal = %v, want %v", ha, hb, ha == hb, tt.wantEqual)
			}
			if len(ha) != HashLength {
				t.Errorf("hash %q is %d characters, want %d", ha, len(ha), HashLength)
			}
		})
	}
}

func TestContentHash_ErrorsDoNotExposeValues(t *testing.T) {
	tests := []struct{ name, manifest string }{
		{"data value not a string", `{apiVersion: v1, kind: Secret, metadata: {namespace: ns, name: s}, data: {password: {hunter2: 1}}}`},
		{"stringData value not a string", `{apiVersion: v1, kind: Secret, metadata: {namespace: ns, name: s}, stringData: {password: [hunter2]}}`},
		{"data not a map", `{apiVersion: v1, kind: Secret, metadata: {namespace: ns, name: s}, data: [hunter2]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ContentHash(obj(t, tt.manifest))
			if err == nil {
				t.Fatal("no error")
			}
			if !strings.Contains(err.Error(), "Secret ns/s") {
				t.Errorf("error %q does not name the object", err)
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Errorf("error %q exposes the secret value", err)
			}
		})
	}
}

func TestCombineHashes(t *testing.T) {
	tests := []struct {
		name      string
		a, b      map[string]string
		wantEqual bool
	}{
		{name: "nil and empty", a: nil, b: map[string]string{}, wantEqual: true},
		{name: "same entries", wantEqual: true,
			a: map[string]string{"ConfigMap/a": "1", "Secret/b": "2", "Secret/c": "3"},
			b: map[string]string{"Secret/c": "3", "Secret/b": "2", "ConfigMap/a": "1"}},
		{name: "one hash differs",
			a: map[string]string{"ConfigMap/a": "1", "Secret/b": "2"},
			b: map[string]string{"ConfigMap/a": "1", "Secret/b": "3"}},
		{name: "hashes swapped between keys",
			a: map[string]string{"ConfigMap/a": "1", "Secret/b": "2"},
			b: map[string]string{"ConfigMap/a": "2", "Secret/b": "1"}},
		{name: "key and value boundary",
			a: map[string]string{"a": "bc"},
			b: map[string]string{"ab": "c"}},
		{name: "one more dependency",
			a: map[string]string{"ConfigMap/a": "1"},
			b: map[string]string{"ConfigMap/a": "1", "Secret/b": "2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ha, hb := CombineHashes(tt.a), CombineHashes(tt.b)
			if (ha == hb) != tt.wantEqual {
				t.Errorf("equal = %v, want %v", ha == hb, tt.wantEqual)
			}
		})
	}
}

// TestCombineHashes_SameAsJSON pins CombineHashes to the hash of encoding/json's encoding of
// the map, which dependencies-hash annotations on live objects hold: a hash that changed with
// the code would roll every workload on an upgrade.
func TestCombineHashes_SameAsJSON(t *testing.T) {
	for _, m := range []map[string]string{
		nil,
		{},
		{"ConfigMap ns/a": "0123456789abcdef0123456789abcdef"},
		{"Secret ns/b": "2", "ConfigMap ns/a": "1", "apps/Deployment ns/c": "3"},
		{`quote"d`: "back\\slash"},
		{"html <tag> & more": "x"},
		{"control\n": "tab\t"},
		{"unicode é": "\u2028"},
		{"invalid utf-8 \xff": "v"},
		{"": ""},
	} {
		want := map[string]string{}
		maps.Copy(want, m)
		b, err := json.Marshal(want)
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(b)
		if got, want := CombineHashes(m), hex.EncodeToString(sum[:])[:HashLength]; got != want {
			t.Errorf("CombineHashes(%q) = %s, want the hash of its JSON %s", m, got, want)
		}
	}
}

func TestSelectKeys(t *testing.T) {
	secret := func(data, stringData map[string]any) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Secret",
			"metadata": map[string]any{"name": "db"}}}
		if data != nil {
			u.Object["data"] = data
		}
		if stringData != nil {
			u.Object["stringData"] = stringData
		}
		return u
	}
	for _, tc := range []struct {
		name        string
		in          *unstructured.Unstructured
		keys        []string
		wantKeys    []string // kept in data and stringData
		wantMissing []string
	}{
		{"all keys when none required", secret(map[string]any{"a": "MQ==", "b": "Mg=="}, nil), nil, []string{"a", "b"}, nil},
		{"only the required keys", secret(map[string]any{"a": "MQ==", "b": "Mg=="}, nil), []string{"a"}, []string{"a"}, nil},
		{"missing keys sorted", secret(map[string]any{"a": "MQ=="}, nil), []string{"z", "a", "m"}, []string{"a"}, []string{"m", "z"}},
		{"stringData counts", secret(nil, map[string]any{"a": "1"}), []string{"a"}, []string{"a"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := tc.in.DeepCopy()
			out, missing, err := SelectKeys(tc.in, tc.keys)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(tc.in, before) {
				t.Error("SelectKeys modified its argument")
			}
			var got []string
			for _, f := range []string{"data", "stringData"} {
				m, _ := out.Object[f].(map[string]any)
				for k := range m {
					got = append(got, k)
				}
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.wantKeys) || !slices.Equal(missing, tc.wantMissing) {
				t.Errorf("kept %v missing %v, want %v and %v", got, missing, tc.wantKeys, tc.wantMissing)
			}
		})
	}
	// Only the selected keys feed the hash.
	a, _, _ := SelectKeys(secret(map[string]any{"a": "MQ==", "b": "Mg=="}, nil), []string{"a"})
	b, _, _ := SelectKeys(secret(map[string]any{"a": "MQ==", "b": "changed"}, nil), []string{"a"})
	ha, _ := ContentHash(a)
	hb, _ := ContentHash(b)
	if ha != hb {
		t.Error("a key outside the selection changed the content hash")
	}
	if _, _, err := SelectKeys(&unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Service"}}, []string{"a"}); err == nil {
		t.Error("SelectKeys of a Service: no error")
	}
}

var hashSink string

// TestHashBytes_AllocatesOnlyTheHash: a hash is kept for the life of the process in kdag's memos
// (one per node of every owner) and in annotations, so the string must be the HashLength
// characters alone, not a slice of the SHA-256's full 64-character encoding.
func TestHashBytes_AllocatesOnlyTheHash(t *testing.T) {
	const n = 10000
	in := []byte(`{"data":{"k":"v"}}`)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range n {
		hashSink = hashBytes(in)
	}
	runtime.ReadMemStats(&after)
	if per := (after.TotalAlloc - before.TotalAlloc) / n; per > HashLength {
		t.Errorf("hashBytes allocates %d bytes per hash, want at most its %d characters", per, HashLength)
	}
	if len(hashSink) != HashLength {
		t.Errorf("hash %q is %d characters, want %d", hashSink, len(hashSink), HashLength)
	}
}
