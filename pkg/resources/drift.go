package resources

import (
	"fmt"
	"slices"
	"strings"

	"github.com/pkg/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	"sigs.k8s.io/structured-merge-diff/v6/typed"
	"sigs.k8s.io/structured-merge-diff/v6/value"
)

// Drift returns the fields of desired that someone else changed on live, as sorted, readable
// paths such as ".spec.replicas" or ".spec.template.spec.containers[name=web].image". An empty
// result means no drift: as far as managed fields tell, a write would change nothing kdag owns.
//
// A path is reported when all of these hold:
//   - it is a leaf of the field set of a managedFields entry of live written by another field
//     manager (Manager != fieldManager) on the main resource (Subresource "", so status writers
//     are ignored), with operation Apply or Update;
//   - it resolves in desired, i.e. kdag sets that field. Fields kdag does not set (an annotation
//     someone added, a field defaulted or owned by another controller) are left alone, so they
//     never cause a write loop;
//   - the live value differs from the desired value. Comparison is semantic: numbers compare by
//     value (int64 3 equals float64 3); a desired string that is a resource quantity equals its
//     canonical form (desired "0.5" equals live "500m", as the API server stores quantities); a
//     desired map equals a live map holding at least the desired keys with equal values, so
//     server defaults inside a field do not count as drift; lists compare element by element.
//
// Paths resolve like server-side apply (KEP-555) field sets: a field name selects a map key, a key
// (k:{"name":"web"}) the list element whose key fields equal it, a value (v:"x") the set element
// equal to it, an index the list element at that position. A key field the desired element leaves
// out (for example a port's protocol, which the API server defaults) matches anything, provided
// only one element matches the fields it does set.
//
// Limitations:
//   - only leaves of the foreign field sets are examined; a foreign manager owning a whole
//     structure as one leaf (an atomic field such as a Deployment's selector) is compared with the
//     map rule above, so an extra key added inside it is not reported;
//   - a foreign Update that removes a field kdag set leaves no foreign entry for it, so Drift
//     cannot see it; MissingFields does, from kdag's own entry.
//
// It returns an error when live or desired is nil or a foreign entry's field set does not parse.
func Drift(live, desired *unstructured.Unstructured, fieldManager string) ([]string, error) {
	fields, err := DriftFields(live, desired, fieldManager)
	if err != nil {
		return nil, err
	}
	paths := make([]string, len(fields))
	for i, f := range fields {
		paths[i] = f.Path
	}
	return slices.Compact(paths), nil
}

// FieldDrift is one field of the desired object that another field manager changed.
type FieldDrift struct {
	// Path is the field, as Drift renders it (".spec.replicas").
	Path string
	// Manager is the field manager of live whose managed fields hold the changed value.
	Manager string
}

// DriftFields is Drift with the field manager behind each drifted field, sorted by path then
// manager. A field two foreign managers hold is listed once per manager. Operators use the
// managers to say who is fighting over a field, for example in an event.
//
// live may be typed (as a controller-runtime cache holds it) or unstructured: a typed object is
// converted only when a foreign entry exists, so an object only kdag writes costs no conversion.
func DriftFields(live Object, desired *unstructured.Unstructured, fieldManager string) ([]FieldDrift, error) {
	if isNil(live) || desired == nil {
		return nil, errors.Errorf("detect drift of %s against %s: nil object", describe(kindOf(desired), live), describeU(desired))
	}
	content := lazyContent(live)
	var drifted []FieldDrift
	for _, mf := range live.GetManagedFields() {
		if mf.Manager == fieldManager || mf.Subresource != "" || mf.FieldsV1 == nil {
			continue
		}
		if mf.Operation != metav1.ManagedFieldsOperationApply && mf.Operation != metav1.ManagedFieldsOperationUpdate {
			continue
		}
		liveObj, err := content()
		if err != nil {
			return nil, errors.Wrapf(err, "detect drift of %s", describe(kindOf(desired), live))
		}
		set := &fieldpath.Set{}
		if err := set.FromJSON(mf.FieldsV1.GetRawReader()); err != nil {
			return nil, errors.Wrapf(err, "parse managed fields of manager %q on %s", mf.Manager, describe(kindOf(desired), live))
		}
		set.Leaves().Iterate(func(p fieldpath.Path) {
			want, ok := resolve(desired.Object, p)
			if !ok {
				return
			}
			if got, ok := resolve(liveObj, p); ok && equalSemantic(want, got) {
				return
			}
			drifted = append(drifted, FieldDrift{Path: pathString(p), Manager: mf.Manager})
		})
	}
	slices.SortFunc(drifted, func(a, b FieldDrift) int {
		if c := strings.Compare(a.Path, b.Path); c != 0 {
			return c
		}
		return strings.Compare(a.Manager, b.Manager)
	})
	return slices.Compact(drifted), nil
}

