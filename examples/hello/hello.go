// Package hello is the README tutorial's component: a web page served from a ConfigMap by a
// Deployment, behind a Service. Its owner is the kit's test resource, testapi.Widget.
package hello

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kdag-dev/kdag/pkg/controller"
	"github.com/kdag-dev/kdag/pkg/testing/testapi"
)

// +kubebuilder:rbac:groups="",resources=configmaps;services,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;list;watch;create;update;patch;delete

// ResourceManager serves each Widget's spec.data as files of a web server.
type ResourceManager struct{}

// OwnedTypes implements controller.ResourceManager: watches, cache and RBAC check come from it.
func (ResourceManager) OwnedTypes() []client.Object {
	return []client.Object{&corev1.ConfigMap{}, &appsv1.Deployment{}, &corev1.Service{}}
}

// AddResources implements controller.ResourceManager: the pages, the server that mounts them
// (a change of the pages rolls its pods), and the Service, added once the server is available.
func (ResourceManager) AddResources(_ context.Context, w *testapi.Widget, b *controller.Graph) error {
	b.Add(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: w.Name + "-pages"}, Data: w.Spec.Data})
	server := b.Add(deployment(w)) // mounts the pages: waits for them, rolls with them (inferred)
	b.Add(service(w), controller.DependsOn(server))
	return nil
}

func deployment(w *testapi.Widget) *appsv1.Deployment {
	labels := map[string]string{"app.kubernetes.io/name": "hello", "app.kubernetes.io/instance": w.Name}
	pages := corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
		LocalObjectReference: corev1.LocalObjectReference{Name: w.Name + "-pages"},
	}}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: w.Name, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: w.Spec.Replicas,
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

func service(w *testapi.Widget) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: w.Name},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app.kubernetes.io/name": "hello", "app.kubernetes.io/instance": w.Name},
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80}},
		},
	}
}
