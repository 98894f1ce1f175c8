package controller

import (
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kdag-dev/kdag/pkg/metrics"
)

// Options configure a Controller. Every field states its default; pass them with the With…
// functions.
type Options struct {
	// FieldManager is the server-side apply field manager of every write. Default: "kdag-" + the
	// controller's name.
	FieldManager string
	// MaxParallelNodes bounds how many nodes of one graph are applied at once. Default: 32.
	MaxParallelNodes int
	// MaxConcurrentReconciles bounds how many owners are reconciled at once (controller-runtime
	// never reconciles one owner twice at once). Default: 4, not controller-runtime's 1: a
	// reconcile mostly waits on API round trips, so many owners converge faster with a few
	// workers (BenchmarkScale measures it; docs/benchmarks.md has the numbers and the command).
	MaxConcurrentReconciles int
	// OrderedTeardown holds a finalizer and deletes an owner's objects in reverse dependency
	// order (dependents first) when the owner is deleted. Default: false (owner references let
	// the garbage collector delete them in any order); implied by a Cleaner.
	OrderedTeardown bool
	// OperatorVersion is written into every owner's status. Default: "dev".
	OperatorVersion string
	// OwnedTypes add to the ResourceManager's OwnedTypes. Default: none.
	OwnedTypes []client.Object
	// Metrics records the kdag_ series. Default: registered once on controller-runtime's
	// registry, which the manager's metrics endpoint serves.
	Metrics *metrics.Metrics

	// DriftRepairLimit is how many times kdag reverts other writers' changes to one object within
	// DriftRepairWindow. The next change starts a pause: kdag leaves the object as the other
	// writer set it, the node fails with a *DriftConflictError (the owner is Ready=False and
	// Reconciling=True with reason DriftConflict, dependents wait), a Warning event DriftConflict
	// names the other field managers and the fields, and the owner is requeued for when the pause
	// ends. Then kdag repairs once more; another change within DriftRepairWindow starts the next
	// pause, twice as long. An object that stays as kdag left it for DriftRepairWindow starts over.
	// Default: 5. Negative: no limit, every change is reverted at once (two writers that disagree
	// then write the object in turn, as fast as the API server allows).
	DriftRepairLimit int
	// DriftRepairWindow is the time DriftRepairLimit counts repairs in, and how long an object
	// must stay unchanged after kdag's last repair to start over. Default: 1 minute.
	DriftRepairWindow time.Duration
	// DriftBackoff is the length of the first pause. Default: 30 seconds.
	DriftBackoff time.Duration
	// DriftBackoffMax caps the pauses, which double while the conflict goes on. Default: 10
	// minutes.
	DriftBackoffMax time.Duration

	// ReferenceNamespaces are the namespaces whose objects Builder.Reference nodes may name: the
	// Controller watches the metadata of the referenced kinds there (the manager needs RBAC list
	// and watch on them). Default: all namespaces.
	ReferenceNamespaces []string
}

// Option sets a field of Options.
type Option func(*Options)

// WithFieldManager sets Options.FieldManager.
func WithFieldManager(name string) Option { return func(o *Options) { o.FieldManager = name } }

// WithMaxParallelNodes sets Options.MaxParallelNodes.
func WithMaxParallelNodes(n int) Option { return func(o *Options) { o.MaxParallelNodes = n } }

// WithMaxConcurrentReconciles sets Options.MaxConcurrentReconciles.
func WithMaxConcurrentReconciles(n int) Option {
	return func(o *Options) { o.MaxConcurrentReconciles = n }
}

// WithOrderedTeardown sets Options.OrderedTeardown.
func WithOrderedTeardown() Option { return func(o *Options) { o.OrderedTeardown = true } }

// WithOperatorVersion sets Options.OperatorVersion.
func WithOperatorVersion(v string) Option { return func(o *Options) { o.OperatorVersion = v } }

// WithMetrics sets Options.Metrics.
func WithMetrics(m *metrics.Metrics) Option { return func(o *Options) { o.Metrics = m } }

// WithDriftRepairLimit sets Options.DriftRepairLimit and Options.DriftRepairWindow: at most n
// repairs of one object within window (0: the default window).
func WithDriftRepairLimit(n int, window time.Duration) Option {
	return func(o *Options) { o.DriftRepairLimit, o.DriftRepairWindow = n, window }
}

// WithDriftBackoff sets Options.DriftBackoff and Options.DriftBackoffMax (0: the default).
func WithDriftBackoff(initial, maxBackoff time.Duration) Option {
	return func(o *Options) { o.DriftBackoff, o.DriftBackoffMax = initial, maxBackoff }
}

// WithReferenceNamespaces sets Options.ReferenceNamespaces.
func WithReferenceNamespaces(namespaces ...string) Option {
	return func(o *Options) { o.ReferenceNamespaces = append(o.ReferenceNamespaces, namespaces...) }
}

// WithOwnedTypes adds to Options.OwnedTypes.
func WithOwnedTypes(objs ...client.Object) Option {
	return func(o *Options) { o.OwnedTypes = append(o.OwnedTypes, objs...) }
}

func (o *Options) defaults(name string) {
	if o.FieldManager == "" {
		o.FieldManager = "kdag-" + name
	}
	if o.MaxParallelNodes == 0 {
		o.MaxParallelNodes = 32
	}
	if o.MaxConcurrentReconciles == 0 {
		o.MaxConcurrentReconciles = 4
	}
	if o.OperatorVersion == "" {
		o.OperatorVersion = "dev"
	}
	if o.DriftRepairLimit == 0 {
		o.DriftRepairLimit = 5
	}
	if o.DriftRepairWindow <= 0 {
		o.DriftRepairWindow = time.Minute
	}
	if o.DriftBackoff <= 0 {
		o.DriftBackoff = 30 * time.Second
	}
	if o.DriftBackoffMax <= 0 {
		o.DriftBackoffMax = 10 * time.Minute
	}
	o.DriftBackoffMax = max(o.DriftBackoffMax, o.DriftBackoff)
}
