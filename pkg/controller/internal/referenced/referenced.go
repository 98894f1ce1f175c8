// Package referenced is the cache of the objects a kdag graph references without owning them
// (Graph.Reference nodes, and the data a ProtectsData node protects): metadata informers of their
// kinds, started at the first reference of a kind, that wake the owners which reference an
// object when it changes, and what kdag last read of each object's content.
package referenced

import (
	"context"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/pkg/errors"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crcontroller "sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/kdag-dev/kdag/pkg/graph"
	"github.com/kdag-dev/kdag/pkg/resources"
)

// Cache holds what a reconciler knows of the objects its owners' graphs reference and wakes
// those owners when the objects change. Referenced objects carry no kdag label, so the manager's
// label-selected cache does not hold them: Cache keeps informers of its own that hold only
// their metadata (existence and resourceVersion, never a Secret's data; client-go's metadata
// informers), one per referenced kind (and namespace, with controller.Options.ReferenceNamespaces),
// started at the first reference of the kind. With controller.Options.NamespacedReferences they are one per
// kind and namespace of the owners' references, stopped with the last owner there, so that a
// manager of a shard holds the metadata of its own owners' namespaces only. An object's content (its keys and their hash) is
// read from the API server only when its resourceVersion moved since kdag last read it, so an
// unchanged owner costs no uncached read.
//
// It is a manager Runnable: the manager starts it with the caches and stops its informers, and
// waits for them, when it stops.
type Cache struct {
	client     metadata.Interface
	mapper     meta.RESTMapper
	reader     client.Reader // uncached, for the content
	namespaces map[string]bool
	// perNamespace: one informer per kind and namespace of the owners' references, stopped with
	// the last owner that references something there (controller.Options.NamespacedReferences).
	perNamespace bool
	started      chan struct{} // closed by Start, which sets ctx

	mu        sync.Mutex // guards the fields below
	ctx       context.Context
	factories map[string]metadatainformer.SharedInformerFactory // by namespace; "" for all
	watched   map[informerKey]bool
	ctrl      WatchRegistrar                                 // nil when the reconciler is not registered with the manager (tests)
	owners    map[graph.NodeID]map[types.NamespacedName]bool // referenced object → the owners that need it
	refs      map[types.NamespacedName][]Watched             // owner → the objects it watches
	seen      map[referenceKey]State
	// inNamespace counts, with perNamespace, the objects the owners watch in each namespace
	// (the entries of refs there): a namespace's informers stop when it drops to 0.
	inNamespace map[string]int
	// namespacesAllowed says whether the manager may watch Namespaces, once namespacesDecided.
	namespacesDecided, namespacesAllowed bool
}

// informerKey identifies one informer of a Cache: a kind in a namespace ("" for all).
type informerKey struct {
	gvk       schema.GroupVersionKind
	namespace string
}

// referenceKey identifies what kdag remembers of a referenced object: its content as far as a
// set of required keys (sorted, joined) goes.
type referenceKey struct {
	id   graph.NodeID
	keys string
}

// keyOf returns the key of what kdag remembers of ref.
func keyOf(ref Ref) referenceKey {
	return referenceKey{id: ref.ID, keys: strings.Join(ref.RequireKeys, "\x00")}
}

// Ref names a referenced object and the keys its dependents require of it.
type Ref struct {
	// ID is the object's node ID (its group, kind, namespace and name).
	ID graph.NodeID
	// GVK is its group, version and kind.
	GVK schema.GroupVersionKind
	// RequireKeys are the keys (of a Secret's or ConfigMap's data) its dependents read; none:
	// all of its data, or, for another kind, its spec.
	RequireKeys []string
}

// ErrNotFound says that a referenced object does not exist (any more).
var ErrNotFound = errors.New("it does not exist")

// ErrStopped says that the Cache has stopped, its informers shut down: the manager is shutting
// down (it stops the Cache, a runnable without leader election, before its controllers' last
// reconciles end). It says nothing of the owner or its objects.
var ErrStopped = errors.New("the informers of referenced objects have stopped: the manager is shutting down")

