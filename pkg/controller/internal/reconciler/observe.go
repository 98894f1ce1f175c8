package reconciler

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kdag-dev/kdag/pkg/apply"
	"github.com/kdag-dev/kdag/pkg/graph"
	"github.com/kdag-dev/kdag/pkg/tracing"
)

// Span names and attribute keys of a reconcile's trace: one "reconcile" span per request with
// "build graph", "run graph" (one "node" span per node, linked to its blockers' spans, with
// "apply" and "readiness" children) and "prune" under it. Attributes carry kinds, names,
// actions and outcomes, never object content.
const (
	SpanReconcile  = "reconcile"
	SpanBuildGraph = "build graph"
	SpanRunGraph   = "run graph"
	SpanNode       = "node"
	SpanApply      = "apply"
	spanReadiness  = "readiness"
	spanPrune      = "prune"

	attrController = attribute.Key("kdag.controller")
	attrGVK        = attribute.Key("k8s.gvk")
	attrNamespace  = attribute.Key("k8s.namespace.name")
	AttrName       = attribute.Key("k8s.object.name")
	attrGeneration = attribute.Key("k8s.object.generation")
	AttrAction     = attribute.Key("kdag.node.action")
	AttrOutcome    = attribute.Key("kdag.node.outcome")
	attrWaitMillis = attribute.Key("kdag.node.wait_ms")
	AttrBlockedBy  = attribute.Key("kdag.node.blocked_by")
	attrNodes      = attribute.Key("kdag.graph.nodes")
)

// startSpan starts a span of kdag's tracer (a no-op while tracing is off).
func startSpan(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	return tracing.Tracer().Start(ctx, name, opts...)
}

// startReconcileSpan starts the root span of a reconcile, linked to the reconcile that last
// wrote the owner when the owner carries its trace context (a child custom resource).
func (c *Reconciler) startReconcileSpan(ctx context.Context, owner client.Object) (context.Context, trace.Span) {
	opts := []trace.SpanStartOption{trace.WithAttributes(
		attrController.String(c.name),
		attrGVK.String(c.ownerGVK.String()),
		attrNamespace.String(owner.GetNamespace()),
		AttrName.String(owner.GetName()),
		attrGeneration.Int64(owner.GetGeneration()),
	)}
	if link, ok := tracing.LinkFromAnnotations(owner.GetAnnotations()); ok {
		opts = append(opts, trace.WithLinks(link))
	}
	return startSpan(ctx, SpanReconcile, opts...)
}

// startNodeSpan starts a node's span, linked to the spans of its blockers (finished before it).
func startNodeSpan(ctx context.Context, s *nodeSpec, results []nodeResult, runStart time.Time) (context.Context, trace.Span) {
	links := make([]trace.Link, 0, len(s.blockers))
	for _, b := range s.blockers {
		if sc := results[b.index].spanContext; sc.IsValid() {
			links = append(links, trace.Link{SpanContext: sc})
		}
	}
	return startSpan(ctx, SpanNode, trace.WithLinks(links...), trace.WithAttributes(
		attrGVK.String(s.gvk.String()),
		attrNamespace.String(s.id.Namespace),
		AttrName.String(s.id.Name),
		attrWaitMillis.Int64(time.Since(runStart).Milliseconds()),
	))
}

// recordSkippedNodeSpans gives the nodes that did not run (blocked or canceled) a zero-length
// span, so the trace shows the whole graph and why part of it did not run.
func recordSkippedNodeSpans(ctx context.Context, results []nodeResult, run *graph.Result[graph.NodeID]) {
	for i := range run.Nodes {
		n := &run.Nodes[i]
		if n.Ran() {
			continue
		}
		_, span := startSpan(ctx, SpanNode, trace.WithAttributes(
			attrGVK.String(results[i].spec.gvk.String()),
			attrNamespace.String(n.ID.Namespace),
			AttrName.String(n.ID.Name),
			AttrOutcome.String(string(results[i].state)),
			AttrBlockedBy.String(n.BlockedBy.String()),
		))
		span.End()
	}
}

// observeRun records the graph's metrics: run duration, per-node duration by action, nodes by
// action and outcome, drift repairs and reports, panics, and the nodes waiting for readiness.
func (c *Reconciler) observeRun(owner client.Object, r *outcome, d time.Duration) {
	c.metrics.ObserveGraphRun(c.name, d)
	for i := range r.nodes {
		n := &r.nodes[i]
		if n.action == "" {
			continue
		}
		c.metrics.ObserveNode(c.name, n.spec.id.Kind, string(n.action), string(n.state), n.duration)
		switch {
		case n.action == apply.Reported && !n.driftRepeat:
			c.metrics.DriftReported(c.name, n.spec.id.Kind)
		case n.action != apply.Reported && len(n.drifted) > 0:
			c.metrics.DriftRepaired(c.name, n.spec.id.Kind)
		}
		if n.err != nil && errorsIsPanic(n.err) {
			c.metrics.NodePanicked(c.name)
		}
	}
	for _, id := range r.prune.pruned {
		c.metrics.Pruned(c.name, id.Kind)
	}
	c.metrics.SetWaiting(c.name, ownerKey(owner), r.waiting)
}

func ownerKey(owner client.Object) string { return owner.GetNamespace() + "/" + owner.GetName() }
