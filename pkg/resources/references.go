package resources

import (
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kdag-dev/kdag/pkg/graph"
)

// AppendReferences appends to refs the objects obj references, namespaced ones in namespace, and
// returns refs: what kdag's dependency inference follows (a node referencing another node of the
// graph waits for it and rolls with its content). obj must be typed; other types, an
// unstructured.Unstructured among them, reference nothing:
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
func AppendReferences(refs []graph.NodeID, obj client.Object, namespace string) []graph.NodeID {
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