// Object is a Kubernetes object, typed or unstructured.
type Object interface {
	metav1.Object
	runtime.Object
}

// kindOf returns u's kind, "" for nil.
func kindOf(u *unstructured.Unstructured) string {
	if u == nil {
		return ""
	}
	return u.GetKind()
}

// lazyContent returns a function that returns obj's content as unstructured maps, converting a
// typed object once, on the first call.
func lazyContent(obj Object) func() (map[string]any, error) {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		return func() (map[string]any, error) { return u.Object, nil }
	}
	var (
		m    map[string]any
		err  error
		done bool
	)
	return func() (map[string]any, error) {
		if !done {
			m, err = runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
			done = true
		}
		return m, err
	}
}

// MissingFields returns the fields of desired that fieldManager's Apply entry on live does not
// hold and whose live value is not the desired one, as sorted paths rendered like Drift's: someone
// removed a field kdag set (a label, a data key, an env var, a container port, a list item) or
// replaced it with a plain update. Unlike Drift, it needs no foreign managed-fields entry and no
// memory of an earlier apply, so it also finds edits made while kdag was not running.
//
// The field set of desired is computed with tc, a type converter built from the API server's own
// schema (see package schemas): the same field set the API server records for an apply of
// desired, so list items are named by their merge keys (key fields the server defaults, such as a
// port's protocol, included), set items by value, and atomic lists and maps as one field. Each
// field of that set missing from the Apply entry is compared with live:
//   - a list or map item (a field with fields below it) is missing when live has no such item;
//     present, its own fields are compared one by one;
//   - an atomic list or map must equal the desired value as a whole (an added key counts);
//   - a scalar or empty map is compared as Drift does: numbers by value, quantities in canonical
//     form, a map holding at least the desired keys.
//
// Only the topmost missing field is reported (".spec.template.spec.containers[name=web].env[name=X]",
// not each field of the env var). Identity fields (apiVersion, kind, metadata.name and namespace),
// which no managed-fields entry holds, are never reported. Fields the API server stores in another
// form are not false positives as long as the Apply entry holds them as applied: a Secret's
// stringData (the entry holds f:stringData, live only data), a quantity "0.5" (stored "500m").
//
// Use it only when desired is what fieldManager last applied (the desired-hash annotation is
// unchanged), since a field kdag newly adds is missing from its entry as well. It returns nil, and
// no error, when live has no Apply entry of fieldManager on the main resource (nothing to compare
// with, for example an adopted object kdag has not applied yet); tc is not used then. It returns an
// error when live or desired is nil, the entry does not parse, or desired does not fit tc's
// schema. Errors name the object and the fields, never their values.
//
// live may be typed (as a controller-runtime cache holds it) or unstructured: a typed object is
// converted only when its entry lacks a field of desired, so the usual answer (nothing missing)
// costs no conversion.
func MissingFields(live Object, desired *unstructured.Unstructured, fieldManager string, tc managedfields.TypeConverter) ([]string, error) {
	if isNil(live) || desired == nil {
		return nil, errors.Errorf("detect missing fields of %s against %s: nil object", describe(kindOf(desired), live), describeU(desired))
	}
	owned, err := appliedFields(live, kindOf(desired), fieldManager)
	if owned == nil || err != nil {
		return nil, err
	}
	if tc == nil {
		return nil, errors.Errorf("%s: detect missing fields: no type converter", describeU(desired))
	}
	tv, err := tc.ObjectToTyped(desired)
	if err != nil {
		var verrs typed.ValidationErrors
		if errors.As(err, &verrs) {
			// Their messages may quote the object's values: keep the paths only.
			return nil, errors.Errorf("%s: does not fit the API server's schema: %s", describeU(desired), describeValidation(verrs))
		}
		return nil, errors.Wrapf(err, "%s: type with the API server's schema", describeU(desired))
	}
	want, err := tv.ToFieldSet()
	if err != nil {
		return nil, errors.Errorf("%s: field set with the API server's schema: %s", describeU(desired), describeValidation(err))
	}
	missing := want.Difference(owned)
	leaves := want.Leaves()
	if !hasLeaf(missing, leaves) {
		// Only the paths no entry holds (apiVersion, kind, name, namespace) and parents of fields
		// the entry holds: nothing was removed, and live need not be read (or converted).
		return nil, nil
	}
	liveObj, err := lazyContent(live)()
	if err != nil {
		return nil, errors.Wrapf(err, "detect missing fields of %s", describeU(desired))
	}
	reported := &fieldpath.Set{}
	var out []string
	missing.Iterate(func(p fieldpath.Path) {
		if isIdentity(p) || hasReportedPrefix(reported, p) {
			return
		}
		d, ok := resolve(desired.Object, p)
		if !ok {
			return // not in desired as rendered: nothing to compare
		}
		l, ok := resolve(liveObj, p)
		switch {
		case !ok:
		case !leaves.Has(p):
			return // an item with fields below it: those are compared one by one
		case isNonEmptyComposite(d):
			if equalWhole(d, l) {
				return
			}
		case equalSemantic(d, l):
			return
		}
		reported.Insert(p)
		out = append(out, pathString(p))
	})
	slices.Sort(out)
	return out, nil
}

