package reconciler

import (
	"context"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/pkg/errors"
	"go.opentelemetry.io/otel/trace"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	crcontroller "sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/apply"
	"github.com/kdag-dev/kdag/pkg/controller/internal/referenced"
	"github.com/kdag-dev/kdag/pkg/graph"
	"github.com/kdag-dev/kdag/pkg/metrics"
	"github.com/kdag-dev/kdag/pkg/resources"
	"github.com/kdag-dev/kdag/pkg/resources/schemas"
	"github.com/kdag-dev/kdag/pkg/tracing"
)

// Reconciler reconciles one owner type with a ResourceManager: it builds the owner's graph,
// applies every node as soon as its blockers are ready, prunes what the graph no longer holds
// and writes the owner's status. Register creates one.
type Reconciler struct {
	name     string
	rm       Manager
	opts     Options
	client   client.Client // reads come from the manager's cache
	reader   client.Reader // uncached; only when the cache cannot answer (see applyNode)
	scheme   *runtime.Scheme
	mapper   meta.RESTMapper
	recorder recorder.EventRecorder

	metrics *metrics.Metrics

	// renders and observed spare a settled owner's reconcile the work of unchanged nodes
	// (memo.go).
	renders  renders
	observed sync.Map  // object UID → *observed
	hashers  sync.Pool // *jsonHasher, for fingerprints

	ownerGVK  schema.GroupVersionKind
	owned     []ownedType
	ownedKind map[schema.GroupKind]bool
	// kindReady: the Options.ReadyWhen rules by kind
	kindReady map[schema.GroupKind]resources.ReadyFunc
	teardown  bool

	// engine writes each node's object (pkg/apply).
	engine *apply.Engine
	// revisions remembers the owners' last revision numbers (revision.go).
	revisions revisions
	// revisionsIndexed: the cache indexes ControllerRevisions by ownerIndex, so the list of an
	// owner's revisions is a lookup, not a scan of every owner's (revision.go).
	revisionsIndexed bool
	// written remembers the status this process last wrote per owner (UID → *writtenStatus),
	// to tell a cache that has not seen that write yet from an owner whose status is as
	// computed (writeStatus).
	written sync.Map
	// refs checks the objects of Graph.Reference nodes and wakes their owners on a change.
	refs *referenced.Cache
	// terminating remembers namespaces seen being deleted (namespace -> time.Time): their owners
	// are going away, and kdag makes no more attempts to create anything there.
	terminating sync.Map
	// expansionStalled holds the owners (types.NamespacedName) Stalled because a StorageClass
	// does not let a claim grow: a change of any StorageClass reconciles them again at once.
	expansionStalled sync.Map
}

type ownedType struct {
	obj  client.Object
	gvk  schema.GroupVersionKind
	list schema.GroupVersionKind
	// indexed: the cache indexes the type by ownerIndex, so prune's list is a lookup.
	indexed bool
}

