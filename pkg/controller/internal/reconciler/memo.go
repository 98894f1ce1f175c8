package reconciler

import (
	"crypto/sha256"
	"encoding/json"
	"hash"
	"strconv"
	"sync"

	"github.com/pkg/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/apply"
	"github.com/kdag-dev/kdag/pkg/graph"
	"github.com/kdag-dev/kdag/pkg/resources"
)

// A settled owner's reconcile finds every node unchanged. What makes that cheap is memory of
// two things, each valid only while its inputs are the same:
//
//   - rendered: per owner and node, a fingerprint of the author's object as last rendered (the
//     SHA-256 of its JSON) with what it rendered to (desired hash, content hash). An object with
//     the same fingerprint and the same blockers' hash renders the same: no conversion, no
//     unstructured hashing. (A fingerprint, not a copy: it keeps the memory of 10 000 nodes in
//     kilobytes, not megabytes.)
//   - observed: per live object, what its content said at one resourceVersion (kstatus
//     readiness; a create-only object's content hash). The same resourceVersion is the same
//     content: no conversion.
//
// With both, and the apply engine's record of the object as verified at that resourceVersion
// (apply.Engine.Unchanged), an unchanged node costs a cache read and a deep comparison. Any
// change, by the author or by another writer, misses the memory and takes the full path.

// rendered is a node's desired object as last rendered for one owner.
type rendered struct {
	fingerprint [sha256.Size]byte // of the author's object
	keep        bool
	release     bool   // rendered without owner reference: the live object is kept by a user
	inherited   string // the owner's labels copied onto the object (apply.InheritedLabels)
	depHash     string
	desiredHash string
	contentHash string // "" for create-only nodes: their content is the live object's
}

// renders remembers rendered nodes per owner UID (an *ownerRenders), and the Finished nodes
// whose object the API server was found not to hold (finishedGone).
type renders struct{ owners, gone sync.Map }

// ownerRenders is what is remembered of one owner's nodes. Its nodes render concurrently; a
// map under a lock holds each entry in one slot, where a sync.Map boxed the key and added a node
// per entry (docs/benchmarks.md, section 3: the manager's peak RSS).
type ownerRenders struct {
	mu    sync.Mutex
	nodes map[graph.NodeID]*rendered
}

func (o *ownerRenders) load(id graph.NodeID) *rendered {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.nodes[id]
}

func (o *ownerRenders) store(id graph.NodeID, r *rendered) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.nodes == nil {
		o.nodes = map[graph.NodeID]*rendered{}
	}
	o.nodes[id] = r
}

func (r *renders) of(owner types.UID) *ownerRenders {
	if m, ok := r.owners.Load(owner); ok {
		return m.(*ownerRenders)
	}
	m, _ := r.owners.LoadOrStore(owner, &ownerRenders{})
	return m.(*ownerRenders)
}

// finishedGone returns the owner's Finished nodes whose object is known to be gone (a *sync.Map
// of graph.NodeID → struct{}).
func (r *renders) finishedGone(owner types.UID) *sync.Map {
	m, _ := r.gone.LoadOrStore(owner, &sync.Map{})
	return m.(*sync.Map)
}

// forgetOwner drops what is remembered of owner's nodes.
func (r *renders) forgetOwner(owner types.UID) {
	r.owners.Delete(owner)
	r.gone.Delete(owner)
}

// render returns what s renders to for owner, and the desired object when it had to build it
// (nil when the memory answered). release renders it without owner reference (its live object
// is kept by a user's annotation).
func (c *Reconciler) render(owner client.Object, s *nodeSpec, results []nodeResult, release bool) (*rendered, *unstructured.Unstructured, error) {
	depHash := dependenciesHash(s, results)
	fp, err := c.fingerprint(s.obj)
	if err != nil {
		return nil, nil, errors.Wrapf(err, "%s: encode", s.id)
	}
	memo := c.renders.of(owner.GetUID())
	if r := memo.load(s.id); r != nil {
		if r.keep == s.keep && r.release == release && r.depHash == depHash && r.fingerprint == fp && r.inherited == apply.InheritedLabels(owner) {
			return r, nil, nil
		}
	}
	desired, err := c.desiredObject(owner, s, depHash, release)
	if err != nil {
		return nil, nil, err
	}
	r := &rendered{
		fingerprint: fp, keep: s.keep, release: release, depHash: depHash, inherited: apply.InheritedLabels(owner),
		desiredHash: desired.GetAnnotations()[kdagv1alpha1.AnnotationDesiredHash],
	}
	// What dependents consume of a node kdag renders is the desired object as rendered, hashed
	// before the apply replaces it with the API server's response (which adds defaults): the
	// same hash whether the object was just created or read from the cache.
	if !s.createOnly {
		if r.contentHash, err = resources.ContentHash(desired); err != nil {
			return nil, nil, errors.Wrapf(err, "%s: hash content", s.id)
		}
	}
	memo.store(s.id, r)
	return r, desired, nil
}

