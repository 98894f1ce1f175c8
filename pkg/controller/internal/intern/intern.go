// Package intern makes the objects of a manager's cache share the metadata they repeat. The
// objects kdag applies for one operator carry the same namespace, label keys, controller label,
// annotation keys, owner reference and managed fields entries, object after object: the 10
// children of an owner hold the same owner UID four times each, the same labels, and the same
// field set of kdag's server-side apply. Decoded from the API server, every object has its own
// copy of each. An Interner's Metadata, a cache transform, replaces each such string by one
// canonical copy (package unique), and each label map by one map shared with the objects that
// arrived just before with the same labels, so a cache of 10 000 objects holds a few copies of
// "kdag.dev/owner-uid" instead of 10 000 (docs/benchmarks.md, section 3: the manager's peak RSS).
//
// Only the metadata that repeats is shared: names, resourceVersions, UIDs of the objects
// themselves, annotation values (hashes, which differ per object) and the objects' content keep
// their own copies, since sharing a value that no other object holds costs more than it saves.
package intern

import (
	"hash/maphash"
	"maps"
	"sync"
	"unique"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// recentLabelSets is how many distinct label maps an Interner remembers to share: the objects
// that share labels (the children of one owner) arrive together, when their owner's reconcile
// creates them or an informer lists them in name order.
const recentLabelSets = 256

// Interner shares the repeated metadata of the objects given to it (Metadata, ObjectMeta). It is
// safe for concurrent use by the transforms of several informers; make one with New, one per
// cache (a zero Interner has no hash seed and must not be used). What it holds of its own is at
// most recentLabelSets label maps.
type Interner struct {
	seed maphash.Seed

	mu     sync.Mutex
	labels map[uint64]map[string]string // a label map by its content's hash (labelsHash)
	ring   [recentLabelSets]uint64      // the hashes in labels, in the order they came; next is the oldest
	next   int
}

// New returns an empty Interner.
func New() *Interner {
	return &Interner{seed: maphash.MakeSeed(), labels: make(map[uint64]map[string]string, recentLabelSets)}
}

// Metadata is a cache transform (controller-runtime cache.ByObject.Transform, client-go
// SharedIndexInformer.SetTransform): it replaces the repeated metadata of in (see ObjectMeta) by
// shared copies and returns in, changed in place. Anything without a typed ObjectMeta (an
// unstructured object, whose metadata is a map; a tombstone) passes unchanged. It never returns
// an error.
func (i *Interner) Metadata(in any) (any, error) {
	if acc, ok := in.(metav1.ObjectMetaAccessor); ok {
		if m, ok := acc.GetObjectMeta().(*metav1.ObjectMeta); ok {
			i.ObjectMeta(m)
		}
	}
	return in, nil
}

// ObjectMeta replaces, in m, by canonical copies: the namespace; the label map (shared whole
// with the objects of the same labels that came recently, its keys and values canonical); the
// annotation keys (not their values); the finalizers; each owner reference's API version, kind,
// name and UID; each managed fields entry's manager, operation, API version, fields type,
// subresource and field set. Every value stays equal to what it was: only where it is stored
// changes.
//
// A label map and a field set (FieldsV1, fieldset_bytes.go) are shared: the objects that hold the
// same one point at one map or array, which must not be written to. The cache's objects are
// read-only already (a cached read returns a deep copy, which copies both; controller-runtime's
// UnsafeDisableDeepCopy hands out the cache's own object, not to be changed), so no writer can
// reach them. Built with the fieldsv1string tag, apimachinery stores every field set as a
// unique.Handle itself (k8s.io/apimachinery v0.37, fieldsv1_string.go), and there is nothing left to
// share (fieldset_string.go).
func (i *Interner) ObjectMeta(m *metav1.ObjectMeta) {
	m.Namespace = str(m.Namespace)
	m.Labels = i.labelMap(m.Labels)
	m.Annotations = keys(m.Annotations)
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

// labelMap returns a recent label map equal to m, or, when none is remembered, a copy of m with
// canonical keys and values, which it remembers in place of the oldest. An empty m is returned
// as it is.
func (i *Interner) labelMap(m map[string]string) map[string]string {
	if len(m) == 0 {
		return m
	}
	h := i.labelsHash(m)
	if shared := i.recentLabels(h, m); shared != nil {
		return shared
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[str(k)] = str(v)
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	if shared := i.sharedLocked(h, m); shared != nil {
		return shared // another informer's object with these labels came meanwhile
	}
	if old := i.ring[i.next]; old != 0 {
		delete(i.labels, old)
	}
	// A hash already held for other labels (a collision) is replaced: its ring slot then drops
	// the newer map early, which only costs a copy later.
	i.labels[h] = out
	i.ring[i.next] = h
	i.next = (i.next + 1) % recentLabelSets
	return out
}

// recentLabels returns the remembered label map of hash h when it equals m, nil otherwise.
func (i *Interner) recentLabels(h uint64, m map[string]string) map[string]string {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.sharedLocked(h, m)
}

// sharedLocked is recentLabels with i.mu held.
func (i *Interner) sharedLocked(h uint64, m map[string]string) map[string]string {
	if shared, ok := i.labels[h]; ok && maps.Equal(shared, m) {
		return shared
	}
	return nil
}

// labelsHash is a hash of m's pairs that does not depend on their order; 0 is never returned
// (it marks an empty ring slot).
func (i *Interner) labelsHash(m map[string]string) uint64 {
	var h uint64
	for k, v := range m {
		h += maphash.String(i.seed, k) ^ (maphash.String(i.seed, v) * 0x9e3779b97f4a7c15)
	}
	if h == 0 {
		h = 1
	}
	return h
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

// keys returns a copy of m with its keys replaced by canonical copies (a copy: a Go map keeps the
// key it was first given), or m itself when it is empty.
func keys(m map[string]string) map[string]string {
	if len(m) == 0 {
		return m
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[str(k)] = v
	}
	return out
}