// Register creates the reconciler named name for m and registers it with mgr: it watches the
// owner type (changes of generation, labels or annotations) and every owned type (any change of
// an object whose controller owner reference, or whose kdag labels, point at an owner). It
// returns an error when name is empty, when m declares no owned type, or when a type is not in
// the manager's scheme — setup mistakes that should stop the process at start.
func Register(mgr ctrl.Manager, name string, m Manager, opts Options) (*Reconciler, error) {
	c, err := newController(mgr, name, m, opts)
	if err != nil {
		return nil, err
	}
	b := ctrl.NewControllerManagedBy(mgr).
		Named(name).
		For(m.NewOwner(), builder.WithPredicates(predicate.Or(
			predicate.GenerationChangedPredicate{}, predicate.LabelChangedPredicate{}, predicate.AnnotationChangedPredicate{}))).
		WithOptions(crcontroller.Options{MaxConcurrentReconciles: c.opts.MaxConcurrentReconciles})
	if err := c.indexOwnersByUID(mgr); err != nil {
		return nil, errors.Wrapf(err, "controller %s: index %s by UID", name, c.ownerGVK.Kind)
	}
	// An update that carries the resourceVersion the cache had is an informer's redelivery (a
	// resync, or a relist after an API server or etcd restart ended the watch), not a change:
	// reconciling every owner once per owned kind for it is a storm at every such restart.
	// Changes made while the watch was down arrive with a new resourceVersion (or as deletions).
	changed := builder.WithPredicates(predicate.ResourceVersionChangedPredicate{})
	for _, t := range c.owned {
		// Owns maps objects to their controller owner; the second watch maps those kdag tracks by
		// its labels alone (another namespace, cluster-scoped, kept).
		b = b.Owns(t.obj, changed).Watches(t.obj, handler.EnqueueRequestsFromMapFunc(c.ownerByLabel), changed)
	}
	if c.ownsClaims() {
		// A claim that cannot grow Stalls its owner until an administrator lets its
		// StorageClass expand volumes: that change must wake the owner.
		b = b.Watches(&storagev1.StorageClass{}, handler.EnqueueRequestsFromMapFunc(c.ownersStalledOnStorage))
	}
	var r reconcile.Reconciler = c
	for i := len(c.opts.Wrappers) - 1; i >= 0; i-- {
		r = c.opts.Wrappers[i](name, m.NewOwner(), r)
	}
	registered, err := b.Build(r)
	if err != nil {
		return nil, errors.Wrapf(err, "controller %s: register with the manager", name)
	}
	c.refs.SetController(registered)
	return c, nil
}

// newController sets a reconciler up without registering it with the manager.
func newController(mgr ctrl.Manager, name string, rm Manager, o Options) (*Reconciler, error) {
	if name == "" {
		return nil, errors.New("controller: a component with an empty name")
	}
	o.Defaults(name)
	c := &Reconciler{
		name:      name,
		rm:        rm,
		opts:      o,
		client:    mgr.GetClient(),
		reader:    mgr.GetAPIReader(),
		scheme:    mgr.GetScheme(),
		mapper:    newMappingCache(mgr.GetRESTMapper()),
		recorder:  mgr.GetEventRecorder(name),
		metrics:   o.Metrics,
		ownedKind: map[schema.GroupKind]bool{},
		kindReady: map[schema.GroupKind]resources.ReadyFunc{},
	}
	for _, k := range o.ReadyWhen {
		gvk, err := apiutil.GVKForObject(k.Kind, c.scheme)
		if err != nil {
			return nil, errors.Wrapf(err, "controller %s: Options.ReadyWhen: type %T is not in the manager's scheme", name, k.Kind)
		}
		if k.Ready == nil {
			return nil, errors.Errorf("controller %s: Options.ReadyWhen for %s: nil resources.ReadyFunc", name, gvk.Kind)
		}
		c.kindReady[gvk.GroupKind()] = k.Ready
	}
	if c.metrics == nil {
		c.metrics = metrics.Register(ctrlmetrics.Registry)
	}
	refs, err := referenced.New(mgr, o.ReferenceNamespaces, o.NamespacedReferences)
	if err != nil {
		return nil, errors.Wrapf(err, "controller %s", name)
	}
	c.refs = refs
	provider, err := schemas.NewProviderForConfig(mgr.GetConfig(), mgr.GetHTTPClient(), schemas.Options{})
	if err != nil {
		return nil, errors.Wrapf(err, "controller %s: OpenAPI schema client", name)
	}
	if c.engine, err = apply.New(c.client, c.reader, provider, apply.Options{
		FieldManager: o.FieldManager, DriftRepairLimit: o.DriftRepairLimit, DriftRepairWindow: o.DriftRepairWindow,
		DriftBackoff: o.DriftBackoff, DriftBackoffMax: o.DriftBackoffMax,
	}); err != nil {
		return nil, errors.Wrapf(err, "controller %s", name)
	}
	c.teardown = o.OrderedTeardown || rm.IsCleaner()

	owner := rm.NewOwner()
	gvk, err := apiutil.GVKForObject(owner, c.scheme)
	if err != nil {
		return nil, errors.Wrapf(err, "controller %s: owner type %T is not in the manager's scheme", name, owner)
	}
	c.ownerGVK = gvk
	if err := onDelete(mgr, owner, func(m metav1.Object) {
		c.renders.forgetOwner(m.GetUID())
		c.revisions.forget(m)
		c.written.Delete(m.GetUID())
	}); err != nil {
		return nil, errors.Wrapf(err, "controller %s: watch deletions of %s", name, gvk.Kind)
	}
	if err := onCached(mgr, owner, c.forgetWrittenOnceCached); err != nil {
		return nil, errors.Wrapf(err, "controller %s: watch %s", name, gvk.Kind)
	}

	if err := watchRevisions(mgr); err != nil {
		return nil, errors.Wrapf(err, "controller %s: watch ControllerRevisions (the owners' revision history)", name)
	}

	ownedObjs := rm.OwnedTypes()
	if len(ownedObjs) == 0 {
		return nil, errors.Errorf("controller %s: no owned types: OwnedTypes of the %s ResourceManager returned none", name, gvk.Kind)
	}
	for _, obj := range ownedObjs {
		gvk, err := apiutil.GVKForObject(obj, c.scheme)
		if err != nil {
			return nil, errors.Wrapf(err, "controller %s: owned type %T is not in the manager's scheme", name, obj)
		}
		if c.ownedKind[gvk.GroupKind()] {
			continue
		}
		list := gvk.GroupVersion().WithKind(gvk.Kind + "List")
		if !c.scheme.Recognizes(list) {
			return nil, errors.Errorf("controller %s: owned type %s has no list type %s in the scheme", name, gvk.Kind, list.Kind)
		}
		if err := c.forgetOnDelete(mgr, obj); err != nil {
			return nil, errors.Wrapf(err, "controller %s: watch deletions of %s", name, gvk.Kind)
		}
		c.ownedKind[gvk.GroupKind()] = true
		c.owned = append(c.owned, ownedType{obj: obj, gvk: gvk, list: list, indexed: c.indexOwned(mgr, obj)})
	}
	c.revisionsIndexed = c.indexRevisions(mgr)
	return c, nil
}