// fingerprint returns the SHA-256 of obj's JSON encoding (encoding/json sorts map keys: equal
// objects, equal fingerprints).
func (c *Reconciler) fingerprint(obj client.Object) ([sha256.Size]byte, error) {
	h, ok := c.hashers.Get().(*jsonHasher)
	if !ok {
		h = &jsonHasher{sum: sha256.New()}
		h.enc = json.NewEncoder(h.sum)
	}
	defer c.hashers.Put(h)
	h.sum.Reset()
	var fp [sha256.Size]byte
	if err := h.enc.Encode(obj); err != nil {
		return fp, err
	}
	h.sum.Sum(fp[:0])
	return fp, nil
}

// jsonHasher is a JSON encoder writing into a SHA-256, reused across calls.
type jsonHasher struct {
	sum hash.Hash
	enc *json.Encoder
}

// desiredObject returns the node's object as it will be applied (apply.Desired): the author's
// object with kdag's labels, the Keep annotation, the owner reference, the dependencies' hash
// and the desired hash; without owner reference when release (a user keeps the live object).
func (c *Reconciler) desiredObject(owner client.Object, s *nodeSpec, depHash string, release bool) (*unstructured.Unstructured, error) {
	return apply.Desired(c.applyOwner(owner), s.obj, s.gvk, c.scheme,
		apply.DesiredOptions{Keep: s.keep, Release: release, DependenciesHash: depHash})
}

// observed is what a live object's content said at one resourceVersion.
type observed struct {
	resourceVersion string
	readyKnown      bool
	ready           error  // checkReady's kstatus answer (nil: ready), when readyKnown
	contentHash     string // a create-only object's content hash, "" until asked
}

// observation returns what is remembered of obj at its resourceVersion (a copy, to change and
// store), or an empty one for that resourceVersion.
func (c *Reconciler) observation(obj client.Object) observed {
	if v, ok := c.observed.Load(obj.GetUID()); ok {
		if o := v.(*observed); o.resourceVersion == obj.GetResourceVersion() {
			return *o
		}
	}
	return observed{resourceVersion: obj.GetResourceVersion()}
}

// unstructuredOf returns obj as unstructured (obj itself when it is).
func unstructuredOf(obj client.Object, s *nodeSpec) (*unstructured.Unstructured, error) {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		return u, nil
	}
	u, err := resources.ToUnstructured(obj, s.gvk)
	return u, errors.Wrapf(err, "%s: convert live object", s.id)
}

// liveContentHash returns the content hash of a create-only node's live object.
func (c *Reconciler) liveContentHash(s *nodeSpec, live client.Object) (string, error) {
	o := c.observation(live)
	if o.contentHash != "" {
		return o.contentHash, nil
	}
	u, err := unstructuredOf(live, s)
	if err != nil {
		return "", err
	}
	if o.contentHash, err = resources.ContentHash(u); err != nil {
		return "", errors.Wrapf(err, "%s: hash content", s.id)
	}
	c.observed.Store(live.GetUID(), &o)
	return o.contentHash, nil
}

// kstatusReady returns checkReady's kstatus answer for live, from memory when live's
// resourceVersion is the one last judged.
func (c *Reconciler) kstatusReady(s *nodeSpec, live client.Object) error {
	if r, ok := resources.TypedReady(live); ok {
		// A kind without status: no conversion, nothing worth remembering.
		if !r.Ready {
			return &waitingError{msg: s.id.String() + " is not ready (" + r.Status + ")"}
		}
		return nil
	}
	o := c.observation(live)
	if o.readyKnown {
		return o.ready
	}
	u, err := unstructuredOf(live, s)
	if err != nil {
		return err
	}
	r, err := resources.Ready(u)
	switch {
	case err != nil:
		return errors.Wrapf(err, "%s: readiness", s.id) // not remembered: may be transient
	case r.Status == resources.StatusFailed:
		o.ready = newObjectFailed(s.id, u, r.Message)
	case r.Inherited:
		o.ready = &waitingError{msg: s.id.String() + " is not ready: " + r.Message, detail: r.Message}
	case !r.Ready:
		o.ready = &waitingError{msg: s.id.String() + " is not ready (" + r.Status + ")"}
	case !clientgoscheme.Scheme.Recognizes(s.gvk) && !resources.GenerationObserved(u):
		reason := "no status from its controller for generation " + strconv.FormatInt(u.GetGeneration(), 10) + " yet"
		o.ready = &waitingError{msg: s.id.String() + " is not ready: " + reason, detail: reason}
	}
	o.readyKnown = true
	if live.GetUID() != "" {
		c.observed.Store(live.GetUID(), &o)
	}
	return o.ready
}