// AppliedEntry returns fieldManager's Apply entry on the main resource of obj (not a
// subresource's), or nil when obj has none with a field set. kdag's own drift and ownership
// checks all read this one entry (KEP-555: one entry per manager, operation and subresource).
func AppliedEntry(obj metav1.Object, fieldManager string) *metav1.ManagedFieldsEntry {
	mfs := obj.GetManagedFields()
	for i := range mfs {
		if mf := &mfs[i]; mf.Manager == fieldManager && mf.Operation == metav1.ManagedFieldsOperationApply &&
			mf.Subresource == "" && mf.FieldsV1 != nil {
			return mf
		}
	}
	return nil
}

// appliedFields returns the field set of fieldManager's Apply entry on the main resource of
// live, or nil when there is none.
func appliedFields(live Object, kind, fieldManager string) (*fieldpath.Set, error) {
	mf := AppliedEntry(live, fieldManager)
	if mf == nil {
		return nil, nil
	}
	set := &fieldpath.Set{}
	if err := set.FromJSON(mf.FieldsV1.GetRawReader()); err != nil {
		return nil, errors.Wrapf(err, "parse managed fields of manager %q on %s", mf.Manager, describe(kind, live))
	}
	return set, nil
}

// hasLeaf reports whether missing holds a path of leaves other than an identity field.
func hasLeaf(missing, leaves *fieldpath.Set) bool {
	found := false
	missing.Iterate(func(p fieldpath.Path) {
		if !found && leaves.Has(p) && !isIdentity(p) {
			found = true
		}
	})
	return found
}

// isIdentity reports whether p is apiVersion, kind, metadata.name or metadata.namespace.
func isIdentity(p fieldpath.Path) bool {
	switch {
	case len(p) == 1 && p[0].FieldName != nil:
		return *p[0].FieldName == "apiVersion" || *p[0].FieldName == "kind"
	case len(p) == 2 && p[0].FieldName != nil && *p[0].FieldName == "metadata" && p[1].FieldName != nil:
		return *p[1].FieldName == "name" || *p[1].FieldName == "namespace"
	}
	return false
}

// hasReportedPrefix reports whether a proper prefix of p is in reported.
func hasReportedPrefix(reported *fieldpath.Set, p fieldpath.Path) bool {
	for i := 1; i < len(p); i++ {
		if reported.Has(p[:i]) {
			return true
		}
	}
	return false
}

func isNonEmptyComposite(v any) bool {
	switch v := v.(type) {
	case map[string]any:
		return len(v) > 0
	case []any:
		return len(v) > 0
	}
	return false
}

// equalWhole reports whether live equals desired as a whole: maps with the same keys, lists with
// the same elements in order, scalars as equalSemantic compares them.
func equalWhole(desired, live any) bool {
	if equal, composite := equalComposite(desired, live, true, equalWhole); composite {
		return equal
	}
	return equalSemantic(desired, live)
}

// equalComposite compares a desired map or list with live, element by element with elem: every
// key of a desired map must be in live (and no other when whole), a list's items pairwise in
// order. composite is false when desired is neither a map nor a list.
func equalComposite(desired, live any, whole bool, elem func(desired, live any) bool) (equal, composite bool) {
	switch d := desired.(type) {
	case map[string]any:
		l, ok := live.(map[string]any)
		if !ok || whole && len(l) != len(d) {
			return false, true
		}
		for k, dv := range d {
			if lv, ok := l[k]; !ok || !elem(dv, lv) {
				return false, true
			}
		}
		return true, true
	case []any:
		l, ok := live.([]any)
		if !ok || len(l) != len(d) {
			return false, true
		}
		for i := range d {
			if !elem(d[i], l[i]) {
				return false, true
			}
		}
		return true, true
	}
	return false, false
}

