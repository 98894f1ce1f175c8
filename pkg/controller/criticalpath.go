package controller

import (
	"context"
	"slices"
	"time"

	"go.opentelemetry.io/otel/trace"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
)

// criticalPath returns the indices in r.nodes of the chain of nodes that set the graph run's wall
// time, first to last: the node that ended last, then, going back, the blocker of each that ended
// last, down to a node none of whose blockers ran. Nil when no node ran.
func (r *outcome) criticalPath() []int {
	last := -1
	for i := range r.nodes {
		if n := &r.nodes[i]; n.ended > 0 && (last < 0 || n.ended > r.nodes[last].ended) {
			last = i
		}
	}
	if last < 0 {
		return nil
	}
	path := []int{last}
	for cur := last; ; {
		s := r.nodes[cur].spec
		if s == nil {
			break
		}
		next := -1
		for _, b := range s.blockers {
			if b.index < 0 || b.index >= len(r.nodes) {
				continue
			}
			if e := r.nodes[b.index].ended; e > 0 && (next < 0 || e > r.nodes[next].ended) {
				next = b.index
			}
		}
		if next < 0 {
			break
		}
		path = append(path, next)
		cur = next
	}
	slices.Reverse(path)
	return path
}

// reconcileSummary is the status' LastReconcile for r: the trace ID of ctx's span and the
// critical path with each node's wait for a worker and run time.
func (r *outcome) reconcileSummary(ctx context.Context) *kdagv1alpha1.ReconcileSummary {
	path := r.criticalPath()
	sum := &kdagv1alpha1.ReconcileSummary{}
	if sc := trace.SpanContextFromContext(ctx); sc.HasTraceID() {
		sum.TraceID = sc.TraceID().String()
	}
	if len(path) > kdagv1alpha1.MaxCriticalPath {
		path = path[len(path)-kdagv1alpha1.MaxCriticalPath:]
	}
	for _, i := range path {
		n := &r.nodes[i]
		sum.CriticalPath = append(sum.CriticalPath, kdagv1alpha1.PathNode{
			Group: n.spec.id.Group, Kind: n.spec.id.Kind, Namespace: n.spec.id.Namespace, Name: n.spec.id.Name,
			State:      n.state.api(),
			WaitMillis: (n.started - n.wait).Milliseconds(),
			RunMillis:  (n.ended - n.started).Milliseconds(),
		})
		sum.DurationMillis = max(sum.DurationMillis, n.ended.Milliseconds())
	}
	return sum
}

// waitingFor returns the node that holds Ready back: the first node of the critical path that is
// not ready, or else the first waiting or failed node in graph order, or else the first blocked
// one; nil when every node is ready. Since is kept from old when it names the same node, else now.
func (r *outcome) waitingFor(old *kdagv1alpha1.WaitingFor, now time.Time) *kdagv1alpha1.WaitingFor {
	pick := -1
	for _, i := range r.criticalPath() {
		if r.nodes[i].state != stateReady {
			pick = i
			break
		}
	}
	for _, want := range []nodeState{stateWaiting, stateFailed, stateBlocked, stateCanceled} {
		for i := 0; pick < 0 && i < len(r.nodes); i++ {
			if r.nodes[i].state == want && r.nodes[i].spec != nil {
				pick = i
			}
		}
	}
	if pick < 0 || r.nodes[pick].spec == nil {
		return nil
	}
	id := r.nodes[pick].spec.id
	w := &kdagv1alpha1.WaitingFor{
		Group: id.Group, Kind: id.Kind, Namespace: id.Namespace, Name: id.Name,
		State: r.nodes[pick].state.api(), Since: metav1.NewTime(now.Truncate(time.Second)),
	}
	if old != nil && old.Group == w.Group && old.Kind == w.Kind && old.Namespace == w.Namespace && old.Name == w.Name {
		w.Since = old.Since
	}
	return w
}
