// Package intern makes the objects of a manager's cache share the metadata they repeat. The
// objects kdag applies for one operator carry the same namespace, label keys, controller label,
// annotation keys, owner reference and managed fields entries, object after object: the 10
// children of an owner hold the same owner UID four times each, and the same field set of kdag's
// server-side apply. Decoded from the API server, every object has its own copy of each. Metadata,
// a cache transform, replaces each such string by one canonical copy (package unique), so a cache
// of 10 000 objects holds a few copies of "kdag.dev/owner-uid" instead of 10 000
// (docs/benchmarks.md, section 3: the manager's peak RSS).
//
// Only the metadata that repeats is shared: names, resourceVersions, UIDs of the objects
// themselves, annotation values (hashes, which differ per object) and the objects' content keep
// their own copies, since sharing a value that no other object holds costs more than it saves.
package intern

import (
	"unique"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Metadata is a cache transform (controller-runtime cache.ByObject.Transform, client-go
// SharedIndexInformer.SetTransform): it replaces the repeated strings of in's metadata (see
// ObjectMeta) by canonical copies and returns in, changed in place. Anything without a typed
// ObjectMeta (an unstructured object, whose metadata is a map; a tombstone) passes unchanged. It
// never returns an error.
func Metadata(in any) (any, error) {
	if acc, ok := in.(metav1.ObjectMetaAccessor); ok {
		if m, ok := acc.GetObjectMeta().(*metav1.ObjectMeta); ok {
			ObjectMeta(m)
		}
	}
	return in, nil
}

// ObjectMeta replaces, in m, by canonical copies: the namespace; the label keys and values; the
// annotation keys (not their values); the finalizers; each owner reference's API version, kind,
// name and UID; each managed fields entry's manager, operation, API version, fields type,
// subresource and field set. Every value stays equal to what it was: only where its bytes are
// stored changes.
//
// A field set (FieldsV1) is shared as bytes (fieldset_bytes.go): the objects that hold the same
// one point at one array, which must not be written to. The cache's objects are read-only already
// (a cached read returns a deep copy, which copies the field set; controller-runtime's
// UnsafeDisableDeepCopy hands out the cache's own object, not to be changed), so no writer can
// reach it. Built with the fieldsv1string tag, apimachinery stores every field set as a
// unique.Handle itself (k8s.io/apimachinery v0.37, fieldsv1_string.go), and there is nothing left to
// share (fieldset_string.go).
func ObjectMeta(m *metav1.ObjectMeta) {
	m.Namespace = str(m.Namespace)
	m.Labels = stringMap(m.Labels, true)
	m.Annotations = stringMap(m.Annotations, false)
	for i := range m.Finalizers {
		m.Finalizers[i] = str(m.Finalizers[i])
	}
	for i := range m.OwnerReferences {
		r := &m.OwnerReferences[i]
		r.APIVersion, r.Kind, r.Name = str(r.APIVersion), str(r.Kind), str(r.Name)
		r.UID = types.UID(str(string(r.UID)))
	}
	for i := range m.ManagedFields {
		e := &m.ManagedFields[i]
		e.Manager, e.APIVersion, e.FieldsType, e.Subresource = str(e.Manager), str(e.APIVersion), str(e.FieldsType), str(e.Subresource)
		e.Operation = metav1.ManagedFieldsOperationType(str(string(e.Operation)))
		if e.FieldsV1 != nil {
			fieldSet(e.FieldsV1)
		}
	}
}

// str returns the canonical copy of s. A canonical copy lives while an object (or anything else)
// holds it; once none does, the next str of the same value makes a new one. So the copies of a
// value are at most one per garbage collection during which objects holding it arrived, not
// one per object.
func str(s string) string {
	if s == "" {
		return s
	}
	return unique.Make(s).Value()
}

// stringMap returns a copy of m with its keys replaced by canonical copies, and its values too
// when values is set (a copy: a Go map keeps the key it was first given), or m itself when it
// is empty.
func stringMap(m map[string]string, values bool) map[string]string {
	if len(m) == 0 {
		return m
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		if values {
			v = str(v)
		}
		out[str(k)] = v
	}
	return out
}
