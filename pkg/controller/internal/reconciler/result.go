package reconciler

import (
	"strings"
	"time"

	"github.com/pkg/errors"
	"go.opentelemetry.io/otel/trace"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/apply"
	"github.com/kdag-dev/kdag/pkg/resources"
)

// nodeResult is what happened to one node; written only by the node's own work function.
type nodeResult struct {
	spec        *nodeSpec
	state       kdagv1alpha1.NodeState // what the node did; set for every node by runGraph
	action      apply.Action
	drifted     []string // fields another writer changed: repaired by this apply, or reported (action Reported)
	driftRepeat bool     // action Reported: the same fields were reported before (apply.Entry.Repeat)
	// wantsFinalizer: a user keeps the node's object, whose owner reference kdag drops only once
	// the owner holds kdag's finalizer (added after the run, then the owner is requeued).
	wantsFinalizer bool
	message        string // why the node is not ready
	err            error
	contentHash    string            // what dependents consume; set when the node succeeded
	live           client.Object     // the object after apply (unstructured), or from the cache (typed; read-only)
	before         client.Object     // the object the cache held before the node ran (read-only; nil: none), for the revision
	spanContext    trace.SpanContext // the node's span, linked from its dependents' spans
	wait           time.Duration
	duration       time.Duration
	// started, ended: offsets from the graph run's start (graph.NodeResult's Start and End, as
	// wait is its Wait); zero unless the node ran.
	started, ended time.Duration
	detail         string // what a waiting node waits for, when known (waitingError.detail)
	// pending: the node's object is usable, so its dependents ran, but a change of it waits for
	// the cluster (apply.Entry.Pending: a claim that grows once it is bound). The owner is not
	// Ready: summarize counts the node as waiting.
	pending string
	// retryAfter: the node waits for something no watch reports; the owner is requeued then
	// (waitingError.retryAfter).
	retryAfter time.Duration
}

// waitingError is returned by a node whose object is applied but not ready: its dependents do
// not run, and the reconcile ends without error (the object's watch resumes it). detail, when
// set, says what the object waits for, for the owner's conditions; retryAfter, when set, is when
// the owner is reconciled again, for a wait that no watch event ends (apply.Entry.RetryAfter).
type waitingError struct {
	msg, detail string
	retryAfter  time.Duration
}

func (e *waitingError) Error() string { return e.msg }

// outcome is the result of one reconcile, from which status, events and the return value come.
type outcome struct {
	start     time.Time
	nodes     []nodeResult
	prune     pruneResult
	terminal  error  // Stalled: only a change of the owner helps
	transient error  // retried with backoff
	reason    string // reason of the terminal or transient error
	// conflict is the first node held by the drift budget; the owner is requeued after
	// requeueAfter, the earliest end of a pause.
	conflict     *apply.DriftConflictError
	requeueAfter time.Duration
	// recheck: the owner is Stalled on something outside its spec that no watch reports (a
	// StorageClass that does not allow volume expansion); Reconcile returns no error, so that
	// requeueAfter (stalledRecheck) brings it back.
	recheck bool

	ready, waiting, failed, blocked, canceled int
}

func (r *outcome) summarize() {
	for i := range r.nodes {
		n := &r.nodes[i]
		if n.state == kdagv1alpha1.NodeReady && n.pending != "" {
			n.state, n.detail = kdagv1alpha1.NodeWaiting, n.pending
			n.message = n.spec.id.String() + ": " + n.pending
		}
		switch n.state {
		case kdagv1alpha1.NodeReady:
			r.ready++
		case kdagv1alpha1.NodeWaiting:
			r.waiting++
			r.requeueAt(n.retryAfter)
		case kdagv1alpha1.NodeFailed:
			r.failed++
			var conflict *apply.DriftConflictError
			if errors.As(n.err, &conflict) {
				if r.conflict == nil {
					r.conflict = conflict
				}
				r.requeueAt(conflict.RetryAfter)
				continue
			}
			var expansion *apply.VolumeExpansionError
			if errors.As(n.err, &expansion) {
				// Stalled, but no change of the owner can help (a claim never shrinks): an
				// administrator's change of the StorageClass, which no watch reports, does.
				if r.terminal == nil {
					r.terminal, r.reason = n.err, kdagv1alpha1.ReasonVolumeExpansionForbidden
				}
				r.recheck = true
				r.requeueAt(stalledRecheck)
				continue
			}
			if isTerminal(n.err) {
				if r.terminal == nil {
					r.terminal, r.reason = n.err, kdagv1alpha1.ReasonObjectInvalid
					var rs reasoned
					var stalled *resources.StalledError
					switch {
					case errors.As(n.err, &rs):
						r.reason = rs.conditionReason()
					case errors.As(n.err, &stalled): // a child's own reason
						r.reason = validReason(stalled.Reason, kdagv1alpha1.ReasonObjectInvalid)
					}
				}
			} else if r.transient == nil {
				r.transient, r.reason = n.err, kdagv1alpha1.ReasonNodeFailed
			}
		case kdagv1alpha1.NodeBlocked:
			r.blocked++
		case kdagv1alpha1.NodeCanceled:
			r.canceled++
		}
	}
}

// wantsFinalizer reports whether a node's object is kept by a user and keeps its owner reference
// until the owner holds kdag's finalizer.
func (r *outcome) wantsFinalizer() bool {
	for i := range r.nodes {
		if r.nodes[i].wantsFinalizer {
			return true
		}
	}
	return false
}

// recordPrune records what prune did. A failed deletion fails the reconcile (retried with
// backoff) and keeps the owner from Ready: an object the graph no longer wants is still there.
func (r *outcome) recordPrune(p pruneResult) {
	r.prune = p
	if p.err != nil && r.transient == nil {
		r.transient, r.reason = p.err, kdagv1alpha1.ReasonPruneFailed
	}
}

// stalledRecheck is how soon an owner Stalled on a cause outside its spec and outside kdag's
// watches (outcome.recheck) is reconciled again.
const stalledRecheck = 5 * time.Minute

// WaitingRecheck is how soon an owner that waits for a node's readiness (nothing failed) is
// reconciled again when no watch event brings it back first: from the cache, with no write
// unless its status changed.
const WaitingRecheck = 30 * time.Second

// requeueAt lowers r.requeueAfter to d when d is set and sooner.
func (r *outcome) requeueAt(d time.Duration) {
	if d > 0 && (r.requeueAfter == 0 || d < r.requeueAfter) {
		r.requeueAfter = d
	}
}

// allReady reports whether every node is ready, nothing failed, and nothing that left the
// graph still exists (prune found none still terminating).
func (r *outcome) allReady() bool {
	return r.terminal == nil && r.transient == nil && r.ready == len(r.nodes) && len(r.prune.terminating) == 0
}

// returnErr is what Reconcile returns: terminal errors are not retried, transient ones are.
func (r *outcome) returnErr() error {
	switch {
	case r.terminal != nil && r.recheck:
		return nil
	case r.terminal != nil:
		return reconcile.TerminalError(r.terminal)
	case r.transient != nil:
		return r.failureError()
	}
	return nil
}

// failureError joins the failed nodes' errors, each naming its node.
func (r *outcome) failureError() error {
	var msgs []string
	for i := range r.nodes {
		if r.nodes[i].state == kdagv1alpha1.NodeFailed {
			msgs = append(msgs, r.nodes[i].err.Error())
		}
	}
	if r.prune.err != nil {
		msgs = append(msgs, r.prune.err.Error())
	}
	if len(msgs) == 0 {
		return r.transient
	}
	return errors.New(strings.Join(msgs, "; "))
}
