package graph

import (
	"fmt"

	"github.com/pkg/errors"
)

// Sentinel errors. Match them with errors.Is; the typed errors below carry the
// node IDs involved.
var (
	// ErrDuplicateID means AddNode was given an ID the graph already holds.
	ErrDuplicateID = errors.New("duplicate node ID")
	// ErrUnknownBlocker means AddNode was given a blocker that is not in the
	// graph yet. Blockers must be added before the nodes they block, which
	// also rules out cycles and self-blocking.
	ErrUnknownBlocker = errors.New("unknown blocker")
	// ErrNilFunc means AddNode was given a nil work function.
	ErrNilFunc = errors.New("nil node function")
	// ErrPanic matches every *PanicError: a node's function panicked.
	ErrPanic = errors.New("node panicked")
	// ErrGoexit means a node's function called runtime.Goexit (for example
	// through testing.T.FailNow) instead of returning.
	ErrGoexit = errors.New("node called runtime.Goexit")
	// ErrResultMismatch means a Result given to a renderer does not come
	// from a run of the graph being rendered.
	ErrResultMismatch = errors.New("result does not match the graph")
)

// BuildError is returned by AddNode. Err is ErrDuplicateID, ErrUnknownBlocker
// or ErrNilFunc, so errors.Is works with those sentinels; errors.As gives the
// IDs.
type BuildError[ID comparable] struct {
	// Node is the ID passed to AddNode.
	Node ID
	// Blocker is the unknown blocker; set only when Err is ErrUnknownBlocker.
	Blocker ID
	// Err is the sentinel naming the problem.
	Err error
}

// Error returns e.g. "graph: add node web: unknown blocker db".
func (e *BuildError[ID]) Error() string {
	if errors.Is(e.Err, ErrUnknownBlocker) {
		return fmt.Sprintf("graph: add node %v: %v %v", e.Node, e.Err, e.Blocker)
	}
	return fmt.Sprintf("graph: add node %v: %v", e.Node, e.Err)
}

// Unwrap returns the sentinel.
func (e *BuildError[ID]) Unwrap() error { return e.Err }

// NodeError is how Run reports a failed node: the node's ID and the error its
// function returned (or a *PanicError, or ErrGoexit).
type NodeError[ID comparable] struct {
	ID  ID
	Err error
}

// Error returns "node <id>: <error>".
func (e *NodeError[ID]) Error() string { return fmt.Sprintf("node %v: %v", e.ID, e.Err) }

// Unwrap returns the node's error.
func (e *NodeError[ID]) Unwrap() error { return e.Err }

// Format supports %+v, which formats the wrapped error with %+v too (stack
// traces of github.com/pkg/errors errors and of panics).
func (e *NodeError[ID]) Format(s fmt.State, verb rune) {
	if verb == 'v' && s.Flag('+') {
		fmt.Fprintf(s, "node %v: %+v", e.ID, e.Err)
		return
	}
	fmt.Fprint(s, e.Error())
}

// PanicError is the error of a node whose function panicked. It matches
// ErrPanic with errors.Is; if the panic value is an error, Unwrap returns it.
type PanicError struct {
	// Value is the value passed to panic.
	Value any
	// Stack is the stack of the panicking goroutine (runtime/debug.Stack).
	Stack []byte
}

// Error returns "node panicked: <value>", without the stack; format with %+v
// to get the stack too.
func (e *PanicError) Error() string { return fmt.Sprintf("%v: %v", ErrPanic, e.Value) }

// Is reports whether target is ErrPanic.
func (e *PanicError) Is(target error) bool { return target == ErrPanic }

// Unwrap returns the panic value if it is an error, else nil.
func (e *PanicError) Unwrap() error {
	err, _ := e.Value.(error)
	return err
}

// Format supports %+v, which appends the stack.
func (e *PanicError) Format(s fmt.State, verb rune) {
	fmt.Fprint(s, e.Error())
	if verb == 'v' && s.Flag('+') {
		fmt.Fprintf(s, "\n%s", e.Stack)
	}
}
