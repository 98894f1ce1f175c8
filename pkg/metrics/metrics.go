package metrics

import (
	"slices"
	"sync"
	"time"

	"github.com/pkg/errors"
	"github.com/prometheus/client_golang/prometheus"
)

// Namespace prefixes every metric name.
const Namespace = "kdag"

// Label names.
const (
	LabelController = "controller"
	LabelKind       = "kind"
	LabelAction     = "action"
	LabelOutcome    = "outcome"
)

// The action and outcome label values are the Controller's own names: its Action values
// (created, applied, skipped, adopted, refused, held, reported) and node states (Ready, Waiting, Failed, Blocked,
// Canceled); this package takes them as strings so that it does not depend on the Controller.

var (
	// graphRunBuckets go up to a minute: a graph run includes every node's apply.
	graphRunBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}
	// nodeBuckets go down to a millisecond: a skipped node costs a hash, an applied one a request.
	nodeBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}
)

// Metrics records kdag's metrics. Its methods are safe for concurrent use, and do nothing on a nil
// *Metrics, so that code can take an optional one.
type Metrics struct {
	graphRunDuration *prometheus.HistogramVec
	nodeDuration     *prometheus.HistogramVec
	nodes            *prometheus.CounterVec
	driftRepairs     *prometheus.CounterVec
	driftReports     *prometheus.CounterVec
	pruneDeletions   *prometheus.CounterVec
	nodePanics       *prometheus.CounterVec
	ownersUnserved   *prometheus.GaugeVec
	waiting          *waitingCollector
}

// Register creates kdag's metrics and registers them with reg, normally controller-runtime's
// process-wide registry (sigs.k8s.io/controller-runtime/pkg/metrics.Registry), which the manager
// serves on its metrics endpoint. Registering again with the same registry does not panic: the
// result records into the collectors registered first, so every *Metrics of a registry shares
// counts, histograms and the waiting map. It panics only when another collector already uses one of
// kdag's names with other labels, a programming error; New returns that as an error instead.
func Register(reg prometheus.Registerer) *Metrics {
	m, err := New(reg)
	if err != nil {
		panic(err)
	}
	return m
}

// New is Register returning the error instead of panicking. A nil reg registers nothing: the
// metrics are recorded but never exposed (for tests and for operators without metrics).
func New(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		graphRunDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: Namespace,
			Name:      "graph_run_duration_seconds",
			Help:      "Duration of one run of an owner's resource graph, from the first node to the last.",
			Buckets:   graphRunBuckets,
		}, []string{LabelController}),
		nodeDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: Namespace,
			Name:      "node_duration_seconds",
			Help:      "Duration of the work on one node of the graph (build, compare, apply or prune), waiting for dependencies excluded.",
			Buckets:   nodeBuckets,
		}, []string{LabelController, LabelKind, LabelAction}),
		nodes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace,
			Name:      "nodes_total",
			Help:      "Graph nodes processed, by action (created, applied, skipped, adopted, refused, held, reported) and outcome (Ready, Waiting, Failed).",
		}, []string{LabelController, LabelAction, LabelOutcome}),
		driftRepairs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace,
			Name:      "drift_repairs_total",
			Help:      "Objects re-applied because someone else changed fields kdag manages.",
		}, []string{LabelController, LabelKind}),
		driftReports: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace,
			Name:      "drift_reports_total",
			Help:      "Objects found changed by someone else in fields kdag manages and left as they are (drift policy report), once per new set of fields.",
		}, []string{LabelController, LabelKind}),
		pruneDeletions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace,
			Name:      "prune_deletions_total",
			Help:      "Objects deleted because they left the desired graph.",
		}, []string{LabelController, LabelKind}),
		nodePanics: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace,
			Name:      "node_panics_total",
			Help:      "Panics recovered while processing a graph node.",
		}, []string{LabelController}),
		ownersUnserved: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: Namespace,
			Name:      "owners_unserved",
			Help:      "Owners whose kdag.dev/shard label names a shard that no running manager serves (no live leader election or member Lease), by kind.",
		}, []string{LabelKind}),
		waiting: newWaitingCollector(),
	}
	if reg == nil {
		return m, nil
	}

	var err error
	if m.graphRunDuration, err = register(reg, m.graphRunDuration); err != nil {
		return nil, err
	}
	if m.nodeDuration, err = register(reg, m.nodeDuration); err != nil {
		return nil, err
	}
	if m.nodes, err = register(reg, m.nodes); err != nil {
		return nil, err
	}
	if m.driftRepairs, err = register(reg, m.driftRepairs); err != nil {
		return nil, err
	}
	if m.driftReports, err = register(reg, m.driftReports); err != nil {
		return nil, err
	}
	if m.pruneDeletions, err = register(reg, m.pruneDeletions); err != nil {
		return nil, err
	}
	if m.nodePanics, err = register(reg, m.nodePanics); err != nil {
		return nil, err
	}
	if m.ownersUnserved, err = register(reg, m.ownersUnserved); err != nil {
		return nil, err
	}
	if m.waiting, err = register(reg, m.waiting); err != nil {
		return nil, err
	}
	return m, nil
}

