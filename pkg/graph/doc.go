// Package graph is the DAG scheduler of kdag: per reconcile request the
// controller builds a graph of nodes (one per Kubernetes object to apply) and
// runs each node as soon as its blockers are done, independent branches
// concurrently.
//
// # Main types
//
//   - Graph[ID] holds the nodes: an ID (any comparable type), a work Func and
//     blockers, in insertion order. AddNode only accepts blockers that are
//     already in the graph, so a Graph is acyclic by construction. IDs,
//     Blockers and Dependents expose the structure read-only.
//   - Graph.Run runs the graph and returns a Result: start and end of the run
//     and a NodeResult per node (Outcome, Err, BlockedBy, Wait, Start, End;
//     times are offsets from the run's start, Result.At makes them absolute),
//     in insertion order and by ID, for status, tracing and metrics.
//   - Outcome is one of Succeeded, Failed, Blocked or Canceled; its String
//     (and text encoding) is the lower-case word, e.g. "succeeded".
//   - BuildError, NodeError and PanicError carry node IDs and match the
//     sentinels ErrDuplicateID, ErrUnknownBlocker, ErrNilFunc and ErrPanic
//     with errors.Is.
//   - WriteDOT and WriteMermaid render the graph, with outcomes if a Result
//     is given.
//
// # Usage
//
// New, then AddNode for each node with its blockers, then Run; the package's Example (in
// example_test.go, compiled and run by go test) builds and runs a five-node graph where one
// failure blocks only its dependents.
//
// # Rules
//
//   - A node runs at most once, and only after all its blockers succeeded.
//     It becomes runnable the moment its last blocker succeeds; nothing
//     polls.
//   - MaxParallel bounds the nodes running at once; a node waiting for its
//     blockers holds no slot. Unbounded, every runnable node runs at once.
//   - Nodes run on worker goroutines, at most MaxParallel, which multiply
//     while nodes block and stay about one per processor while nodes return
//     quickly. A worker goes straight on to the first node (in insertion
//     order) that its own node made runnable; the others wait in queues,
//     first in, first out, one queue per processor (GOMAXPROCS, at most
//     MaxParallel). A worker whose queue is empty takes half of another's.
//     So a chain runs on one goroutine, and with MaxParallel 1 the nodes run
//     depth first: a node's first dependent runs before the nodes queued
//     earlier.
//   - Building and running allocate a few slices per graph, not per node,
//     plus a small struct, a channel and a goroutine per worker started.
//   - A failed node (error, panic or runtime.Goexit) blocks its descendants,
//     which are reported Blocked with the ID of the failed ancestor; all
//     other nodes still run. Run returns every failure, joined.
//   - Once the context is done no node starts; the nodes not started are
//     reported Canceled, and Run returns after the running ones return. Run
//     leaves no goroutine behind.
//   - Errors are wrapped with github.com/pkg/errors and support errors.Is and
//     errors.As.
package graph
