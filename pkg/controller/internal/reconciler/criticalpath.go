package reconciler

import (
	"context"
	"slices"
	"time"

	"go.opentelemetry.io/otel/trace"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/graph"
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
			State:      n.state,
			WaitMillis: (n.started - n.wait).Milliseconds(),
			RunMillis:  (n.ended - n.started).Milliseconds(),
		})
		sum.DurationMillis = max(sum.DurationMillis, n.ended.Milliseconds())
	}
	return sum
}

// waitingFor names the node the owner waits for, stable while the cluster does not change (so
// that it never causes a status write by itself): the node old names, while it is still not
// ready; else the first node in graph order that waits, then that failed, was blocked or was
// canceled; else the first object that left the graph and is still being deleted. Since is
// now (to the second) for a new pick, old's for the same one. Nil when nothing holds the owner
// back.
func (r *outcome) waitingFor(old *kdagv1alpha1.WaitingFor, now time.Time) *kdagv1alpha1.WaitingFor {
	pick := -1
	for i := 0; old != nil && i < len(r.nodes); i++ {
		if n := &r.nodes[i]; n.spec != nil && n.state != kdagv1alpha1.NodeReady && sameObject(old, n.spec.id) {
			pick = i
		}
	}
	for _, want := range []kdagv1alpha1.NodeState{kdagv1alpha1.NodeWaiting, kdagv1alpha1.NodeFailed, kdagv1alpha1.NodeBlocked, kdagv1alpha1.NodeCanceled} {
		for i := 0; pick < 0 && i < len(r.nodes); i++ {
			if r.nodes[i].state == want && r.nodes[i].spec != nil {
				pick = i
			}
		}
	}
	var id graph.NodeID
	state := kdagv1alpha1.NodeWaiting
	switch {
	case pick >= 0:
		id, state = r.nodes[pick].spec.id, r.nodes[pick].state
	case len(r.prune.terminating) > 0:
		id = r.prune.terminating[0].id
		for _, t := range r.prune.terminating {
			if old != nil && sameObject(old, t.id) {
				id = t.id
			}
		}
	default:
		return nil
	}
	w := &kdagv1alpha1.WaitingFor{
		Group: id.Group, Kind: id.Kind, Namespace: id.Namespace, Name: id.Name,
		State: state, Since: metav1.NewTime(now.Truncate(time.Second)),
	}
	if old != nil && sameObject(old, id) {
		w.Since = old.Since
	}
	return w
}

// sameObject reports whether w names the object id.
func sameObject(w *kdagv1alpha1.WaitingFor, id graph.NodeID) bool {
	return w.Group == id.Group && w.Kind == id.Kind && w.Namespace == id.Namespace && w.Name == id.Name
}
