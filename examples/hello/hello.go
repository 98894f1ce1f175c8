package main

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kdag-dev/kdag/examples/hello/api/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/controller"
)

// The rules kdag needs on the owner type (operator.KdagRules), then those of OwnedTypes (the
// test checks them against operator.Rules); `make manifests` writes config/rbac/role.yaml.
//
// +kubebuilder:rbac:groups=examples.kdag.dev,resources=hellos,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=examples.kdag.dev,resources=hellos/status,verbs=update;patch
// +kubebuilder:rbac:groups=examples.kdag.dev,resources=hellos/finalizers,verbs=update
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=apps,resources=controllerrevisions,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=configmaps;services,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;list;watch;create;update;patch;delete

// ResourceManager serves each Hello's pages from a web server.
type ResourceManager struct{}

// OwnedTypes implements controller.ResourceManager: watches, cache and RBAC check come from it.
func (ResourceManager) OwnedTypes() []client.Object {
	return []client.Object{&corev1.ConfigMap{}, &appsv1.Deployment{}, &corev1.Service{}}
}

// AddResources implements controller.ResourceManager: the pages, the server that mounts them
// (a change of the pages rolls its pods), and the Service, added once the server is available.
func (ResourceManager) AddResources(_ context.Context, h *v1alpha1.Hello, b *controller.Graph) error {
	b.Add(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: h.Name + "-pages"}, Data: h.Spec.Pages})
	server := b.Add(deployment(h)) // mounts the pages: waits for them, rolls with them (inferred)
	b.Add(service(h), controller.DependsOn(server))
	return nil
}

func deployment(h *v1alpha1.Hello) *appsv1.Deployment {
	labels := map[string]string{"app.kubernetes.io/name": "hello", "app.kubernetes.io/instance": h.Name}
	pages := corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
		LocalObjectReference: corev1.LocalObjectReference{Name: h.Name + "-pages"},
	}}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: h.Name, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: h.Spec.Replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{{
						Name: "web", Image: "nginx:1.27",
						Ports:        []corev1.ContainerPort{{Name: "http", ContainerPort: 80}},
						VolumeMounts: []corev1.VolumeMount{{Name: "pages", MountPath: "/usr/share/nginx/html"}},
					}},
					Volumes: []corev1.Volume{{Name: "pages", VolumeSource: pages}},
				},
			},
		},
	}
}

func service(h *v1alpha1.Hello) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: h.Name},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app.kubernetes.io/name": "hello", "app.kubernetes.io/instance": h.Name},
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80}},
		},
	}
}
