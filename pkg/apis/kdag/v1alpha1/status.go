package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// NodeState is what a node of the owner's graph is doing, as shown in Status.Graph.
type NodeState string

// Node states.
const (
	// NodeReady: applied (or unchanged) and ready.
	NodeReady NodeState = "Ready"
	// NodeWaiting: applied, not ready yet; its dependents wait.
	NodeWaiting NodeState = "Waiting"
	// NodeFailed: the node's apply or readiness failed; see its message.
	NodeFailed NodeState = "Failed"
	// NodeBlocked: not applied because a blocker is not ready or failed.
	NodeBlocked NodeState = "Blocked"
	// NodeCanceled: not processed because the reconcile ended first.
	NodeCanceled NodeState = "Canceled"
)

// Status is kdag's part of an owner's status. Embed it inline in the owner's status struct:
//
//	type AppStatus struct {
//		api.Status `json:",inline"`
//	}
type Status struct {
	// ObservedGeneration is the owner's metadata.generation that the conditions describe.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions are Ready, Reconciling and Stalled.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// OperatorVersion is the version of the operator that wrote this status.
	// +optional
	OperatorVersion string `json:"operatorVersion,omitempty"`
	// Graph summarises the owner's graph from the last reconcile.
	// +optional
	Graph *GraphSummary `json:"graph,omitempty"`
	// WaitingFor names the node that holds Ready back and since when, while the owner is not
	// Ready; empty once it is.
	// +optional
	WaitingFor *WaitingFor `json:"waitingFor,omitempty"`
	// LastReconcile is the trace ID and critical path of the last reconcile that wrote this
	// status. It is written on every reconcile while the owner is not Ready; once it is Ready,
	// only together with a change of the rest of the status, so that timings never cause a write.
	// +optional
	LastReconcile *ReconcileSummary `json:"lastReconcile,omitempty"`
}

// WaitingFor is the node an owner that is not Ready waits for: the first node of the last
// reconcile's critical path that is not ready, or else the first such node in graph order.
type WaitingFor struct {
	// Group is the API group of the node's object; empty for the core group.
	// +optional
	Group string `json:"group,omitempty"`
	// Kind of the node's object.
	Kind string `json:"kind"`
	// Namespace of the node's object; empty for cluster-scoped objects.
	// +optional
	Namespace string `json:"namespace,omitempty"`
	// Name of the node's object.
	Name string `json:"name"`
	// State of the node: Waiting, Failed or Blocked.
	State NodeState `json:"state"`
	// Since is when the owner started waiting for this node (kept while it is the same node).
	Since metav1.Time `json:"since"`
}

// ReconcileSummary describes one reconcile.
type ReconcileSummary struct {
	// TraceID is the reconcile's OpenTelemetry trace ID (32 hex digits), empty when tracing is
	// off. Find the trace in Jaeger with it (kubectl kdag trace).
	// +optional
	TraceID string `json:"traceID,omitempty"`
	// DurationMillis is the wall time of the graph's run, in milliseconds.
	DurationMillis int64 `json:"durationMillis"`
	// CriticalPath is the chain of nodes that set the run's wall time, first to last: the node
	// that finished last, the blocker that released it last, and so on back to a node without
	// blockers. At most MaxCriticalPath nodes (the last ones).
	// +optional
	// +kubebuilder:validation:MaxItems=20
	CriticalPath []PathNode `json:"criticalPath,omitempty"`
}

// MaxCriticalPath caps ReconcileSummary.CriticalPath.
const MaxCriticalPath = 20

// PathNode is one node of a critical path with its times.
type PathNode struct {
	// Group is the API group of the node's object; empty for the core group.
	// +optional
	Group string `json:"group,omitempty"`
	// Kind of the node's object.
	Kind string `json:"kind"`
	// Namespace of the node's object; empty for cluster-scoped objects.
	// +optional
	Namespace string `json:"namespace,omitempty"`
	// Name of the node's object.
	Name string `json:"name"`
	// State of the node at the end of the reconcile.
	State NodeState `json:"state"`
	// WaitMillis is how long the node, its blockers done, waited for a worker, in milliseconds.
	// +optional
	WaitMillis int64 `json:"waitMillis,omitempty"`
	// RunMillis is how long the node's apply and readiness check took, in milliseconds.
	// +optional
	RunMillis int64 `json:"runMillis,omitempty"`
}

