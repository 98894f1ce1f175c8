package controller

import (
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/kdag-dev/kdag/pkg/metrics"
	"github.com/kdag-dev/kdag/pkg/resources"
)

// Option is an optional setting of a reconciler, given to New, For or Setup. Each With…
// function says the default.
type Option interface {
	applyTo(*options)
}

// optionFunc is an Option that is a function.
type optionFunc func(*options)

func (f optionFunc) applyTo(o *options) { f(o) }

// options are a reconciler's settings; the With… functions document each field and its default.
type options struct {
	FieldManager            string
	MaxParallelNodes        int
	MaxConcurrentReconciles int
	OrderedTeardown         bool
	OperatorVersion         string
	Metrics                 *metrics.Metrics
	DriftRepairLimit        int
	DriftRepairWindow       time.Duration
	DriftBackoff            time.Duration
	DriftBackoffMax         time.Duration
	ReferenceNamespaces     []string
	WatchNamespaces         []string
	KindReadiness           []kindReadiness
	OwnerFilter             func(client.Object) bool
	Wrappers                []ReconcilerWrapper
	NamespacedReferences    bool
	// deletions is shared by the reconcilers of one Setup (withDeletions); nil: the reconciler's own.
	deletions *deletions
}

// withDeletions makes the reconciler share d, the owners deleted by this process, with the
// other reconcilers of one Setup.
func withDeletions(d *deletions) Option { return optionFunc(func(o *options) { o.deletions = d }) }

// kindReadiness is one WithReadyWhen: the readiness rule of every node of kind's type.
type kindReadiness struct {
	kind client.Object
	fn   resources.ReadyFunc
}

// WithFieldManager sets the server-side apply field manager of every write. Default: "kdag-" and
// the controller's name.
func WithFieldManager(name string) Option {
	return optionFunc(func(o *options) { o.FieldManager = name })
}

// WithMaxParallelNodes bounds how many nodes of one graph are applied at once. Default: 64
// (defaultMaxParallelNodes).
func WithMaxParallelNodes(n int) Option {
	return optionFunc(func(o *options) { o.MaxParallelNodes = n })
}

// WithMaxConcurrentReconciles bounds how many owners are reconciled at once (controller-runtime
// never reconciles one owner twice at once). Default: 4, not controller-runtime's 1: a reconcile
// mostly waits on API round trips, so many owners converge faster with a few workers
// (BenchmarkScale measures it; docs/benchmarks.md has the numbers and the command).
func WithMaxConcurrentReconciles(n int) Option {
	return optionFunc(func(o *options) { o.MaxConcurrentReconciles = n })
}

// WithOrderedTeardown holds a finalizer and deletes an owner's objects in reverse dependency
// order (dependents first) when the owner is deleted. Default: off (owner references let the
// garbage collector delete them in any order); implied by a Cleaner.
func WithOrderedTeardown() Option {
	return optionFunc(func(o *options) { o.OrderedTeardown = true })
}

// WithOperatorVersion sets the version written into every owner's status. Default: "dev".
func WithOperatorVersion(v string) Option {
	return optionFunc(func(o *options) { o.OperatorVersion = v })
}

// WithMetrics sets where the kdag_ series are recorded. Default: registered once on
// controller-runtime's registry, which the manager's metrics endpoint serves.
func WithMetrics(m *metrics.Metrics) Option {
	return optionFunc(func(o *options) { o.Metrics = m })
}

// WithDriftRepairLimit sets how many times kdag reverts other writers' changes to one object
// within window. The next change starts a pause: kdag leaves the object as the other writer set
// it, the node fails (the owner is Ready=False and Reconciling=True with reason DriftConflict,
// dependents wait), a Warning event DriftConflict names the other field managers and the fields,
// and the owner is requeued for when the pause ends. Then kdag repairs once more; another change
// within window starts the next pause, twice as long. An object that stays as kdag left it for
// window starts over. Default: 5 within 1 minute (window 0: 1 minute). Negative n: no limit,
// every change is reverted at once (two writers that disagree then write the object in turn, as
// fast as the API server allows).
func WithDriftRepairLimit(n int, window time.Duration) Option {
	return optionFunc(func(o *options) { o.DriftRepairLimit, o.DriftRepairWindow = n, window })
}

// WithDriftBackoff sets the length of the first pause of drift repairs and the cap of the
// pauses, which double while the conflict goes on. Default: 30 seconds and 10 minutes (0: the
// default).
func WithDriftBackoff(initial, maxBackoff time.Duration) Option {
	return optionFunc(func(o *options) { o.DriftBackoff, o.DriftBackoffMax = initial, maxBackoff })
}

// WithReferenceNamespaces sets the namespaces whose objects Graph.Reference nodes may name:
// the reconciler watches the metadata of the referenced kinds there (the manager needs RBAC list
// and watch on them). Default: all namespaces.
func WithReferenceNamespaces(namespaces ...string) Option {
	return optionFunc(func(o *options) { o.ReferenceNamespaces = append(o.ReferenceNamespaces, namespaces...) })
}

