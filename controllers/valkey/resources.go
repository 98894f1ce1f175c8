// Package valkey is the cache component of the reference operator: a kdag ResourceManager that
// runs one Valkey server per Valkey object.
package valkey

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	giteav1alpha1 "github.com/kdag-dev/kdag/apis/gitea/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/controller"
)

// +kubebuilder:rbac:groups=gitea.kdag.dev,resources=valkeys,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=gitea.kdag.dev,resources=valkeys/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=gitea.kdag.dev,resources=valkeys/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=configmaps;services,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;list;watch;create;update;patch;delete

// ResourceManager reconciles Valkey objects.
type ResourceManager struct{}

// NewEmpty implements controller.ResourceManager.
func (ResourceManager) NewEmpty() client.Object { return &giteav1alpha1.Valkey{} }

// OwnedTypes implements controller.OwnedTypes.
func (ResourceManager) OwnedTypes() []client.Object {
	return []client.Object{&corev1.ConfigMap{}, &corev1.Service{}, &appsv1.Deployment{}}
}

// AddResources implements controller.ResourceManager: the configuration, the Deployment that
// reads it (a configuration change rolls its pods), and the Service in front of it.
func (ResourceManager) AddResources(_ context.Context, owner client.Object, b *controller.Builder) error {
	v := owner.(*giteav1alpha1.Valkey)

	config := b.Add(configMap(v))
	b.Add(deployment(v), controller.DependsOn(config))
	b.Add(service(v))
	return nil
}