// WatchRegistrar is the part of a controller-runtime controller a Cache needs.
type WatchRegistrar interface {
	Watch(src source.TypedSource[reconcile.Request]) error
}

var _ WatchRegistrar = crcontroller.Controller(nil)

// State is what kdag knows of a referenced object's content as of resourceVersion: the
// hash of the keys its dependents read and the keys it lacks. Never the content itself.
type State struct {
	uid             types.UID
	resourceVersion string
	// ContentHash is the hash of what the object's dependents read: the required keys, or all
	// of a Secret's or ConfigMap's data, or another kind's spec.
	ContentHash string
	// Missing are the required keys the object lacks, sorted.
	Missing []string
}

// New creates the informers of referenced objects (in namespaces, all when empty; with
// perNamespace, only those where owners reference objects) and adds them to mgr, which starts
// them with the caches.
func New(mgr ctrl.Manager, namespaces []string, perNamespace bool) (*Cache, error) {
	mc, err := metadata.NewForConfig(mgr.GetConfig())
	if err != nil {
		return nil, errors.Wrap(err, "create the metadata client of referenced objects")
	}
	r := NewFrom(mc, mgr.GetRESTMapper(), mgr.GetAPIReader(), namespaces, perNamespace)
	if err := mgr.Add(r); err != nil {
		return nil, errors.Wrap(err, "add the informers of referenced objects to the manager")
	}
	return r, nil
}

// NewFrom returns a Cache that reads metadata with mc, kinds' resources with mapper
// and content (and whether namespaces may be listed) with reader; Start starts it.
func NewFrom(mc metadata.Interface, mapper meta.RESTMapper, reader client.Reader, namespaces []string, perNamespace bool) *Cache {
	r := &Cache{
		client: mc, mapper: mapper, reader: reader,
		namespaces: map[string]bool{}, started: make(chan struct{}),
		factories: map[string]metadatainformer.SharedInformerFactory{},
		watched:   map[informerKey]bool{},
		owners:    map[graph.NodeID]map[types.NamespacedName]bool{},
		refs:      map[types.NamespacedName][]Watched{},
		seen:      map[referenceKey]State{},

		perNamespace: perNamespace, inNamespace: map[string]int{},
	}
	for _, ns := range namespaces {
		r.namespaces[ns] = true
	}
	return r
}

// Start implements manager.Runnable: informers start from now on, and stop, waited for, when ctx
// ends.
func (r *Cache) Start(ctx context.Context) error {
	r.mu.Lock()
	r.ctx = ctx
	r.mu.Unlock()
	close(r.started)
	// Whether namespaces can be watched is asked once, now, not in a reconcile.
	if r.canWatchNamespaces(ctx) {
		_, _ = r.informer(ctx, namespaceGVK, "")
	}
	<-ctx.Done()
	r.mu.Lock()
	factories := maps.Clone(r.factories)
	r.mu.Unlock()
	for _, f := range factories {
		f.Shutdown()
	}
	return nil
}

// SetController makes the informers started from now on reconcile the owners that reference
// their objects through ctrl (the reconciler's controller-runtime controller). Call it before
// the manager starts; without it (a reconciler not registered with the manager) nothing wakes.
func (r *Cache) SetController(ctrl WatchRegistrar) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ctrl = ctrl
}

// NamespacesDecided reports whether Start has asked, with its one uncached list, whether the
// manager may watch Namespaces.
func (r *Cache) NamespacesDecided() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.namespacesDecided
}

// NeedLeaderElection implements manager.LeaderElectionRunnable: like a cache, every replica runs
// it.
func (r *Cache) NeedLeaderElection() bool { return false }

// Stopped reports whether the Cache has stopped: Start's context has ended, so no informer
// starts or syncs any more and what a reconcile asks of the Cache fails with ErrStopped.
func (r *Cache) Stopped() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ctx != nil && r.ctx.Err() != nil
}