// onDelete calls forget with every object of obj's type the cache sees deleted (by kdag's
// prune, by the garbage collector after the owner, by anyone).
func onDelete(mgr ctrl.Manager, obj client.Object, forget func(metav1.Object)) error {
	informer, err := mgr.GetCache().GetInformer(context.Background(), obj)
	if err != nil {
		return err
	}
	_, err = informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{DeleteFunc: func(o any) {
		if tombstone, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
			o = tombstone.Obj
		}
		if m, ok := o.(metav1.Object); ok {
			forget(m)
		}
	}})
	return err
}

// onCached calls cached with every version of an object of obj's type the cache stores (its
// informer's add and update events, which come once the cache holds the version).
func onCached(mgr ctrl.Manager, obj client.Object, cached func(metav1.Object)) error {
	informer, err := mgr.GetCache().GetInformer(context.Background(), obj)
	if err != nil {
		return err
	}
	call := func(o any) {
		if m, ok := o.(metav1.Object); ok {
			cached(m)
		}
	}
	_, err = informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    call,
		UpdateFunc: func(_, o any) { call(o) },
	})
	return err
}

// forgetOnDelete makes the reconciler forget what it remembers about an object of obj's type
// that it applied (last verified state, drift-repair record, what its content said) once the
// cache sees the object deleted. Without it, the memory of objects deleted by others would last
// as long as the process.
func (c *Reconciler) forgetOnDelete(mgr ctrl.Manager, obj client.Object) error {
	return onDelete(mgr, obj, func(m metav1.Object) {
		if m.GetLabels()[kdagv1alpha1.LabelController] == c.name {
			c.forget(m.GetUID())
		}
	})
}

// ownerUIDIndex names the cache index of owners by their UID.
const ownerUIDIndex = "kdag.dev/uid"

