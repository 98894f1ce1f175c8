package apply

import (
	"context"
	"strconv"
	"strings"

	"github.com/pkg/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/kdag-dev/kdag/pkg/resources"
)

// FieldPath is a field of an object, as the keys that lead to it from the object's root:
// {"spec", "replicas"}. Only maps and structs are crossed: a list element cannot be named.
type FieldPath []string

// ParseFieldPath parses a field path written the way kdag names drifted fields: ".spec.replicas"
// or "spec.replicas", with a key that is not a plain name quoted in brackets,
// `metadata.annotations["example.com/owner"]`. It returns an error for an empty path, an empty
// or unterminated segment, and a list selector ("[name=web]", "[0]"), which it does not support.
func ParseFieldPath(s string) (FieldPath, error) {
	rest := strings.TrimPrefix(s, ".")
	var p FieldPath
	for rest != "" {
		if strings.HasPrefix(rest, "[") {
			end := strings.Index(rest, "]")
			if end < 0 || !strings.HasPrefix(rest, `["`) {
				return nil, errors.Errorf("field path %q: only map keys in brackets are supported (%s), not list elements", s, `["key"]`)
			}
			key, err := strconv.Unquote(rest[1:end])
			if err != nil || key == "" {
				return nil, errors.Errorf("field path %q: bad key %s", s, rest[1:end])
			}
			p, rest = append(p, key), strings.TrimPrefix(rest[end+1:], ".")
			continue
		}
		end := strings.IndexAny(rest, ".[")
		if end < 0 {
			end = len(rest)
		}
		if end == 0 {
			return nil, errors.Errorf("field path %q: empty segment", s)
		}
		p, rest = append(p, rest[:end]), strings.TrimPrefix(rest[end:], ".")
	}
	if len(p) == 0 {
		return nil, errors.Errorf("field path %q: empty", s)
	}
	return p, nil
}

// String renders p as kdag names drifted fields: ".spec.replicas", `.metadata.annotations["a/b"]`.
func (p FieldPath) String() string {
	var b strings.Builder
	for _, k := range p {
		if isPlainKey(k) {
			b.WriteString("." + k)
		} else {
			b.WriteString("[" + strconv.Quote(k) + "]")
		}
	}
	return b.String()
}

func isPlainKey(s string) bool {
	return s != "" && strings.IndexFunc(s, func(r rune) bool {
		return (r < 'a' || r > 'z') && (r < 'A' || r > 'Z') && (r < '0' || r > '9') && r != '_' && r != '-'
	}) < 0
}

// ReleasedFieldManagerSuffix makes the name of the field manager that holds the ignored fields
// kdag's field manager let go of: "<field manager>-released".
const ReleasedFieldManagerSuffix = "-released"

// withoutFields returns desired without fields: a copy when one of them is set, desired itself
// otherwise.
func withoutFields(desired *unstructured.Unstructured, fields []FieldPath) *unstructured.Unstructured {
	var out *unstructured.Unstructured
	for _, f := range fields {
		if _, found, _ := unstructured.NestedFieldNoCopy(desired.Object, f...); !found {
			continue
		}
		if out == nil {
			out = desired.DeepCopy()
		}
		unstructured.RemoveNestedField(out.Object, f...)
	}
	if out == nil {
		return desired
	}
	return out
}

// releaseFields prepares an apply of desired, which leaves out fields, to live: server-side
// apply deletes a field that the applier owned and leaves out unless another field manager owns
// it too, so every one of fields that the engine's Apply entry on live still holds (the create
// set it) is first applied, with its live value, by the field manager "<field manager>-released".
// The value does not change, and once kdag's apply leaves the field out it is that manager's
// (and whoever changes it next: an autoscaler). Nothing is written when kdag's entry holds none.
func (e *Engine) releaseFields(ctx context.Context, live client.Object, desired *unstructured.Unstructured, fields []FieldPath) error {
	if len(fields) == 0 {
		return nil
	}
	owned, err := appliedSet(live, e.opts.FieldManager)
	if err != nil || owned == nil {
		return err
	}
	var content map[string]any
	if u, ok := live.(*unstructured.Unstructured); ok {
		content = u.Object
	} else if content, err = runtime.DefaultUnstructuredConverter.ToUnstructured(live); err != nil {
		return errors.Wrapf(err, "%s: convert", describe(desired, desired.GroupVersionKind()))
	}
	hold := &unstructured.Unstructured{Object: map[string]any{}}
	held := false
	for _, f := range fields {
		parts := make([]any, len(f))
		for i, k := range f {
			parts[i] = k
		}
		path, err := fieldpath.MakePath(parts...)
		if err != nil {
			return errors.Wrapf(err, "field path %s", f)
		}
		if !holds(owned, path) {
			continue
		}
		v, found, err := unstructured.NestedFieldCopy(content, f...)
		if err != nil || !found {
			continue
		}
		if err := unstructured.SetNestedField(hold.Object, v, f...); err != nil {
			return errors.Wrapf(err, "field path %s", f)
		}
		held = true
	}
	if !held {
		return nil
	}
	hold.SetGroupVersionKind(desired.GroupVersionKind())
	hold.SetNamespace(desired.GetNamespace())
	hold.SetName(desired.GetName())
	hold.SetResourceVersion(live.GetResourceVersion()) // the values read are the ones held
	name := describe(desired, desired.GroupVersionKind())
	if err := e.client.Apply(ctx, client.ApplyConfigurationFromUnstructured(hold),
		client.FieldOwner(e.opts.FieldManager+ReleasedFieldManagerSuffix), client.ForceOwnership); err != nil {
		return errors.Wrapf(err, "%s: hand ignored fields over before leaving them out", name)
	}
	return nil
}

// appliedSet returns the field set of fieldManager's Apply entry on the main resource of obj, or
// nil when there is none.
func appliedSet(obj metav1.Object, fieldManager string) (*fieldpath.Set, error) {
	mf := resources.AppliedEntry(obj, fieldManager)
	if mf == nil {
		return nil, nil
	}
	set := &fieldpath.Set{}
	if err := set.FromJSON(mf.FieldsV1.GetRawReader()); err != nil {
		return nil, errors.Wrapf(err, "parse managed fields of manager %q", fieldManager)
	}
	return set, nil
}

// holds reports whether set holds path or a field below it.
func holds(set *fieldpath.Set, path fieldpath.Path) bool {
	found := false
	set.Iterate(func(p fieldpath.Path) {
		if found || len(p) < len(path) {
			return
		}
		for i := range path {
			if !p[i].Equals(path[i]) {
				return
			}
		}
		found = true
	})
	return found
}
