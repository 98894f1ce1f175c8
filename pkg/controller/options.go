package controller

import (
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/kdag-dev/kdag/pkg/controller/internal/reconciler"
	"github.com/kdag-dev/kdag/pkg/metrics"
	"github.com/kdag-dev/kdag/pkg/resources"
)

// Options are a reconciler's settings, given to For (one component's), Component.With and Setup
// (every component's, before each component's own). The zero value of each field is its default.
// Several are merged in the order given: a later non-zero field wins, except where a field says
// that the values add up (ReferenceNamespaces, ReadyWhen, Wrappers) or combine (OwnerFilter).
type Options struct {
	// FieldManager is the server-side apply field manager of every write. Default: "kdag-" and
	// the controller's name.
	FieldManager string
	// MaxParallelNodes bounds how many nodes of one graph are applied at once. Default: 64
	// (reconciler.DefaultMaxParallelNodes).
	MaxParallelNodes int
	// MaxConcurrentReconciles bounds how many owners are reconciled at once (controller-runtime
	// never reconciles one owner twice at once). Default: 4, not controller-runtime's 1: a
	// reconcile mostly waits on API round trips, so many owners converge faster with a few
	// workers (BenchmarkScale measures it; docs/benchmarks.md has the numbers and the command).
	MaxConcurrentReconciles int
	// OrderedTeardown holds a finalizer and deletes an owner's objects in reverse dependency order
	// (dependents first) when the owner is deleted. Default: off (owner references let the garbage
	// collector delete them in any order); implied by a Cleaner.
	OrderedTeardown bool
	// OperatorVersion is the version written into every owner's status. Default: "dev".
	OperatorVersion string
	// Metrics is where the kdag_ series are recorded. Default: registered once on
	// controller-runtime's registry, which the manager's metrics endpoint serves.
	Metrics *metrics.Metrics
	// DriftRepairLimit is how many times kdag reverts other writers' changes to one object within
	// DriftRepairWindow. The next change starts a pause: kdag leaves the object as the other
	// writer set it, the node fails (the owner is Ready=False and Reconciling=True with reason
	// DriftConflict, dependents wait), a Warning event DriftConflict names the other field
	// managers and the fields, and the owner is requeued for when the pause ends. Then kdag
	// repairs once more; another change within the window starts the next pause, twice as long.
	// An object that stays as kdag left it for the window starts over. Default: 5. Negative: no
	// limit, every change is reverted at once (two writers that disagree then write the object
	// in turn, as fast as the API server allows).
	DriftRepairLimit int
	// DriftRepairWindow is the time DriftRepairLimit counts repairs in. Default: 1 minute.
	DriftRepairWindow time.Duration
	// DriftBackoff is the length of the first pause of drift repairs. Default: 30 seconds.
	DriftBackoff time.Duration
	// DriftBackoffMax caps the pauses, which double while the conflict goes on. Default: 10
	// minutes.
	DriftBackoffMax time.Duration
	// ReferenceNamespaces are the namespaces whose objects Graph.Reference nodes may name: the
	// reconciler watches the metadata of the referenced kinds there (the manager needs RBAC list
	// and watch on them). They add up over merged Options. Default: all namespaces.
	ReferenceNamespaces []string
	// WatchNamespaces tells Setup that the manager's cache is limited to these namespaces
	// (ctrl.Options.Cache.DefaultNamespaces) and its RBAC may be Roles in them: the start-up RBAC
	// check then asks for each rule in each of them instead of cluster-wide. Default:
	// cluster-wide (a ClusterRole, as the chart grants). Controllers ignore it.
	WatchNamespaces []string
	// ReadyWhen are readiness rules per kind, so that an author registers one for a kind instead
	// of giving ReadyWhen to each node. A node's own ReadyWhen still wins; of two rules for one
	// kind, the later wins. They add up over merged Options. Setup returns an error when a kind's
	// type is not in the manager's scheme or its rule is nil.
	//
	// Default, without either: kstatus (resources.Ready); and for a custom resource (a kind
	// client-go does not know) also a status from its controller for the generation kdag applied:
	// an object whose status is empty is not ready, however kstatus sees it (kstatus calls it
	// Current; see fluxcd/kustomize-controller#387), nor one whose status.observedGeneration, or
	// the observedGeneration of its conditions, is another generation. A custom resource without
	// a controller to write status, or whose controller never does, needs a rule here.
	ReadyWhen []KindReadiness
	// OwnerFilter makes the reconciler reconcile only the owners for which it returns true: it
	// reads the owner from the cache, and an owner the filter refuses is left alone as if it were
	// gone (what the reconciler remembers of it is forgotten; nothing is written, no teardown
	// runs). It is the predicate of a layer that splits the owners between managers (package
	// shard), checked on every reconcile so that a manager whose cache also holds other owners
	// leaves them alone. It must be cheap and must not block. Over merged Options an owner must
	// pass every filter. Default: every owner.
	OwnerFilter func(owner client.Object) bool
	// Wrappers wrap the reconciler's reconcile.Reconciler when it is registered with the manager;
	// the first is the outermost. They add up over merged Options. Default: none.
	Wrappers []ReconcilerWrapper
	// NamespacedReferences makes the informers of the objects that Graph.Reference and
	// ProtectsData nodes watch (metadata only) hold only the namespaces in which the reconciler's
	// owners reference objects, one informer per kind and namespace, started with the first owner
	// there that references the kind and stopped with the last one, instead of one informer per
	// kind for every namespace. The reconciler's memory then follows its own owners' namespaces,
	// not the cluster's, at the cost of one watch per kind and namespace: use it where several
	// managers split the owners (package shard sets it) and the owners are spread over
	// namespaces. Cluster-scoped referenced kinds are watched whole either way. Default: off.
	NamespacedReferences bool

	// deletions is shared by the reconcilers of one Setup; nil: the reconciler's own.
	deletions *reconciler.Deletions
}

