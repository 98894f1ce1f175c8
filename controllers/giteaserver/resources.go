// Package giteaserver is the Gitea server component of the reference operator: a kdag
// ResourceManager that runs Gitea for one GiteaServer object, migrating its database once per
// version before the server is applied or rolled.
package giteaserver

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	giteav1alpha1 "github.com/kdag-dev/kdag/apis/gitea/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/controller"
)

// +kubebuilder:rbac:groups=gitea.kdag.dev,resources=giteaservers,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=gitea.kdag.dev,resources=giteaservers/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=gitea.kdag.dev,resources=giteaservers/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=configmaps;secrets;services;persistentvolumeclaims,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=networking.k8s.io,resources=ingresses,verbs=get;list;watch;create;update;patch;delete

// ResourceManager reconciles GiteaServer objects.
type ResourceManager struct{}

// NewEmpty implements controller.ResourceManager.
func (ResourceManager) NewEmpty() client.Object { return &giteav1alpha1.GiteaServer{} }

// OwnedTypes implements controller.OwnedTypes.
func (ResourceManager) OwnedTypes() []client.Object {
	return []client.Object{
		&corev1.Secret{}, &corev1.ConfigMap{}, &corev1.PersistentVolumeClaim{}, &corev1.Service{},
		&batchv1.Job{}, &appsv1.Deployment{}, &networkingv1.Ingress{},
	}
}

// AddResources implements controller.ResourceManager. The migration Job of the version must
// complete before the server Deployment is applied or rolled: a new version first migrates the
// database while the previous version keeps serving. The Secrets the server reads but does not
// own (the database's, the administrator's) are references: until they exist the pods that
// need them wait, and the status says which Secret to create.
func (ResourceManager) AddResources(_ context.Context, owner client.Object, b *controller.Builder) error {
	s := owner.(*giteav1alpha1.GiteaServer)

	database := b.Reference(referencedSecret(s.Spec.Database.SecretRef.Name), controller.RequireKeys(
		giteav1alpha1.DatabaseSecretHostKey, giteav1alpha1.DatabaseSecretPortKey, giteav1alpha1.DatabaseSecretUserKey,
		giteav1alpha1.DatabaseSecretPasswordKey, giteav1alpha1.DatabaseSecretDatabaseKey))
	secrets := b.Add(generatedSecret(s), controller.CreateOnly())
	config := b.Add(configMap(s))
	data := b.Add(dataClaim(s), claimPolicy(s.Spec.Storage.DeletionPolicy)...)
	migration := b.Add(migrationJob(s), controller.CreateOnly(), controller.DependsOn(database, secrets, config))
	server := b.Add(deployment(s), controller.DependsOn(migration, database, secrets, config, data))
	service := b.Add(service(s))
	if s.Spec.Ingress != nil {
		b.Add(ingress(s), controller.DependsOn(service))
	}
	if s.Spec.Admin != nil {
		admin := b.Reference(referencedSecret(s.Spec.Admin.SecretRef.Name), controller.RequireKeys(
			giteav1alpha1.AdminSecretUsernameKey, giteav1alpha1.AdminSecretPasswordKey, giteav1alpha1.AdminSecretEmailKey))
		b.Add(adminJob(s), controller.CreateOnly(), controller.DependsOn(server, admin))
	}
	return nil
}