// indexOwnersByUID indexes the cached owners by UID, for ownerByLabel.
func (c *Reconciler) indexOwnersByUID(mgr ctrl.Manager) error {
	return mgr.GetFieldIndexer().IndexField(context.Background(), c.rm.NewOwner(), ownerUIDIndex, func(o client.Object) []string {
		return []string{string(o.GetUID())}
	})
}

// ownerByLabel maps an object this controller applied without an owner reference to its owner
// (by the owner UID label and the owner index), so that its events resume the owner: a waiting
// node, a teardown waiting for the object to be gone. Objects with a controller owner reference
// to the owner are left to Owns.
func (c *Reconciler) ownerByLabel(ctx context.Context, obj client.Object) []reconcile.Request {
	lbls := obj.GetLabels()
	uid := lbls[kdagv1alpha1.LabelOwnerUID]
	if lbls[kdagv1alpha1.LabelController] != c.name || uid == "" {
		return nil
	}
	if ref := metav1.GetControllerOf(obj); ref != nil && ref.UID == types.UID(uid) {
		return nil
	}
	list, err := c.scheme.New(c.ownerGVK.GroupVersion().WithKind(c.ownerGVK.Kind + "List"))
	if err != nil {
		return nil
	}
	owners, ok := list.(client.ObjectList)
	if !ok || c.client.List(ctx, owners, client.MatchingFields{ownerUIDIndex: uid}) != nil {
		return nil
	}
	items, err := meta.ExtractList(owners)
	if err != nil {
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(items))
	for _, it := range items {
		if o, ok := it.(client.Object); ok {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(o)})
		}
	}
	return reqs
}

// ownerIndex names the cache index of the objects of one controller by owner UID.
func (c *Reconciler) ownerIndex() string { return "kdag.dev/owner-uid." + c.name }

// indexOwned indexes the cached objects of obj's type that this controller applied by their
// owner UID label, so that prune finds an owner's objects without scanning every cached object
// of the type (a scan that grows with owners × objects). It reports false when the cache cannot
// add the index (it has started already); prune then filters by label instead.
func (c *Reconciler) indexOwned(mgr ctrl.Manager, obj client.Object) bool {
	name := c.name
	err := mgr.GetFieldIndexer().IndexField(context.Background(), obj, c.ownerIndex(), func(o client.Object) []string {
		l := o.GetLabels()
		if uid := l[kdagv1alpha1.LabelOwnerUID]; uid != "" && l[kdagv1alpha1.LabelController] == name {
			return []string{uid}
		}
		return nil
	})
	return err == nil
}

