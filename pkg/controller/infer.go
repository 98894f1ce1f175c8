package controller

import "github.com/kdag-dev/kdag/pkg/controller/internal/reconciler"

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
	return nodeOption(reconciler.NoInferredDependencies())
}
