// Package metrics defines kdag's Prometheus metrics. Register them once with controller-runtime's
// registry, which the manager already serves on its metrics endpoint:
//
//	m := metrics.Register(ctrlmetrics.Registry) // sigs.k8s.io/controller-runtime/pkg/metrics
//
// The package holds no global state: the *Metrics value is passed to the code that records.
//
//	kdag_graph_run_duration_seconds{controller}             histogram
//	kdag_node_duration_seconds{controller,kind,action}      histogram
//	kdag_nodes_total{controller,action,outcome}             counter
//	kdag_drift_repairs_total{controller,kind}               counter
//	kdag_prune_deletions_total{controller,kind}             counter
//	kdag_node_panics_total{controller}                      counter
//	kdag_nodes_waiting{controller}                          gauge
//	kdag_owners_unserved{kind}                              gauge
//
// kdag_nodes_waiting has no owner label on purpose: a series per owner would grow with the number
// of owners and outlive deleted ones. SetWaiting keeps the number per owner inside the collector
// and exposes the sum per controller; ForgetOwner removes a deleted owner's share.
//
// No label takes an owner's name, and kind is a Kubernetes kind, so the number of series is bounded
// by controllers x kinds x actions x outcomes.
package metrics
