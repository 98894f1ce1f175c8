package resources

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"maps"
	"slices"

	"github.com/pkg/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// HashLength is the number of hex characters of every hash this package returns: the first 128
// bits of a SHA-256, short enough for an annotation value.
const HashLength = 32

// DesiredHash returns the hash of a desired object (after kdag's mutations), for the annotation
// that lets kdag skip an unchanged object. Everything the object sets feeds the hash — spec, data,
// labels, annotations, owner references — except status, the metadata the API server sets (the
// fields Desired removes, so a resourceVersion bump does not change the hash) and the annotations
// named in ignoreAnnotations (kdag's own checksum and trace-context annotations, whose writing
// must not change the hash). u is not modified. Map order never matters.
//
// It returns an error when u is nil or its content cannot be encoded as JSON.
func DesiredHash(u *unstructured.Unstructured, ignoreAnnotations ...string) (string, error) {
	if u == nil {
		return "", errors.New("hash desired object: nil object")
	}
	// A shallow copy of the maps this changes (the object, its metadata and annotations), not a
	// deep copy of the whole object: encoding only reads the rest.
	obj := maps.Clone(u.Object)
	if md, ok := obj["metadata"].(map[string]any); ok {
		md = maps.Clone(md)
		obj["metadata"] = md
		if ann, ok := md["annotations"].(map[string]any); ok {
			ann = maps.Clone(ann)
			md["annotations"] = ann
			for _, k := range ignoreAnnotations {
				delete(ann, k)
			}
			if len(ann) == 0 {
				delete(md, "annotations")
			}
		}
	}
	stripVolatile(obj)
	h, err := hashJSON(obj)
	return h, errors.Wrapf(err, "hash desired %s", describeU(u))
}

// ContentHash returns the hash of what a dependent consumes from the dependency u, so that "a
// config change rolls the pods and nothing else does":
//   - ConfigMap: data and binaryData;
//   - Secret: data, with stringData merged in the way the API server merges it (each value
//     base64-encoded into data's form, stringData winning on a shared key), so a Secret written
//     with stringData hashes the same as the stored Secret the API server returns with data only;
//   - PersistentVolumeClaim: spec without resources (a claim that grows rolls no pods);
//   - any other kind: spec, or when there is no spec, the whole object without apiVersion, kind,
//     metadata and status.
//
// Absent and empty data (or binaryData) hash the same. Only the hash leaves this function: errors
// name keys, never values. Note that a hash of a low-entropy secret value can be guessed offline
// by whoever reads the annotation; generated secrets are long enough for this not to matter.
//
// It returns an error when u is nil, when a Secret's data or stringData holds a non-string value,
// or when the content cannot be encoded as JSON.
func ContentHash(u *unstructured.Unstructured) (string, error) {
	if u == nil {
		return "", errors.New("hash content: nil object")
	}
	gvk := u.GroupVersionKind()
	var content any
	switch {
	case gvk.Group == "" && gvk.Kind == "ConfigMap":
		content = map[string]any{
			"data":       mapOrEmpty(u.Object["data"]),
			"binaryData": mapOrEmpty(u.Object["binaryData"]),
		}
	case gvk.Group == "" && gvk.Kind == "Secret":
		data, err := secretData(u)
		if err != nil {
			return "", err
		}
		content = map[string]any{"data": data}
	case gvk.Group == "" && gvk.Kind == "PersistentVolumeClaim":
		// A claim's size is nothing a running pod must restart for: the volume grows under it.
		spec, _ := u.Object["spec"].(map[string]any)
		spec = maps.Clone(spec)
		delete(spec, "resources")
		content = spec
	default:
		if spec, ok := u.Object["spec"]; ok {
			content = spec
		} else {
			rest := maps.Clone(u.Object)
			for _, k := range []string{"apiVersion", "kind", "metadata", "status"} {
				delete(rest, k)
			}
			content = rest
		}
	}
	h, err := hashJSON(content)
	return h, errors.Wrapf(err, "hash content of %s", describeU(u))
}

