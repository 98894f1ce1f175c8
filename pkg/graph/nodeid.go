package graph

// NodeID identifies a node of a kdag owner's graph: the object's group, kind, namespace and name.
// It is comparable and stable across reconciles (the version is left out: it names the same
// object). Graph[NodeID] is the graph a reconcile runs.
type NodeID struct {
	Group, Kind, Namespace, Name string
}

// String returns "Kind namespace/name", or "Kind name" for cluster-scoped objects.
func (id NodeID) String() string {
	if id.Namespace == "" {
		return id.Kind + " " + id.Name
	}
	return id.Kind + " " + id.Namespace + "/" + id.Name
}