// informer returns the synced informer that holds objects of gvk in namespace, starting it
// (and, for a registered reconciler, watching it) the first time.
func (r *Cache) informer(ctx context.Context, gvk schema.GroupVersionKind, namespace string) (toolscache.SharedIndexInformer, error) {
	inf, err := r.start(ctx, gvk, namespace)
	if err != nil {
		return nil, err
	}
	// WaitFor returns as soon as the informer has synced; WaitForCacheSync polls every 100 ms, a
	// wait added to the first reconcile that references each kind (issue 32; docs/benchmarks.md,
	// "The reference sample's time to Ready").
	if !toolscache.WaitFor(ctx, "", inf.HasSyncedChecker()) {
		if r.Stopped() {
			return nil, errors.Wrapf(ErrStopped, "the informer of referenced %s objects", gvk.Kind)
		}
		return nil, errors.Errorf("the informer of referenced %s objects did not sync: %v", gvk.Kind, ctx.Err())
	}
	return inf, nil
}

// start returns the informer that holds objects of gvk in namespace, synced or not, starting it
// (and, for a registered reconciler, watching it) the first time.
func (r *Cache) start(ctx context.Context, gvk schema.GroupVersionKind, namespace string) (toolscache.SharedIndexInformer, error) {
	select {
	case <-r.started:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if r.Stopped() {
		// A factory that has shut down starts no informer: waiting for one would wait for good.
		return nil, errors.Wrapf(ErrStopped, "the informer of referenced %s objects", gvk.Kind)
	}
	mapping, err := r.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return nil, errors.Wrapf(err, "find the resource of referenced kind %s", gvk.Kind)
	}
	key := informerKey{gvk: gvk}
	if len(r.namespaces) > 0 && namespace != "" {
		if !r.namespaces[namespace] {
			return nil, errors.Errorf("namespace %s is not one of the controller's ReferenceNamespaces", namespace)
		}
		key.namespace = namespace
	}
	if r.perNamespace && namespace != "" {
		key.namespace = namespace
	}
	r.mu.Lock()
	f := r.factories[key.namespace]
	if f == nil {
		f = metadatainformer.NewFilteredSharedInformerFactory(r.client, 0, key.namespace, nil)
		r.factories[key.namespace] = f
	}
	inf := f.ForResource(mapping.Resource).Informer()
	if _, known := r.watched[key]; !known {
		if err := inf.SetTransform(stripManagedFields); err != nil {
			r.mu.Unlock()
			return nil, errors.Wrapf(err, "set up the informer of referenced %s objects", gvk.Kind)
		}
		r.watched[key] = false
	}
	f.Start(r.ctx.Done())
	watch := r.ctrl != nil && !r.watched[key]
	r.watched[key] = r.watched[key] || watch
	r.mu.Unlock()
	if watch {
		src := &source.Informer{Informer: inf, Handler: handler.EnqueueRequestsFromMapFunc(r.ownersOf(gvk))}
		if err := r.ctrl.Watch(src); err != nil {
			r.mu.Lock()
			r.watched[key] = false
			r.mu.Unlock()
			if r.Stopped() { // the informer stopped with the Cache: "stopped already"
				return nil, errors.Wrapf(ErrStopped, "watch referenced %s objects", gvk.Kind)
			}
			return nil, errors.Wrapf(err, "watch referenced %s objects", gvk.Kind)
		}
	}
	return inf, nil
}

// namespaceGVK is the kind of the informer that tells a namespace being deleted.
var namespaceGVK = schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}

// NamespaceTerminating reports whether namespace is being deleted, from a metadata
// informer of Namespaces. When the manager may not list and watch namespaces (an installation
// confined to its namespaces by RBAC), it reports false: kdag then learns it from the first
// create the API server refuses (markNamespaceTerminating).
func (r *Cache) NamespaceTerminating(ctx context.Context, namespace string) bool {
	if namespace == "" || !r.canWatchNamespaces(ctx) {
		return false
	}
	m, err := r.Cached(ctx, namespaceGVK, "", namespace)
	if err != nil || m == nil {
		return false // a namespace the informer has not seen yet is a new one, not a dying one
	}
	return !m.GetDeletionTimestamp().IsZero()
}