// register registers c, or returns the collector of the same type already registered for the
// same descriptors.
func register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	err := reg.Register(c)
	if err == nil {
		return c, nil
	}
	var already prometheus.AlreadyRegisteredError
	if errors.As(err, &already) {
		if existing, ok := already.ExistingCollector.(C); ok {
			return existing, nil
		}
		return c, errors.Errorf("registering kdag metrics: a collector of type %T is already registered in their place", already.ExistingCollector)
	}
	return c, errors.Wrap(err, "registering kdag metrics")
}

// ObserveGraphRun records the duration of one graph run of controller.
func (m *Metrics) ObserveGraphRun(controller string, d time.Duration) {
	if m == nil {
		return
	}
	m.graphRunDuration.WithLabelValues(controller).Observe(d.Seconds())
}

// ObserveNode counts one processed node and records how long its work took.
func (m *Metrics) ObserveNode(controller, kind, action, outcome string, d time.Duration) {
	if m == nil {
		return
	}
	m.nodeDuration.WithLabelValues(controller, kind, action).Observe(d.Seconds())
	m.nodes.WithLabelValues(controller, action, outcome).Inc()
}

// DriftRepaired counts an object of kind re-applied because of drift.
func (m *Metrics) DriftRepaired(controller, kind string) {
	if m == nil {
		return
	}
	m.driftRepairs.WithLabelValues(controller, kind).Inc()
}

// DriftReported counts an object of kind found drifted and left as it is because its drift
// policy is report; call it once per new set of drifted fields, not per reconcile.
func (m *Metrics) DriftReported(controller, kind string) {
	if m == nil {
		return
	}
	m.driftReports.WithLabelValues(controller, kind).Inc()
}

// Pruned counts an object of kind deleted by pruning.
func (m *Metrics) Pruned(controller, kind string) {
	if m == nil {
		return
	}
	m.pruneDeletions.WithLabelValues(controller, kind).Inc()
}

// NodePanicked counts a panic recovered while processing a node.
func (m *Metrics) NodePanicked(controller string) {
	if m == nil {
		return
	}
	m.nodePanics.WithLabelValues(controller).Inc()
}

// SetOwnersUnserved records that n owners of kind are labelled with a shard that no running
// manager serves (package shard's Unserved counts them).
func (m *Metrics) SetOwnersUnserved(kind string, n int) {
	if m == nil {
		return
	}
	m.ownersUnserved.WithLabelValues(kind).Set(float64(n))
}

// SetWaiting records that n nodes of owner's graph wait for readiness after its last run (a
// negative n counts as 0). kdag_nodes_waiting{controller} is the sum over the controller's owners:
// a series per owner would grow with the number of owners and outlive deleted ones.
func (m *Metrics) SetWaiting(controller, owner string, n int) {
	if m == nil {
		return
	}
	m.waiting.set(controller, owner, n)
}

// ForgetOwner drops owner's waiting nodes from the controller's sum; call it when the owner is
// deleted (or no longer managed), or its last SetWaiting would count forever.
func (m *Metrics) ForgetOwner(controller, owner string) {
	if m == nil {
		return
	}
	m.waiting.forget(controller, owner)
}

// waitingCollector exposes kdag_nodes_waiting. It is a collector of its own rather than a GaugeVec
// so that the per-owner numbers live in the registered collector: a second Register on the same
// registry shares them instead of overwriting the first one's sums.
type waitingCollector struct {
	desc *prometheus.Desc

	mu     sync.Mutex
	owners map[string]map[string]int // controller -> owner -> waiting nodes
	sums   map[string]int            // controller -> sum over owners
}

func newWaitingCollector() *waitingCollector {
	return &waitingCollector{
		desc: prometheus.NewDesc(
			prometheus.BuildFQName(Namespace, "", "nodes_waiting"),
			"Graph nodes waiting for readiness, summed over the controller's owners.",
			[]string{LabelController}, nil),
		owners: map[string]map[string]int{},
		sums:   map[string]int{},
	}
}

func (c *waitingCollector) set(controller, owner string, n int) {
	n = max(n, 0)
	c.mu.Lock()
	defer c.mu.Unlock()
	owners := c.owners[controller]
	if owners == nil {
		owners = map[string]int{}
		c.owners[controller] = owners
	}
	c.sums[controller] += n - owners[owner]
	if n == 0 {
		delete(owners, owner)
	} else {
		owners[owner] = n
	}
}

func (c *waitingCollector) forget(controller, owner string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	owners := c.owners[controller]
	if owners == nil {
		return
	}
	c.sums[controller] -= owners[owner]
	delete(owners, owner)
}

// Describe implements prometheus.Collector.
func (c *waitingCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.desc
}

// Collect implements prometheus.Collector. A controller that ever reported keeps its series, at 0
// when nothing waits.
func (c *waitingCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	controllers := make([]string, 0, len(c.sums))
	values := make(map[string]int, len(c.sums))
	for controller, sum := range c.sums {
		controllers = append(controllers, controller)
		values[controller] = sum
	}
	c.mu.Unlock()
	slices.Sort(controllers)
	for _, controller := range controllers {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(values[controller]), controller)
	}
}