// GraphSummary counts the owner's nodes by state and lists the nodes that are not ready, capped.
type GraphSummary struct {
	// Total is the number of nodes in the graph.
	Total int32 `json:"total"`
	// Ready is the number of nodes that are applied and ready.
	Ready int32 `json:"ready"`
	// Waiting, Failed, Blocked and Canceled count the other nodes.
	// +optional
	Waiting int32 `json:"waiting,omitempty"`
	// +optional
	Failed int32 `json:"failed,omitempty"`
	// +optional
	Blocked int32 `json:"blocked,omitempty"`
	// +optional
	Canceled int32 `json:"canceled,omitempty"`
	// NotReady lists failed nodes first, then waiting and blocked ones, in graph order, at most
	// MaxNotReady of them.
	// +optional
	// +kubebuilder:validation:MaxItems=20
	NotReady []NodeStatus `json:"notReady,omitempty"`
	// Nodes lists every node of the graph in graph order with its state and blockers, for tools
	// that draw the graph (kubectl kdag tree). It holds at most MaxGraphNodes nodes: a larger
	// graph leaves it empty and sets Truncated; the counts and NotReady still tell its state.
	// +optional
	// +kubebuilder:validation:MaxItems=100
	Nodes []GraphNode `json:"nodes,omitempty"`
	// Truncated is true when the graph has more than MaxGraphNodes nodes, so Nodes is empty.
	// +optional
	Truncated bool `json:"truncated,omitempty"`
}

// MaxNotReady caps GraphSummary.NotReady so a large broken graph cannot bloat the owner.
const MaxNotReady = 20

// MaxGraphNodes caps GraphSummary.Nodes: a graph with more nodes is not listed at all.
const MaxGraphNodes = 100

// GraphNode is one node of the owner's graph as GraphSummary.Nodes lists it. It carries no
// message, so it changes only when the node's state does; NotReady says why a node is not ready.
type GraphNode struct {
	// Group is the API group of the node's object; empty for the core group.
	// +optional
	Group string `json:"group,omitempty"`
	// Kind of the node's object.
	Kind string `json:"kind"`
	// Namespace of the node's object; empty for cluster-scoped objects.
	// +optional
	Namespace string `json:"namespace,omitempty"`
	// Name of the node's object.
	Name string `json:"name"`
	// State of the node.
	State NodeState `json:"state"`
	// Blockers are the indices in Nodes of the nodes this one waits for; each is smaller than
	// this node's own index, in the list format of NodeIndices: "0-49", "2,5".
	// +optional
	Blockers NodeIndices `json:"blockerIndices,omitempty"`
	// Inferred are the Blockers that kdag inferred from the node's references to other nodes (a
	// pod template mounting a ConfigMap) rather than the operator declaring them; a
	// subset of Blockers, in their order, in the same format.
	// +optional
	Inferred NodeIndices `json:"inferredIndices,omitempty"`
	// DeprecatedBlockers is Blockers as earlier kdag versions wrote it: a list of integers.
	// Deprecated: never written now. It stays in the schema because the API server refuses a
	// server-side apply that names a field the schema lacks: an operator built on an older kdag
	// keeps writing its status while its CRDs are already upgraded. Readers use it when Blockers
	// is empty.
	// +optional
	DeprecatedBlockers []int32 `json:"blockers,omitempty"`
	// DeprecatedInferred is Inferred as earlier kdag versions wrote it. Deprecated: as
	// DeprecatedBlockers.
	// +optional
	DeprecatedInferred []int32 `json:"inferred,omitempty"`
}

// NodeStatus identifies one node and says why it is not ready.
type NodeStatus struct {
	// Kind of the node's object.
	Kind string `json:"kind"`
	// Namespace of the node's object; empty for cluster-scoped objects.
	// +optional
	Namespace string `json:"namespace,omitempty"`
	// Name of the node's object.
	Name string `json:"name"`
	// State of the node.
	State NodeState `json:"state"`
	// Message says why the node is not ready: the error, what it waits for, or the blocker.
	// +optional
	Message string `json:"message,omitempty"`
}