// Reconcile brings one owner to its desired state. It implements reconcile.Reconciler. An owner
// that Options.OwnerFilter refuses is left alone, as one that is gone.
//
// It returns nil when every node is ready or waits for readiness (the watch on the node's
// object resumes the owner; RequeueAfter, 30 s, bounds the wait of an owner that is not Ready
// should no event come), a reconcile.TerminalError when only a change of the owner can help
// (the owner is Stalled), and any other error for transient failures, which controller-runtime
// retries with rate-limited exponential backoff. When kdag paused repairing an object that
// another writer keeps changing (Options.DriftRepairLimit), it returns nil with RequeueAfter set
// to the end of the pause.
func (c *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	owner := c.rm.NewOwner()
	if err := c.client.Get(ctx, req.NamespacedName, owner); err != nil {
		if apierrors.IsNotFound(err) {
			c.expansionStalled.Delete(req.NamespacedName)
			c.metrics.ForgetOwner(c.name, req.String())
			c.refs.Untrack(req.NamespacedName)
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, errors.Wrapf(err, "get %s %s", c.ownerGVK.Kind, req.NamespacedName)
	}
	if c.opts.OwnerFilter != nil && !c.opts.OwnerFilter(owner) {
		// Another manager's owner (a cache that does not select this manager's owners holds
		// it): not this reconciler's to touch, and no teardown either.
		c.expansionStalled.Delete(req.NamespacedName)
		c.revisions.forget(owner)
		c.metrics.ForgetOwner(c.name, req.String())
		c.refs.Untrack(req.NamespacedName)
		return reconcile.Result{}, nil
	}
	if c.opts.Deletions.unseen(owner) {
		// This process deleted it (a parent's prune, a teardown) and the cache has not seen that
		// yet: reconciled now, it would get objects created just before it goes. Its deletion
		// event brings it back; the requeue bounds the wait.
		return reconcile.Result{RequeueAfter: time.Second}, nil
	}
	start := time.Now()
	ctx, span := c.startReconcileSpan(ctx, owner)
	var err error
	defer func() { tracing.EndSpan(span, err) }()
	logger := CapVerbosity(log.FromContext(ctx)).WithValues("controller", c.name, "owner", req.String())
	logger = logger.WithValues(tracing.LogValues(ctx)...)
	ctx = log.IntoContext(ctx, logger)
	var res reconcile.Result
	res, err = c.reconcile(ctx, owner)
	// duration: the reconcile's wall time, so that a log line says when it started too.
	if err != nil {
		// controller-runtime logs the error too, but without the trace: this line links them.
		logger.Info("reconcile failed", "error", err.Error(), "duration", time.Since(start).String())
	} else {
		logger.V(1).Info("reconciled", "requeueAfter", res.RequeueAfter.String(), "duration", time.Since(start).String())
	}
	return res, err
}

// reconcile is Reconcile once the owner is read and the span started.
func (c *Reconciler) reconcile(ctx context.Context, owner client.Object) (reconcile.Result, error) {
	c.forgetTerminatingNamespace(owner)
	if c.namespaceTerminating(owner.GetNamespace()) || c.refs.NamespaceTerminating(ctx, owner.GetNamespace()) {
		c.markNamespaceTerminating(owner.GetNamespace())
		return c.leaveDyingNamespace(ctx, owner)
	}
	if !owner.GetDeletionTimestamp().IsZero() {
		return c.finalize(ctx, owner)
	}
	if c.teardown && !controllerutil.ContainsFinalizer(owner, kdagv1alpha1.Finalizer) {
		if err := c.addFinalizer(ctx, owner); err != nil {
			return reconcile.Result{}, err
		}
	}

	r, err := c.reconcileGraph(ctx, owner)
	if err != nil {
		return reconcile.Result{}, err
	}
	// The revision of what the graph wrote is recorded while the status is written; the
	// reconcile ends once both are done.
	defer c.startRevision(ctx, owner, r)()
	if c.opts.Deletions.deleted(owner.GetUID()) {
		// This process deleted the owner while the graph ran (a parent's prune): no status for
		// an owner that is going. Its deletion event brings it back; the requeue bounds the wait.
		return reconcile.Result{RequeueAfter: time.Second}, nil
	}
	if key := client.ObjectKeyFromObject(owner); r.recheck {
		c.expansionStalled.Store(key, struct{}{})
	} else {
		c.expansionStalled.Delete(key)
	}
	if !r.allReady() && c.refs.Stopped() {
		// The manager is shutting down and has stopped the informers of referenced objects
		// before this reconcile ended: what kept the graph from Ready may be that stop, not the
		// owner, and a status written now would say NotReady for it (a crash-test run caught
		// one). The next process writes the status.
		return reconcile.Result{}, errors.Wrapf(referenced.ErrStopped, "%s %s: status not written",
			c.ownerGVK.Kind, client.ObjectKeyFromObject(owner))
	}
	if err := c.writeStatus(ctx, owner, r); err != nil {
		c.statusWriteFailed(ctx, owner, err)
		return reconcile.Result{}, err
	}
	if err := r.returnErr(); err != nil {
		return reconcile.Result{}, err
	}
	if len(r.prune.terminating) > 0 {
		// Their deletion event reconciles the owner again; the recheck bounds the wait whatever
		// happens to that event.
		r.requeueAt(TeardownRecheck)
	}
	if r.terminal == nil && r.conflict == nil && !r.allReady() {
		// The watch on what it waits for resumes the owner; the recheck bounds the wait whatever
		// happens to that event (a readiness rule that reads something no watch reports, an
		// event lost). A Ready owner is never requeued.
		r.requeueAt(WaitingRecheck)
	}
	return reconcile.Result{RequeueAfter: r.requeueAfter}, nil
}

// reconcileGraph validates the owner, builds and runs its graph, and prunes. It returns an
// error only when the owner's finalizer could not be added (nothing ran).
func (c *Reconciler) reconcileGraph(ctx context.Context, owner client.Object) (*outcome, error) {
	r := &outcome{start: time.Now()}
	specs, index := c.prepareGraph(ctx, owner, r)
	if specs == nil {
		return r, nil
	}
	// An object kdag cannot own by reference is deleted (or orphaned) by kdag when the owner
	// goes: the finalizer must be in place before the first such object exists. It is written
	// while the graph runs, and only those objects' creates wait for it (finalizerWrite); a
	// BeforeDelete hook, which must see every object, has it written first.
	var fw *finalizerWrite
	if !controllerutil.ContainsFinalizer(owner, kdagv1alpha1.Finalizer) {
		switch needsFinalizer(owner, specs) {
		case finalizerFirst:
			if err := c.addFinalizer(ctx, owner); err != nil {
				return nil, err
			}
		case finalizerBeside:
			fw = c.startFinalizer(ctx, owner)
		}
	}
	runStart := time.Now()
	r.nodes = c.runGraph(ctx, owner, fw, specs)
	if err := fw.end(owner); err != nil {
		// The objects that needed it were not created; those the garbage collector deletes
		// with the owner were. The reconcile is retried, as when nothing ran.
		return nil, err
	}
	r.summarize()
	if r.wantsFinalizer() && !controllerutil.ContainsFinalizer(owner, kdagv1alpha1.Finalizer) {
		// A user keeps an object: the finalizer first, then, on the next reconcile,
		// the object loses its owner reference, so that kdag orphans it when the owner goes.
		if err := c.addFinalizer(ctx, owner); err != nil {
			return nil, err
		}
		r.requeueAt(keptRequeue)
	}
	// Prune only once every node is Ready: an object leaving the graph stays until what replaces
	// it is in place (a renamed ConfigMap's old copy is still mounted by the running pods while
	// the Deployment that will mount the new one waits behind a migration).
	if r.allReady() && ctx.Err() == nil {
		r.recordPrune(c.prune(ctx, owner, index))
	}
	c.observeRun(owner, r, time.Since(runStart))
	return r, nil
}

// keptRequeue is how soon an owner is reconciled again once kdag added its finalizer for an
// object a user keeps: that reconcile drops the object's owner reference. No watch event would
// start it (the finalizer changes neither the owner's generation nor its labels or annotations).
const keptRequeue = 100 * time.Millisecond

// prepareGraph validates the owner and builds its graph (buildGraph), under the "build graph" span. It
// returns nil nodes (and records the error in r) when the graph cannot be built.
func (c *Reconciler) prepareGraph(ctx context.Context, owner client.Object, r *outcome) (specs []*nodeSpec, index map[graph.NodeID]int) {
	ctx, span := startSpan(ctx, SpanBuildGraph)
	defer func() {
		span.SetAttributes(attrNodes.Int(len(specs)))
		tracing.EndSpan(span, firstErr(r.terminal, r.transient))
	}()
	if err := apply.CheckOwner(owner); err != nil {
		r.terminal, r.reason = errors.Wrapf(err, "%s %s is invalid", c.ownerGVK.Kind, client.ObjectKeyFromObject(owner)), kdagv1alpha1.ReasonInvalidDriftPolicy
		return nil, nil
	}
	if _, err := c.rm.Validate(ctx, owner); err != nil {
		if isTerminal(err) {
			r.terminal, r.reason = errors.Wrapf(err, "%s %s is invalid", c.ownerGVK.Kind, client.ObjectKeyFromObject(owner)), kdagv1alpha1.ReasonInvalid
		} else {
			r.transient, r.reason = errors.Wrapf(err, "%s %s: validate", c.ownerGVK.Kind, client.ObjectKeyFromObject(owner)), kdagv1alpha1.ReasonValidationFailed
		}
		return nil, nil
	}
	b, err := buildGraph(ctx, c.rm, owner, c.scheme, c.mapper, c.ownedKind)
	var build *GraphError
	switch {
	case errors.As(err, &build):
		r.terminal, r.reason = err, kdagv1alpha1.ReasonBuildFailed
		return nil, nil
	case isTerminal(err):
		r.terminal, r.reason = err, kdagv1alpha1.ReasonBuildFailed
		return nil, nil
	case err != nil:
		r.transient, r.reason = err, kdagv1alpha1.ReasonBuildFailed
		return nil, nil
	}
	objs, err := c.watchedObjects(b.nodes)
	if err != nil {
		r.transient, r.reason = err, kdagv1alpha1.ReasonBuildFailed
		return nil, nil
	}
	if err := c.refs.Track(ctx, client.ObjectKeyFromObject(owner), objs); err != nil {
		r.transient, r.reason = err, kdagv1alpha1.ReasonBuildFailed
		return nil, nil
	}
	if b.nodes == nil {
		return []*nodeSpec{}, b.index
	}
	return b.nodes, b.index
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// runGraph applies every node, each once its blockers are ready.
func (c *Reconciler) runGraph(ctx context.Context, owner client.Object, fw *finalizerWrite, specs []*nodeSpec) []nodeResult {
	ctx, span := startSpan(ctx, SpanRunGraph, trace.WithAttributes(attrNodes.Int(len(specs))))
	defer span.End()
	runStart := time.Now()
	results := make([]nodeResult, len(specs))
	oc := &ownerCheck{finalizer: fw}
	edges := 0
	for _, s := range specs {
		edges += len(s.blockers)
	}
	g := graph.New[graph.NodeID](graph.Options{SizeHint: len(specs), EdgeHint: edges})
	for i, s := range specs {
		results[i].spec = s // before the run: dependents read their blockers' specs
		blockers := make([]graph.NodeID, len(s.blockers))
		for j, bl := range s.blockers {
			blockers[j] = bl.id
		}
		fn := func(ctx context.Context) error {
			// Blockers finished before this runs (the scheduler's happens-before), so reading
			// their slots is safe; each node writes only its own slot.
			ctx, span := startNodeSpan(ctx, s, results, runStart)
			results[i].spanContext = span.SpanContext()
			err := c.processNode(ctx, owner, oc, s, results, i)
			span.SetAttributes(AttrAction.String(string(results[i].action)))
			var w *waitingError
			switch {
			case err == nil:
				span.SetAttributes(AttrOutcome.String(string(kdagv1alpha1.NodeReady)))
				tracing.EndSpan(span, nil)
			case errors.As(err, &w):
				span.SetAttributes(AttrOutcome.String(string(kdagv1alpha1.NodeWaiting)))
				tracing.EndSpan(span, nil)
			default:
				span.SetAttributes(AttrOutcome.String(string(kdagv1alpha1.NodeFailed)))
				tracing.EndSpan(span, err)
			}
			return err
		}
		if err := g.AddNode(s.id, fn, blockers...); err != nil {
			// The Graph checked IDs and blockers already; this is a bug.
			results[i] = nodeResult{spec: s, state: kdagv1alpha1.NodeFailed, err: errors.Wrap(err, "add to graph")}
			return results
		}
	}
	run, _ := g.Run(ctx, graph.RunOptions{MaxParallel: c.opts.MaxParallelNodes})
	for i, nr := range run.Nodes {
		res := &results[i]
		res.spec = specs[i]
		res.wait, res.duration = nr.Wait, nr.Duration()
		res.started, res.ended = nr.Start, nr.End
		switch nr.Outcome {
		case graph.Succeeded:
			res.state = kdagv1alpha1.NodeReady
		case graph.Failed:
			var w *waitingError
			if errors.As(nr.Err, &w) {
				res.state, res.message, res.detail, res.retryAfter = kdagv1alpha1.NodeWaiting, w.Error(), w.detail, w.retryAfter
			} else {
				res.state, res.err = kdagv1alpha1.NodeFailed, nr.Err
			}
		case graph.Blocked:
			res.state, res.message = kdagv1alpha1.NodeBlocked, "waiting for "+nr.BlockedBy.String()
		case graph.Canceled:
			res.state, res.message = kdagv1alpha1.NodeCanceled, "reconcile ended before this node ran"
		}
	}
	recordSkippedNodeSpans(ctx, results, run)
	return results
}

// finalizerWrite is the owner's finalizer being added while its graph runs (startFinalizer). The
// nodes whose objects need it (not owned by reference) wait for it before they create anything;
// the others do not.
type finalizerWrite struct {
	done  chan struct{}
	added client.Object // a copy of the owner, as the patch returned it; nil on error
	err   error
}

// startFinalizer adds kdag's finalizer to a copy of owner, in its own goroutine: the graph's
// nodes read owner meanwhile. End returns the result and brings it into owner.
func (c *Reconciler) startFinalizer(ctx context.Context, owner client.Object) *finalizerWrite {
	fw := &finalizerWrite{done: make(chan struct{})}
	copied := owner.DeepCopyObject().(client.Object)
	go func() {
		defer close(fw.done)
		if fw.err = c.addFinalizer(ctx, copied); fw.err == nil {
			fw.added = copied
		}
	}()
	return fw
}

// wait returns once the finalizer is added (nil), failed (the write's error) or ctx ended (its
// error). A nil fw (the owner had the finalizer, or needs none) returns nil at once.
func (fw *finalizerWrite) wait(ctx context.Context) error {
	if fw == nil {
		return nil
	}
	select {
	case <-fw.done:
		return fw.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// end waits for the write, which ends with the reconcile's context at the latest, and returns
// its error; added, the owner gets the finalizer and the resourceVersion the patch returned. Call
// it once no node runs.
func (fw *finalizerWrite) end(owner client.Object) error {
	if fw == nil {
		return nil
	}
	<-fw.done
	if fw.err != nil {
		return fw.err
	}
	owner.SetFinalizers(fw.added.GetFinalizers())
	owner.SetResourceVersion(fw.added.GetResourceVersion())
	return nil
}

func (c *Reconciler) addFinalizer(ctx context.Context, owner client.Object) error {
	patch := client.MergeFromWithOptions(owner.DeepCopyObject().(client.Object), client.MergeFromWithOptimisticLock{})
	controllerutil.AddFinalizer(owner, kdagv1alpha1.Finalizer)
	return errors.Wrapf(c.client.Patch(ctx, owner, patch, client.FieldOwner(c.opts.FieldManager)),
		"add finalizer %s to %s %s", kdagv1alpha1.Finalizer, c.ownerGVK.Kind, client.ObjectKeyFromObject(owner))
}

// forget drops what the reconciler remembers about an object.
func (c *Reconciler) forget(uid types.UID) {
	c.engine.Forget(uid)
	c.observed.Delete(uid)
}

func logFrom(ctx context.Context) logr.Logger { return log.FromContext(ctx) }

func errorsIsPanic(err error) bool { return errors.Is(err, graph.ErrPanic) }

// ownsClaims reports whether the reconciler's owners own PersistentVolumeClaims.
func (c *Reconciler) ownsClaims() bool {
	for _, t := range c.owned {
		if t.gvk.Group == "" && t.gvk.Kind == "PersistentVolumeClaim" {
			return true
		}
	}
	return false
}

// ownersStalledOnStorage maps a StorageClass event to the owners Stalled because a claim could
// not grow (VolumeExpansionForbidden): any class change may be the fix, and there are few.
func (c *Reconciler) ownersStalledOnStorage(context.Context, client.Object) []reconcile.Request {
	var out []reconcile.Request
	c.expansionStalled.Range(func(k, _ any) bool {
		out = append(out, reconcile.Request{NamespacedName: k.(types.NamespacedName)})
		return true
	})
	return out
}
