package controller

import (
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
	// MaxConcurrentReconciles bounds how many owners are reconciled at once. Default: 1.
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
		o.MaxConcurrentReconciles = 1
	}
	if o.OperatorVersion == "" {
		o.OperatorVersion = "dev"
	}
}
