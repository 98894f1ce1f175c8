package resources_test

import (
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kdag-dev/kdag/pkg/graph"
	"github.com/kdag-dev/kdag/pkg/resources"
)

func TestAppendReferences(t *testing.T) {
	id := func(kind, name string) graph.NodeID { return graph.NodeID{Kind: kind, Namespace: "ns", Name: name} }
	rbac := func(kind, ns, name string) graph.NodeID {
		return graph.NodeID{Group: rbacv1.GroupName, Kind: kind, Namespace: ns, Name: name}
	}
	pod := corev1.PodSpec{
		Volumes: []corev1.Volume{
			{VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "conf"}}}},
			{VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}},
			{VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
				{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "tls"}}}}}}},
		},
		InitContainers: []corev1.Container{{EnvFrom: []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "init"}}}}}},
		Containers: []corev1.Container{{Env: []corev1.EnvVar{{Name: "P", ValueFrom: &corev1.EnvVarSource{
			SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "db"}, Key: "password"}}}}}},
		ImagePullSecrets:   []corev1.LocalObjectReference{{Name: "pull"}},
		ServiceAccountName: "app",
	}
	podRefs := []graph.NodeID{id("ConfigMap", "conf"), id("PersistentVolumeClaim", "data"), id("Secret", "tls"),
		id("Secret", "init"), id("Secret", "db"), id("Secret", "pull"), id("ServiceAccount", "app")}
	backend := func(name string) networkingv1.IngressBackend {
		return networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: name}}
	}
	web := backend("web")
	tests := []struct {
		name string
		obj  client.Object
		want []graph.NodeID
	}{
		{name: "deployment's pod template", obj: &appsv1.Deployment{Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{Spec: pod}}}, want: podRefs},
		{name: "statefulset's governing service first", obj: &appsv1.StatefulSet{Spec: appsv1.StatefulSetSpec{ServiceName: "db-headless"}},
			want: []graph.NodeID{id("Service", "db-headless")}},
		{name: "role binding", obj: &rbacv1.RoleBinding{RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "reader"}},
			want: []graph.NodeID{rbac("Role", "ns", "reader")}},
		{name: "cluster role binding", obj: &rbacv1.ClusterRoleBinding{RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"}},
			want: []graph.NodeID{rbac("ClusterRole", "", "view")}},
		{name: "ingress backends and TLS", obj: &networkingv1.Ingress{Spec: networkingv1.IngressSpec{DefaultBackend: &web,
			Rules: []networkingv1.IngressRule{{IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
				Paths: []networkingv1.HTTPIngressPath{{Backend: backend("api")}}}}}},
			TLS: []networkingv1.IngressTLS{{SecretName: "cert"}}}},
			want: []graph.NodeID{id("Service", "web"), id("Service", "api"), id("Secret", "cert")}},
		{name: "a kind that references nothing", obj: &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x"}}},
		{name: "unstructured is not read", obj: &unstructured.Unstructured{Object: map[string]any{"kind": "Deployment"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := resources.AppendReferences(nil, tt.obj, "ns")
			if !slices.Equal(got, tt.want) {
				t.Errorf("AppendReferences = %v, want %v", got, tt.want)
			}
		})
	}
}