// canWatchNamespaces reports whether the manager may list Namespaces, asking the API server once
// per process (one uncached list of at most one item).
func (r *Cache) canWatchNamespaces(ctx context.Context) bool {
	r.mu.Lock()
	decided, allowed := r.namespacesDecided, r.namespacesAllowed
	r.mu.Unlock()
	if decided {
		return allowed
	}
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(namespaceGVK.GroupVersion().WithKind("NamespaceList"))
	err := r.reader.List(ctx, list, client.Limit(1))
	if err != nil && !apierrors.IsForbidden(err) {
		return false // not decided: ask again next time
	}
	r.mu.Lock()
	r.namespacesDecided, r.namespacesAllowed = true, err == nil
	r.mu.Unlock()
	return err == nil
}

// stripManagedFields drops an object's managed fields before an informer stores it.
func stripManagedFields(in any) (any, error) {
	if m, err := meta.Accessor(in); err == nil && m.GetManagedFields() != nil {
		m.SetManagedFields(nil)
	}
	return in, nil
}

// Watched is an object whose changes reconcile the owners that need it: a Graph.Reference
// node's object, or, for a ProtectsData node, its own object and the data it protects (a key
// restored without kdag's labels, which the manager's cache does not see, must wake the owner).
type Watched struct {
	ID  graph.NodeID
	GVK schema.GroupVersionKind
}

// Track records the objects owner's graph watches (replacing what it watched before) and
// starts the informers of their kinds, so that a change of any of them reconciles owner. It does
// not wait for a new informer's first list: Cached does, so that only the nodes that read a
// referenced object wait, while the rest of the graph runs (issue 32).
func (r *Cache) Track(ctx context.Context, owner types.NamespacedName, objs []Watched) error {
	r.mu.Lock()
	for _, old := range r.refs[owner] {
		if !slices.ContainsFunc(objs, func(w Watched) bool { return w.ID == old.ID }) {
			r.dropOwnerLocked(old.ID, owner)
		}
	}
	for _, w := range objs {
		r.inNamespace[w.ID.Namespace]++ // before the old ones are counted out: a namespace still used stays
	}
	unused := r.uncountLocked(r.refs[owner])
	delete(r.refs, owner)
	if len(objs) > 0 {
		r.refs[owner] = objs
	}
	for _, w := range objs {
		if r.owners[w.ID] == nil {
			r.owners[w.ID] = map[types.NamespacedName]bool{}
		}
		r.owners[w.ID][owner] = true
	}
	r.mu.Unlock()
	stopInformers(unused)
	for _, w := range objs {
		if _, err := r.start(ctx, w.GVK, w.ID.Namespace); err != nil {
			return errors.Wrapf(err, "%s", w.ID)
		}
	}
	return nil
}

// Untrack forgets owner (it is gone).
func (r *Cache) Untrack(owner types.NamespacedName) {
	r.mu.Lock()
	for _, w := range r.refs[owner] {
		r.dropOwnerLocked(w.ID, owner)
	}
	unused := r.uncountLocked(r.refs[owner])
	delete(r.refs, owner)
	r.mu.Unlock()
	stopInformers(unused)
}

// uncountLocked counts objs out of inNamespace and, with perNamespace, takes out of r the
// informer factories of the namespaces no owner references anything in any more; the caller
// stops them (stopInformers) once it has unlocked r.mu. Cluster-wide informers ("") stay.
func (r *Cache) uncountLocked(objs []Watched) []metadatainformer.SharedInformerFactory {
	var unused []metadatainformer.SharedInformerFactory
	for _, w := range objs {
		ns := w.ID.Namespace
		if r.inNamespace[ns]--; r.inNamespace[ns] > 0 {
			continue
		}
		delete(r.inNamespace, ns)
		if !r.perNamespace || ns == "" || r.namespaces[ns] || r.factories[ns] == nil {
			continue // ReferenceNamespaces' informers stay: the user named those namespaces
		}
		unused = append(unused, r.factories[ns])
		delete(r.factories, ns)
		for k := range r.watched {
			if k.namespace == ns {
				delete(r.watched, k)
			}
		}
	}
	return unused
}

