package graph

import "time"

// Outcome is what happened to a node during a run. The values are lower-case
// words meant for logs, status conditions, span attributes and metric labels.
type Outcome string

const (
	// Succeeded means the node's function ran and returned nil.
	Succeeded Outcome = "succeeded"
	// Failed means the node's function ran and returned an error, panicked or
	// called runtime.Goexit.
	Failed Outcome = "failed"
	// Blocked means the node did not run because an ancestor failed.
	Blocked Outcome = "blocked"
	// Canceled means the node did not run because the run's context was done
	// first.
	Canceled Outcome = "canceled"
)

// Outcomes lists every outcome, in a fixed order.
func Outcomes() []Outcome { return []Outcome{Succeeded, Failed, Blocked, Canceled} }

// NodeResult is the record of one node in a run.
type NodeResult[ID comparable] struct {
	// ID is the node's ID.
	ID ID
	// Outcome is what happened to the node.
	Outcome Outcome
	// Err is the node's error: non-nil exactly when Outcome is Failed. It is
	// the error the function returned, a *PanicError, or ErrGoexit.
	Err error
	// BlockedBy is the failed ancestor that kept the node from running; set
	// only when Outcome is Blocked. When several ancestors failed, it is the
	// one reached through the first non-succeeded blocker in the order given
	// to AddNode.
	BlockedBy ID
	// Wait is the time from the run's start until the node became runnable
	// (its last blocker succeeded); zero for nodes without blockers and for
	// nodes that never became runnable.
	Wait time.Duration
	// Start and End bound the call of the node's function; both are zero
	// unless Outcome is Succeeded or Failed.
	Start, End time.Time
}

// Duration returns End - Start: how long the node's function ran.
func (r NodeResult[ID]) Duration() time.Duration { return r.End.Sub(r.Start) }

// Ran reports whether the node's function was called (Succeeded or Failed).
func (r NodeResult[ID]) Ran() bool { return r.Outcome == Succeeded || r.Outcome == Failed }

// Result is the record of one run of a graph.
type Result[ID comparable] struct {
	// Start and End bound the whole run.
	Start, End time.Time
	// Nodes holds one record per node, in the graph's insertion order.
	Nodes []NodeResult[ID]

	index map[ID]int32 // the graph's; read-only
}

// Node returns the record of node id, and false if id was not part of the
// run. It looks id up in the graph's index, so it must not be called
// concurrently with AddNode on the graph.
func (r *Result[ID]) Node(id ID) (NodeResult[ID], bool) {
	i, ok := r.index[id]
	if !ok || int(i) >= len(r.Nodes) {
		return NodeResult[ID]{}, false
	}
	return r.Nodes[i], true
}

// Count returns how many nodes ended with outcome o.
func (r *Result[ID]) Count(o Outcome) int {
	n := 0
	for i := range r.Nodes {
		if r.Nodes[i].Outcome == o {
			n++
		}
	}
	return n
}