// WithReadyWhen sets the readiness rule of every node whose object has kind's type (an empty
// object, such as &v1alpha1.PostgreSQL{}), so that an author registers it once for the kind
// instead of giving ReadyWhen to each node. A node's own ReadyWhen still wins; of two
// WithReadyWhen for one kind, the last wins. New returns an error when kind's type is not in the
// manager's scheme or fn is nil.
//
// Default, without either: kstatus (resources.Ready); and for a custom resource (a kind client-go
// does not know) also a status from its controller for the generation kdag applied: an object
// whose status is empty is not ready, however kstatus sees it (kstatus calls it Current; see
// fluxcd/kustomize-controller#387), nor one whose status.observedGeneration, or the
// observedGeneration of its conditions, is another generation. A custom resource without a
// controller to write status, or whose controller never does, needs a WithReadyWhen.
func WithReadyWhen(kind client.Object, fn resources.ReadyFunc) Option {
	return optionFunc(func(o *options) { o.KindReadiness = append(o.KindReadiness, kindReadiness{kind: kind, fn: fn}) })
}

// defaultMaxParallelNodes is how many nodes of one graph a reconciler applies at once by default.
// A layer waits for its slowest node, so a layer wider than the bound takes two waves. At the
// old bound of 32, kdag took 1.9× the time of BenchmarkConverge's raw floor (all of a layer at
// once) on a 50-wide layer on 2 cores and 2.5 to 2.9× on 16 cores, against 1.1 and 1.3 to 1.4×
// on a 10-wide one, where the bound plays no part (docs/benchmarks.md). 64 lets every layer of the
// reference operators and of that benchmark go in one wave, while the API server still decides:
// with the default 4 concurrent reconciles a reconciler has at most 256 writes in flight, about
// the seats API Priority and Fairness gives the workload-low level (where a service account's
// requests go) on a default kube-apiserver (600 seats × 100 of 245 shares); beyond its seats
// the server queues requests fairly, answering 429 only when its queues are full. A node whose
// blockers are not done takes no slot, so the bound costs a narrow graph nothing.
const defaultMaxParallelNodes = 64

func (o *options) defaults(name string) {
	if o.FieldManager == "" {
		o.FieldManager = "kdag-" + name
	}
	if o.MaxParallelNodes == 0 {
		o.MaxParallelNodes = defaultMaxParallelNodes
	}
	if o.MaxConcurrentReconciles == 0 {
		o.MaxConcurrentReconciles = 4
	}
	if o.OperatorVersion == "" {
		o.OperatorVersion = "dev"
	}
	if o.deletions == nil {
		o.deletions = newDeletions()
	}
}

// WithWatchNamespaces tells Setup that the manager's cache is limited to namespaces
// (ctrl.Options.Cache.DefaultNamespaces) and its RBAC may be Roles in them: the start-up RBAC
// check then asks for each rule in each of these namespaces instead of cluster-wide. Default:
// cluster-wide (a ClusterRole, as the chart grants). Controllers ignore it.
func WithWatchNamespaces(namespaces ...string) Option {
	return optionFunc(func(o *options) { o.WatchNamespaces = append([]string(nil), namespaces...) })
}

// WithOwnerFilter makes the reconciler reconcile only the owners for which keep returns true: it
// reads the owner from the cache, and an owner keep refuses is left alone as if it were gone
// (what the reconciler remembers of it is forgotten; nothing is written, no teardown runs). It is
// the predicate of a layer that splits the owners between managers (package shard), checked on
// every reconcile so that a manager whose cache also holds other owners leaves them alone.
// keep must be cheap and must not block: it runs on every reconcile. Several WithOwnerFilter:
// an owner must pass them all. Default: every owner.
func WithOwnerFilter(keep func(owner client.Object) bool) Option {
	return optionFunc(func(o *options) {
		if prev := o.OwnerFilter; prev != nil && keep != nil {
			o.OwnerFilter = func(owner client.Object) bool { return prev(owner) && keep(owner) }
			return
		}
		if keep != nil {
			o.OwnerFilter = keep
		}
	})
}

// ReconcilerWrapper wraps the reconcile.Reconciler of the reconciler named name, whose owners are
// of owner's type (owner is an empty one; copy it with DeepCopyObject to read an owner), in a
// reconcile.Reconciler of its own: it runs instead of next for every request, and calls next for
// the requests it does not handle itself (package shard hands owners over to another manager
// this way).
type ReconcilerWrapper func(name string, owner client.Object, next reconcile.Reconciler) reconcile.Reconciler

// WithReconcilerWrapper registers the reconciler's reconciler with the manager wrapped in wrap.
// Several: the first given is the outermost. Default: none, the reconciler itself.
func WithReconcilerWrapper(wrap ReconcilerWrapper) Option {
	return optionFunc(func(o *options) {
		if wrap != nil {
			o.Wrappers = append(o.Wrappers, wrap)
		}
	})
}

// WithNamespacedReferences makes the informers of the objects that Graph.Reference and
// ProtectsData nodes watch (metadata only) hold only the namespaces in which the reconciler's
// owners reference objects, one informer per kind and namespace, started with the first owner
// there that references the kind and stopped with the last one, instead of one informer per kind
// for every namespace. The reconciler's memory then follows its own owners' namespaces, not the
// cluster's, at the cost of one watch per kind and namespace: use it where several managers split
// the owners (package shard sets it) and the owners are spread over namespaces. Cluster-scoped
// referenced kinds are watched whole either way. Default: off.
func WithNamespacedReferences() Option {
	return optionFunc(func(o *options) { o.NamespacedReferences = true })
}
