package reconciler

import (
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/kdag-dev/kdag/pkg/metrics"
	"github.com/kdag-dev/kdag/pkg/resources"
)

// Options are one reconciler's settings, merged: controller.Options, whose fields document them,
// converted once at registration. Defaults sets what is left zero.
type Options struct {
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
	ReadyWhen               []KindReadiness
	OwnerFilter             func(owner client.Object) bool
	Wrappers                []Wrapper
	NamespacedReferences    bool
	// Deletions is shared by the reconcilers of one Setup; nil: the reconciler's own.
	Deletions *Deletions
}

// KindReadiness is controller.KindReadiness: the readiness rule of every node of Kind's type.
type KindReadiness struct {
	Kind  client.Object
	Ready resources.ReadyFunc
}

// Wrapper is controller.ReconcilerWrapper: it wraps the reconcile.Reconciler of the reconciler
// named name, whose owners are of owner's type.
type Wrapper func(name string, owner client.Object, next reconcile.Reconciler) reconcile.Reconciler

// DefaultMaxParallelNodes is how many nodes of one graph a reconciler applies at once by default.
// A layer waits for its slowest node, so a layer wider than the bound takes two waves, which
// BenchmarkConverge_Parallel measures against the raw floor that applies a whole layer at once
// (docs/benchmarks.md, sections 1c and "Many cores"). 64 lets every layer of the reference
// operators and of that benchmark go in one wave, while the API server still decides:
// with the default 4 concurrent reconciles a reconciler has at most 256 writes in flight, about
// the seats API Priority and Fairness gives the workload-low level (where a service account's
// requests go) on a default kube-apiserver (600 seats × 100 of 245 shares); beyond its seats
// the server queues requests fairly, answering 429 only when its queues are full. A node whose
// blockers are not done takes no slot, so the bound costs a narrow graph nothing.
const DefaultMaxParallelNodes = 64

// Defaults sets the fields left zero to their defaults for the reconciler named name: the field
// manager "kdag-<name>", DefaultMaxParallelNodes, 4 concurrent reconciles, operator version
// "dev", a record of deletions of its own.
func (o *Options) Defaults(name string) {
	if o.FieldManager == "" {
		o.FieldManager = "kdag-" + name
	}
	if o.MaxParallelNodes == 0 {
		o.MaxParallelNodes = DefaultMaxParallelNodes
	}
	if o.MaxConcurrentReconciles == 0 {
		o.MaxConcurrentReconciles = 4
	}
	if o.OperatorVersion == "" {
		o.OperatorVersion = "dev"
	}
	if o.Deletions == nil {
		o.Deletions = NewDeletions()
	}
}