// CombineHashes returns one hash of several dependencies' content hashes, keyed by an identifier
// of each dependency (for example "Secret/db-credentials"). The order of the map never matters;
// nil and empty maps give the same hash.
//
// The hash is that of the map's JSON (encoding/json: keys sorted, HTML characters escaped), which
// annotations on live objects already hold: a change of encoding would roll every workload on an
// upgrade. Keys and values that need no escaping, the usual case (node IDs and hex hashes), are
// written directly in that encoding, without encoding/json's reflection: this hash was a sixth
// of the CPU of an unchanged node's check (docs/benchmarks.md section 2).
func CombineHashes(hashes map[string]string) string {
	keys := make([]string, 0, len(hashes))
	n := 2
	for k, v := range hashes {
		if !plainJSON(k) || !plainJSON(v) {
			b, _ := json.Marshal(hashes) // a map of strings always encodes
			return hashBytes(b)
		}
		keys = append(keys, k)
		n += len(k) + len(v) + 6
	}
	slices.Sort(keys)
	b := make([]byte, 0, n)
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '"')
		b = append(b, k...)
		b = append(b, `":"`...)
		b = append(b, hashes[k]...)
		b = append(b, '"')
	}
	b = append(b, '}')
	return hashBytes(b)
}

// plainJSON reports whether encoding/json writes s as a string unchanged between quotes:
// printable ASCII without the quote, the backslash and the HTML characters it escapes (<, >, &).
func plainJSON(s string) bool {
	for i := range len(s) {
		c := s[i]
		if c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}

// secretData returns the Secret's data merged with its stringData, all in base64 form.
func secretData(u *unstructured.Unstructured) (map[string]any, error) {
	out := map[string]any{}
	for _, field := range []string{"data", "stringData"} {
		m, ok := u.Object[field].(map[string]any)
		if !ok && u.Object[field] != nil {
			return nil, errors.Errorf("hash content of %s: %s is not a map", describeU(u), field)
		}
		for k, v := range m {
			s, ok := v.(string)
			if !ok {
				return nil, errors.Errorf("hash content of %s: %s[%q] is not a string", describeU(u), field, k)
			}
			if field == "stringData" {
				s = base64.StdEncoding.EncodeToString([]byte(s))
			}
			out[k] = s
		}
	}
	return out, nil
}

func mapOrEmpty(v any) any {
	if v == nil {
		return map[string]any{}
	}
	return v
}

// hashJSON hashes the JSON encoding of v. encoding/json writes map keys sorted and numbers in one
// form (int64 3 and float64 3 both as 3), so the hash is the same across processes and map orders.
func hashJSON(v any) (string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return "", errors.Wrap(err, "encode as JSON")
	}
	return hashBytes(b), nil
}

// hashBytes returns the first HashLength hex characters of the SHA-256 of b. Only the bytes
// they encode are encoded: a slice of a longer string would keep the whole string alive in
// every memo and annotation that holds the hash.
func hashBytes(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:HashLength/2])
}

// HasDataKeys reports whether objects of gvk hold data keys (a core Secret or ConfigMap): the
// kinds SelectKeys accepts and a Reference node's RequireKeys applies to.
func HasDataKeys(gvk schema.GroupVersionKind) bool {
	return gvk.Group == "" && (gvk.Kind == "Secret" || gvk.Kind == "ConfigMap")
}

// SelectKeys returns a copy of the Secret or ConfigMap u whose data, stringData and binaryData
// hold only keys, and the keys of keys that none of them holds, sorted, so that ContentHash of
// the copy covers exactly what a dependent reads (a Secret's other keys can change without
// rolling the pods that do not read them). With no keys the copy holds every key and nothing is
// missing. u is not modified.
//
// It returns an error when u is nil or is neither a Secret nor a ConfigMap of the core group.
func SelectKeys(u *unstructured.Unstructured, keys []string) (*unstructured.Unstructured, []string, error) {
	if u == nil {
		return nil, nil, errors.New("select keys: nil object")
	}
	if gvk := u.GroupVersionKind(); gvk.Group != "" || gvk.Kind != "Secret" && gvk.Kind != "ConfigMap" {
		return nil, nil, errors.Errorf("select keys of %s: only a Secret or a ConfigMap has keys", describeU(u))
	}
	out := u.DeepCopy()
	if len(keys) == 0 {
		return out, nil, nil
	}
	want := make(map[string]bool, len(keys))
	for _, k := range keys {
		want[k] = true
	}
	found := map[string]bool{}
	for _, field := range []string{"data", "stringData", "binaryData"} {
		m, ok := out.Object[field].(map[string]any)
		if !ok {
			continue
		}
		for k := range m {
			if want[k] {
				found[k] = true
			} else {
				delete(m, k)
			}
		}
	}
	var missing []string
	for k := range want {
		if !found[k] {
			missing = append(missing, k)
		}
	}
	slices.Sort(missing)
	return out, missing, nil
}