// stopInformers stops the informers of factories and waits for them.
func stopInformers(factories []metadatainformer.SharedInformerFactory) {
	for _, f := range factories {
		f.Shutdown()
	}
}

// CachedObjects returns how many objects of gvk the informers of the Cache hold, over every
// namespace: what the reconciler's memory of referenced objects of that kind costs.
func (r *Cache) CachedObjects(gvk schema.GroupVersionKind) int {
	mapping, err := r.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return 0
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for k := range r.watched {
		if k.gvk == gvk {
			n += len(r.factories[k.namespace].ForResource(mapping.Resource).Informer().GetStore().ListKeys())
		}
	}
	return n
}

// dropOwnerLocked records that owner no longer references id; what kdag knows of id's content
// is forgotten with its last owner.
func (r *Cache) dropOwnerLocked(id graph.NodeID, owner types.NamespacedName) {
	delete(r.owners[id], owner)
	if len(r.owners[id]) > 0 {
		return
	}
	delete(r.owners, id)
	for k := range r.seen {
		if k.id == id {
			delete(r.seen, k)
		}
	}
}

// ownersOf returns the map function of the informer of gvk: a referenced object to the owners
// that reference it. (Objects of metadata informers carry no kind: gvk says it.)
func (r *Cache) ownersOf(gvk schema.GroupVersionKind) handler.MapFunc {
	return func(_ context.Context, obj client.Object) []reconcile.Request {
		id := graph.NodeID{Group: gvk.Group, Kind: gvk.Kind, Namespace: obj.GetNamespace(), Name: obj.GetName()}
		r.mu.Lock()
		defer r.mu.Unlock()
		reqs := make([]reconcile.Request, 0, len(r.owners[id]))
		for owner := range r.owners[id] {
			reqs = append(reqs, reconcile.Request{NamespacedName: owner})
		}
		return reqs
	}
}

// Cached returns the metadata of the referenced object gvk namespace/name from its informer, or
// nil when the informer does not hold it.
func (r *Cache) Cached(ctx context.Context, gvk schema.GroupVersionKind, namespace, name string) (metav1.Object, error) {
	inf, err := r.informer(ctx, gvk, namespace)
	if err != nil {
		return nil, err
	}
	key := name
	if namespace != "" {
		key = namespace + "/" + name
	}
	item, exists, err := inf.GetIndexer().GetByKey(key)
	if err != nil || !exists {
		return nil, err
	}
	m, err := meta.Accessor(item)
	return m, errors.Wrap(err, "read the informer's object")
}

// Content returns what kdag knows of the content of the referenced object m: remembered while
// its UID and resourceVersion stay the same, read from the API server otherwise.
func (r *Cache) Content(ctx context.Context, ref Ref, m metav1.Object) (State, error) {
	r.mu.Lock()
	st, ok := r.seen[keyOf(ref)]
	r.mu.Unlock()
	if ok && st.uid == m.GetUID() && st.resourceVersion == m.GetResourceVersion() {
		return st, nil
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(ref.GVK)
	if err := r.reader.Get(ctx, client.ObjectKey{Namespace: ref.ID.Namespace, Name: ref.ID.Name}, u); err != nil {
		if apierrors.IsNotFound(err) {
			return st, errors.Wrapf(ErrNotFound, "%s", ref.ID)
		}
		return st, errors.Wrapf(err, "%s: read", ref.ID)
	}
	st = State{uid: u.GetUID(), resourceVersion: u.GetResourceVersion()}
	hashed := u
	if resources.HasDataKeys(ref.GVK) {
		selected, missing, err := resources.SelectKeys(u, ref.RequireKeys)
		if err != nil {
			return st, errors.Wrapf(err, "%s: select keys", ref.ID)
		}
		hashed, st.Missing = selected, missing
	}
	hash, err := resources.ContentHash(hashed)
	if err != nil {
		return st, errors.Wrapf(err, "%s: hash content", ref.ID)
	}
	st.ContentHash = hash
	r.mu.Lock()
	if _, tracked := r.owners[ref.ID]; tracked {
		r.seen[keyOf(ref)] = st
	}
	r.mu.Unlock()
	return st, nil
}
