package controller

import (
	"slices"

	"github.com/kdag-dev/kdag/pkg/graph"
	"github.com/kdag-dev/kdag/pkg/resources"
)

// Dependencies inferred from references. Objects already say much of what they need: a pod
// template that mounts a ConfigMap, reads a Secret or claims a volume, a RoleBinding that grants a
// Role, an Ingress that routes to a Service. When both objects are nodes of the same graph, the
// Graph adds the edge itself, once AddResources returned, and it behaves as a DependsOn edge:
// the dependent waits until the referenced node is applied and ready, and the referenced node's
// content feeds the dependent's dependencies hash, so a changed ConfigMap rolls the pods that
// mount it. What is read (resources.AppendReferences; typed objects only, an
// unstructured.Unstructured node is not read):
//
//   - the pod template of a Pod, Deployment, StatefulSet, DaemonSet, ReplicaSet, Job and
//     CronJob: volumes (configMap, secret, persistentVolumeClaim.claimName, and the configMap and
//     secret sources of projected volumes); env valueFrom configMapKeyRef and secretKeyRef and
//     envFrom configMapRef and secretRef of containers, init containers and ephemeral
//     containers; imagePullSecrets; serviceAccountName. All in the workload's namespace;
//   - a StatefulSet's serviceName (its governing Service);
//   - a RoleBinding's roleRef: its Role (same namespace) or ClusterRole; a ClusterRoleBinding's
//     ClusterRole;
//   - an Ingress's backend Services (defaultBackend and every path) and TLS Secrets (same
//     namespace).
//
// A reference to an object that is not a node of the graph adds nothing (kdag does not check that
// such objects exist: Graph.Reference does); a Graph.Reference node is a node and counts.
// Rules:
//
//   - a declared edge wins: when the dependent already names the referenced node with DependsOn
//     or After, nothing is inferred for the pair (an After edge stays order only);
//   - NoInferredDependencies on the dependent turns inference off for that node;
//   - an inferred edge that would close a cycle (the referenced node depends, declared or
//     inferred, on the dependent) is dropped rather than failing the graph: the declared edges
//     win, and among inferred ones those to earlier-added nodes are kept first;
//   - a node referencing a node added after it moves after it: the graph order (plan.Plan.Nodes, the
//     status's node list) is the order of Add calls, each node moved after its inferred blockers
//     where needed.

// NoInferredDependencies turns off, for this node, the edges the Graph infers from its
// references to other nodes: it then waits only for its DependsOn and After
// blockers, and only DependsOn blockers feed its dependencies hash. For a node that names an
// object but must not wait for it or roll with it.
func NoInferredDependencies() NodeOption {
	return nodeOptionFunc(func(s *nodeSpec) { s.noInfer = true })
}

// inferDependencies adds to each node the edges its references to other nodes imply (see above),
// after the declared ones and in graph order, and reorders the nodes when an inferred blocker was added after its
// dependent. It runs once per graph built, so it reads typed objects only and allocates little.
func (b *Graph) inferDependencies() {
	var refs []graph.NodeID
	var forward [][2]int // dependent, blocker: blocker added after the dependent
	for i, s := range b.nodes {
		if s.reference || s.noInfer {
			continue
		}
		refs = resources.AppendReferences(refs[:0], s.obj, s.id.Namespace)
		for _, id := range refs {
			j, ok := b.index[id]
			if !ok || j == i || s.hasBlocker(j) {
				continue
			}
			if j > i {
				if !slices.Contains(forward, [2]int{i, j}) {
					forward = append(forward, [2]int{i, j})
				}
				continue
			}
			s.blockers = append(s.blockers, Node{id: id, index: j})
			s.inferred++
		}
	}
	if len(forward) == 0 {
		b.sortInferred()
		return
	}
	// An edge to a later node may close a cycle; the others cannot (every edge so far points to
	// an earlier node).
	seen := make([]bool, len(b.nodes))
	added := false
	for _, e := range forward {
		i, j := e[0], e[1]
		clear(seen)
		if b.reaches(j, i, seen) {
			continue
		}
		s := b.nodes[i]
		s.blockers = append(s.blockers, Node{id: b.nodes[j].id, index: j})
		s.inferred++
		added = true
	}
	if added {
		b.sortTopologically()
	}
	b.sortInferred()
}

// sortInferred puts each node's inferred blockers in graph order, as an author would list them,
// whatever the order of the references in the object.
func (b *Graph) sortInferred() {
	for _, s := range b.nodes {
		if s.inferred > 1 {
			slices.SortFunc(s.blockers[len(s.blockers)-s.inferred:], func(x, y Node) int { return x.index - y.index })
		}
	}
}

// hasBlocker reports whether the node already waits for the node at index j.
func (s *nodeSpec) hasBlocker(j int) bool {
	for _, bl := range s.blockers {
		if bl.index == j {
			return true
		}
	}
	return false
}

// inferredBlocker reports whether the k-th blocker of the node was inferred from a reference:
// inferred blockers follow the declared ones.
func (s *nodeSpec) inferredBlocker(k int) bool { return k >= len(s.blockers)-s.inferred }

// reaches reports whether node from waits, directly or through other nodes, for node to.
func (b *Graph) reaches(from, to int, seen []bool) bool {
	if from == to {
		return true
	}
	if seen[from] {
		return false
	}
	seen[from] = true
	for _, bl := range b.nodes[from].blockers {
		if b.reaches(bl.index, to, seen) {
			return true
		}
	}
	return false
}

// sortTopologically reorders the nodes so that each comes after its blockers, moving as few as
// it can: a node keeps its place unless a blocker comes later, and then follows it. Node
// indices in blockers and After lists and the index map follow.
func (b *Graph) sortTopologically() {
	order := make([]int, 0, len(b.nodes))
	placed := make([]bool, len(b.nodes))
	var place func(i int)
	place = func(i int) {
		if placed[i] {
			return
		}
		placed[i] = true
		blockers := make([]int, len(b.nodes[i].blockers))
		for k, bl := range b.nodes[i].blockers {
			blockers[k] = bl.index
		}
		slices.Sort(blockers)
		for _, j := range blockers {
			place(j)
		}
		order = append(order, i)
	}
	for i := range b.nodes {
		place(i)
	}
	moved := make([]int, len(b.nodes)) // old index → new index
	nodes := make([]*nodeSpec, len(b.nodes))
	for to, from := range order {
		moved[from] = to
		nodes[to] = b.nodes[from]
	}
	for i, s := range nodes {
		b.index[s.id] = i
		for k := range s.blockers {
			s.blockers[k].index = moved[s.blockers[k].index]
		}
		for k := range s.after {
			s.after[k].index = moved[s.after[k].index]
		}
	}
	b.nodes = nodes
}
