package controller

import (
	"github.com/kdag-dev/kdag/pkg/graph"

	"slices"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Dependencies inferred from references. Objects already say much of what they need: a pod
// template that mounts a ConfigMap, reads a Secret or claims a volume, a RoleBinding that grants a
// Role, an Ingress that routes to a Service. When both objects are nodes of the same graph, the
// Graph adds the edge itself, once AddResources returned, and it behaves as a DependsOn edge:
// the dependent waits until the referenced node is applied and ready, and the referenced node's
// content feeds the dependent's dependencies hash, so a changed ConfigMap rolls the pods that
// mount it. What is read (typed objects only; an unstructured.Unstructured node is not read):
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
//   - a node referencing a node added after it moves after it: the graph order (Plan.Nodes, the
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
		refs = appendReferences(refs[:0], s.obj, s.id.Namespace)
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

// appendReferences appends to refs the objects obj references that inference follows (see
// above), namespaced ones in namespace, and returns refs. Other types reference nothing.
func appendReferences(refs []graph.NodeID, obj client.Object, namespace string) []graph.NodeID {
	switch o := obj.(type) {
	case *corev1.Pod:
		return appendPodReferences(refs, &o.Spec, namespace)
	case *appsv1.Deployment:
		return appendPodReferences(refs, &o.Spec.Template.Spec, namespace)
	case *appsv1.StatefulSet:
		if o.Spec.ServiceName != "" {
			refs = append(refs, graph.NodeID{Kind: "Service", Namespace: namespace, Name: o.Spec.ServiceName})
		}
		return appendPodReferences(refs, &o.Spec.Template.Spec, namespace)
	case *appsv1.DaemonSet:
		return appendPodReferences(refs, &o.Spec.Template.Spec, namespace)
	case *appsv1.ReplicaSet:
		return appendPodReferences(refs, &o.Spec.Template.Spec, namespace)
	case *batchv1.Job:
		return appendPodReferences(refs, &o.Spec.Template.Spec, namespace)
	case *batchv1.CronJob:
		return appendPodReferences(refs, &o.Spec.JobTemplate.Spec.Template.Spec, namespace)
	case *rbacv1.RoleBinding:
		return appendRoleRef(refs, o.RoleRef, namespace)
	case *rbacv1.ClusterRoleBinding:
		return appendRoleRef(refs, o.RoleRef, "")
	case *networkingv1.Ingress:
		return appendIngressReferences(refs, &o.Spec, namespace)
	}
	return refs
}

func appendPodReferences(refs []graph.NodeID, spec *corev1.PodSpec, ns string) []graph.NodeID {
	configMap := func(name string) {
		if name != "" {
			refs = append(refs, graph.NodeID{Kind: "ConfigMap", Namespace: ns, Name: name})
		}
	}
	secret := func(name string) {
		if name != "" {
			refs = append(refs, graph.NodeID{Kind: "Secret", Namespace: ns, Name: name})
		}
	}
	for i := range spec.Volumes {
		v := &spec.Volumes[i].VolumeSource
		switch {
		case v.ConfigMap != nil:
			configMap(v.ConfigMap.Name)
		case v.Secret != nil:
			secret(v.Secret.SecretName)
		case v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName != "":
			refs = append(refs, graph.NodeID{Kind: "PersistentVolumeClaim", Namespace: ns, Name: v.PersistentVolumeClaim.ClaimName})
		case v.Projected != nil:
			for _, src := range v.Projected.Sources {
				if src.ConfigMap != nil {
					configMap(src.ConfigMap.Name)
				}
				if src.Secret != nil {
					secret(src.Secret.Name)
				}
			}
		}
	}
	container := func(env []corev1.EnvVar, envFrom []corev1.EnvFromSource) {
		for i := range env {
			if from := env[i].ValueFrom; from != nil {
				if from.ConfigMapKeyRef != nil {
					configMap(from.ConfigMapKeyRef.Name)
				}
				if from.SecretKeyRef != nil {
					secret(from.SecretKeyRef.Name)
				}
			}
		}
		for i := range envFrom {
			if envFrom[i].ConfigMapRef != nil {
				configMap(envFrom[i].ConfigMapRef.Name)
			}
			if envFrom[i].SecretRef != nil {
				secret(envFrom[i].SecretRef.Name)
			}
		}
	}
	for i := range spec.InitContainers {
		container(spec.InitContainers[i].Env, spec.InitContainers[i].EnvFrom)
	}
	for i := range spec.Containers {
		container(spec.Containers[i].Env, spec.Containers[i].EnvFrom)
	}
	for i := range spec.EphemeralContainers {
		container(spec.EphemeralContainers[i].Env, spec.EphemeralContainers[i].EnvFrom)
	}
	for _, s := range spec.ImagePullSecrets {
		secret(s.Name)
	}
	sa := spec.ServiceAccountName
	if sa == "" {
		sa = spec.DeprecatedServiceAccount // the API server still reads it
	}
	if sa != "" {
		refs = append(refs, graph.NodeID{Kind: "ServiceAccount", Namespace: ns, Name: sa})
	}
	return refs
}

// appendRoleRef appends the Role (in ns) or ClusterRole a binding's roleRef names.
func appendRoleRef(refs []graph.NodeID, ref rbacv1.RoleRef, ns string) []graph.NodeID {
	if ref.APIGroup != rbacv1.GroupName || ref.Name == "" {
		return refs
	}
	switch ref.Kind {
	case "Role":
		if ns != "" {
			refs = append(refs, graph.NodeID{Group: rbacv1.GroupName, Kind: "Role", Namespace: ns, Name: ref.Name})
		}
	case "ClusterRole":
		refs = append(refs, graph.NodeID{Group: rbacv1.GroupName, Kind: "ClusterRole", Name: ref.Name})
	}
	return refs
}

// appendIngressReferences appends an Ingress's backend Services and TLS Secrets.
func appendIngressReferences(refs []graph.NodeID, spec *networkingv1.IngressSpec, ns string) []graph.NodeID {
	backend := func(be *networkingv1.IngressBackend) {
		if be != nil && be.Service != nil && be.Service.Name != "" {
			refs = append(refs, graph.NodeID{Kind: "Service", Namespace: ns, Name: be.Service.Name})
		}
	}
	backend(spec.DefaultBackend)
	for i := range spec.Rules {
		if http := spec.Rules[i].HTTP; http != nil {
			for k := range http.Paths {
				backend(&http.Paths[k].Backend)
			}
		}
	}
	for _, tls := range spec.TLS {
		if tls.SecretName != "" {
			refs = append(refs, graph.NodeID{Kind: "Secret", Namespace: ns, Name: tls.SecretName})
		}
	}
	return refs
}
