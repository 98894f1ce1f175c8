// Package reconciler is kdag's loop, under the authoring package pkg/controller, which wraps it:
// the reconcile of one owner (controller.go), the graph it builds (graph.go, infer.go), each
// node's run (node.go, memo.go, ownership.go), the owner's status and events (status.go,
// criticalpath.go, result.go), prune (prune.go), teardown and its BeforeDelete hooks
// (teardown.go, hook.go), revisions (revision.go) and the trace (observe.go).
//
// Its exported names are for pkg/controller: Register, Builder and its Options, Manager, Report.
// inspect.go lets kdag's own tests look inside a Reconciler.
package reconciler
