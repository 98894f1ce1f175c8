package graph

import (
	"strconv"
	"time"

	"github.com/pkg/errors"
)

// Outcome is what happened to a node during a run. Its String is a
// lower-case word ("succeeded", "failed", "blocked", "canceled") meant for
// logs, status conditions, span attributes and metric labels; text encodings
// (JSON, YAML, slog) use the same word. The zero value, which no node of a
// finished run has, is the empty word.
//
// Outcome records what the scheduler did with a node's function. kdag's
// controller turns it into a node's outcome for users, the API's NodeState
// (Ready, Waiting, Failed, Blocked, Canceled): a function that returned a
// "not ready yet" error is Failed here and Waiting there.
type Outcome uint8

const (
	// Succeeded means the node's function ran and returned nil.
	Succeeded Outcome = iota + 1
	// Failed means the node's function ran and returned an error, panicked or
	// called runtime.Goexit.
	Failed
	// Blocked means the node did not run because an ancestor failed.
	Blocked
	// Canceled means the node did not run because the run's context was done
	// first.
	Canceled
)

// outcomeNames holds the word of each outcome, at its value.
var outcomeNames = [...]string{Succeeded: "succeeded", Failed: "failed", Blocked: "blocked", Canceled: "canceled"}

// Outcomes lists every outcome, in a fixed order.
func Outcomes() []Outcome { return []Outcome{Succeeded, Failed, Blocked, Canceled} }

// String returns the outcome's lower-case word, e.g. "succeeded"; "" for the
// zero value, "Outcome(<n>)" for a value that is no outcome.
func (o Outcome) String() string {
	if int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return "Outcome(" + strconv.Itoa(int(o)) + ")"
}

// MarshalText returns the outcome's word, as String does. It fails for a
// value that is no outcome (other than the zero value).
func (o Outcome) MarshalText() ([]byte, error) {
	if int(o) >= len(outcomeNames) {
		return nil, errors.Errorf("graph: invalid outcome %d", uint8(o))
	}
	return []byte(outcomeNames[o]), nil
}

// UnmarshalText sets the outcome from its word, as returned by String. It
// fails for any other text.
func (o *Outcome) UnmarshalText(text []byte) error {
	for v, name := range outcomeNames {
		if name == string(text) {
			*o = Outcome(v)
			return nil
		}
	}
	return errors.Errorf("graph: unknown outcome %q", text)
}

// NodeResult is the record of one node in a run. Its times are offsets from
// the run's start (Result.Start), as read on the monotonic clock; Result.At
// turns one into a time.Time.
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
	// Start and End bound the call of the node's function, as offsets from
	// the run's start: Wait <= Start <= End. Both are zero unless the node
	// Ran.
	Start, End time.Duration
}

// Duration returns End - Start: how long the node's function ran; zero unless
// the node Ran.
func (r NodeResult[ID]) Duration() time.Duration { return r.End - r.Start }

// Ran reports whether the node's function was called (Succeeded or Failed).
func (r NodeResult[ID]) Ran() bool { return r.Outcome == Succeeded || r.Outcome == Failed }

// Result is the record of one run of a graph.
type Result[ID comparable] struct {
	// Start and End bound the whole run. Start carries a monotonic clock
	// reading, as time.Now does.
	Start, End time.Time
	// Nodes holds one record per node, in the graph's insertion order.
	Nodes []NodeResult[ID]

	g *Graph[ID] // for Node
}

// At returns the time at the given offset from the run's start, such as a
// node's Start or End: Start.Add(offset).
func (r *Result[ID]) At(offset time.Duration) time.Time { return r.Start.Add(offset) }

// Node returns the record of node id, and false if id was not part of the
// run. It looks id up in the graph's index, so it must not be called
// concurrently with AddNode on the graph.
func (r *Result[ID]) Node(id ID) (NodeResult[ID], bool) {
	if r.g == nil {
		return NodeResult[ID]{}, false
	}
	i, ok := r.g.index.lookup(r.g.ids, id)
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