// KindReadiness is the readiness rule of every node whose object has Kind's type
// (Options.ReadyWhen). Kind is an empty object, such as &v1alpha1.PostgreSQL{}.
type KindReadiness struct {
	Kind  client.Object
	Ready resources.ReadyFunc
}

// ReconcilerWrapper wraps the reconcile.Reconciler of the reconciler named name, whose owners are
// of owner's type (owner is an empty one; copy it with DeepCopyObject to read an owner), in a
// reconcile.Reconciler of its own: it runs instead of next for every request, and calls next for
// the requests it does not handle itself (package shard hands owners over to another manager
// this way).
type ReconcilerWrapper func(name string, owner client.Object, next reconcile.Reconciler) reconcile.Reconciler

// mergeOptions merges opts in order (Options says how).
func mergeOptions(opts ...Options) Options {
	var o Options
	for _, p := range opts {
		o.merge(p)
	}
	return o
}

func (o *Options) merge(p Options) {
	setIf(&o.FieldManager, p.FieldManager)
	setIf(&o.MaxParallelNodes, p.MaxParallelNodes)
	setIf(&o.MaxConcurrentReconciles, p.MaxConcurrentReconciles)
	o.OrderedTeardown = o.OrderedTeardown || p.OrderedTeardown
	setIf(&o.OperatorVersion, p.OperatorVersion)
	if p.Metrics != nil {
		o.Metrics = p.Metrics
	}
	setIf(&o.DriftRepairLimit, p.DriftRepairLimit)
	setIf(&o.DriftRepairWindow, p.DriftRepairWindow)
	setIf(&o.DriftBackoff, p.DriftBackoff)
	setIf(&o.DriftBackoffMax, p.DriftBackoffMax)
	o.ReferenceNamespaces = append(o.ReferenceNamespaces, p.ReferenceNamespaces...)
	if p.WatchNamespaces != nil {
		o.WatchNamespaces = append([]string(nil), p.WatchNamespaces...)
	}
	o.ReadyWhen = append(o.ReadyWhen, p.ReadyWhen...)
	if prev, keep := o.OwnerFilter, p.OwnerFilter; prev != nil && keep != nil {
		o.OwnerFilter = func(owner client.Object) bool { return prev(owner) && keep(owner) }
	} else if keep != nil {
		o.OwnerFilter = keep
	}
	for _, w := range p.Wrappers {
		if w != nil {
			o.Wrappers = append(o.Wrappers, w)
		}
	}
	o.NamespacedReferences = o.NamespacedReferences || p.NamespacedReferences
	if p.deletions != nil {
		o.deletions = p.deletions
	}
}

// setIf sets *dst to v when v is not its type's zero value.
func setIf[T comparable](dst *T, v T) {
	var zero T
	if v != zero {
		*dst = v
	}
}

// config returns o as the reconciler takes it.
func (o Options) config() reconciler.Options {
	c := reconciler.Options{
		FieldManager: o.FieldManager, MaxParallelNodes: o.MaxParallelNodes, MaxConcurrentReconciles: o.MaxConcurrentReconciles,
		OrderedTeardown: o.OrderedTeardown, OperatorVersion: o.OperatorVersion, Metrics: o.Metrics,
		DriftRepairLimit: o.DriftRepairLimit, DriftRepairWindow: o.DriftRepairWindow, DriftBackoff: o.DriftBackoff,
		DriftBackoffMax: o.DriftBackoffMax, ReferenceNamespaces: o.ReferenceNamespaces, OwnerFilter: o.OwnerFilter,
		NamespacedReferences: o.NamespacedReferences, Deletions: o.deletions,
	}
	for _, k := range o.ReadyWhen {
		c.ReadyWhen = append(c.ReadyWhen, reconciler.KindReadiness(k))
	}
	for _, w := range o.Wrappers {
		c.Wrappers = append(c.Wrappers, reconciler.Wrapper(w))
	}
	return c
}