// describeValidation renders structured-merge-diff validation errors by path only, since their
// messages may quote values; "field not declared in schema", which quotes none, is kept.
func describeValidation(err error) string {
	var verrs typed.ValidationErrors
	if !errors.As(err, &verrs) || len(verrs) == 0 {
		return "invalid"
	}
	parts := make([]string, 0, len(verrs))
	for _, e := range verrs {
		msg := "value does not match the schema"
		if e.ErrorMessage == "field not declared in schema" {
			msg = e.ErrorMessage
		}
		path := e.Path
		if path == "" {
			path = "."
		}
		parts = append(parts, path+": "+msg)
	}
	slices.Sort(parts)
	return truncateString(strings.Join(slices.Compact(parts), "; "), 512)
}

func truncateString(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// resolve returns the value at path p in obj and whether it is there.
func resolve(obj any, p fieldpath.Path) (any, bool) {
	cur := obj
	for _, pe := range p {
		var ok bool
		switch {
		case pe.FieldName != nil:
			var m map[string]any
			if m, ok = cur.(map[string]any); ok {
				cur, ok = m[*pe.FieldName]
			}
		case pe.Key != nil:
			var l []any
			if l, ok = cur.([]any); ok {
				cur, ok = findKeyed(l, *pe.Key)
			}
		case pe.Value != nil:
			var l []any
			if l, ok = cur.([]any); ok {
				i := slices.IndexFunc(l, func(e any) bool { return value.Equals(value.NewValueInterface(e), *pe.Value) })
				if ok = i >= 0; ok {
					cur = l[i]
				}
			}
		case pe.Index != nil:
			var l []any
			if l, ok = cur.([]any); ok {
				if ok = *pe.Index >= 0 && *pe.Index < len(l); ok {
					cur = l[*pe.Index]
				}
			}
		}
		if !ok {
			return nil, false
		}
	}
	return cur, true
}

// findKeyed returns the element of l whose fields equal all of key. Failing that, it returns the
// only element that sets some of the key fields, equal to key, and leaves the others out.
func findKeyed(l []any, key value.FieldList) (any, bool) {
	var partial []any
	for _, e := range l {
		m, ok := e.(map[string]any)
		if !ok {
			continue
		}
		present, mismatch := 0, false
		for _, f := range key {
			v, ok := m[f.Name]
			if !ok {
				continue
			}
			if !value.Equals(value.NewValueInterface(v), f.Value) {
				mismatch = true
				break
			}
			present++
		}
		switch {
		case mismatch || present == 0:
		case present == len(key):
			return e, true
		default:
			partial = append(partial, e)
		}
	}
	if len(partial) == 1 {
		return partial[0], true
	}
	return nil, false
}

// equalSemantic reports whether the live value holds the desired value; see Drift for the rules.
func equalSemantic(desired, live any) bool {
	if equal, composite := equalComposite(desired, live, false, equalSemantic); composite {
		return equal
	}
	switch d := desired.(type) {
	case string:
		l, ok := live.(string)
		if !ok {
			return false
		}
		if d == l {
			return true
		}
		q, err := resource.ParseQuantity(d)
		return err == nil && q.String() == l
	default:
		return value.Equals(value.NewValueInterface(desired), value.NewValueInterface(live))
	}
}

// pathString renders p for people: .spec.replicas, .containers[name=web].image,
// .metadata.labels["app.kubernetes.io/name"], .finalizers[=example.com/x], .args[0].
func pathString(p fieldpath.Path) string {
	var b strings.Builder
	for _, pe := range p {
		switch {
		case pe.FieldName != nil:
			if isPlainName(*pe.FieldName) {
				b.WriteString("." + *pe.FieldName)
			} else {
				fmt.Fprintf(&b, "[%q]", *pe.FieldName)
			}
		case pe.Key != nil:
			parts := make([]string, len(*pe.Key))
			for i, f := range *pe.Key {
				parts[i] = f.Name + "=" + scalarString(f.Value)
			}
			b.WriteString("[" + strings.Join(parts, ",") + "]")
		case pe.Value != nil:
			b.WriteString("[=" + scalarString(*pe.Value) + "]")
		case pe.Index != nil:
			fmt.Fprintf(&b, "[%d]", *pe.Index)
		}
	}
	return b.String()
}

func scalarString(v value.Value) string {
	if v.IsString() {
		return v.AsString()
	}
	return value.ToString(v)
}

func isPlainName(s string) bool {
	if s == "" {
		return false
	}
	return strings.IndexFunc(s, func(r rune) bool {
		plain := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-'
		return !plain
	}) < 0
}
