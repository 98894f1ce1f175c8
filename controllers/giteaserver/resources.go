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
// +kubebuilder:rbac:groups=storage.k8s.io,resources=storageclasses,verbs=get;list;watch
// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=networking.k8s.io,resources=ingresses,verbs=get;list;watch;create;update;patch;delete

// ResourceManager reconciles GiteaServer objects.
type ResourceManager struct{}

// OwnedTypes implements controller.OwnedTypes.
func (ResourceManager) OwnedTypes() []client.Object {
	return []client.Object{
		&corev1.Secret{}, &corev1.ConfigMap{}, &corev1.PersistentVolumeClaim{}, &corev1.Service{},
		&batchv1.Job{}, &appsv1.Deployment{}, &networkingv1.Ingress{},
	}
}

// AddResources implements controller.ResourceManager. The migration Job of the version must
// complete before the server Deployment is applied or rolled: a new version first migrates the
// database while the previous version keeps serving. A migration is never interrupted and never
// runs beside another (migrationNodes). The Secrets the server reads but does not own (the
// database's, the administrator's, the Ingress's certificate) are references: until they exist
// with the keys the server reads, the pods that need them wait, and the status says which Secret
// to create. The generated keys and the repositories' claim live and die together (keyPolicy,
// claimPolicy).
//
// The edges to what the pods mount and read (the Secrets, the ConfigMap, the claim) and the
// Ingress's edge to its Service are inferred from the objects; the ones declared here
// are those no reference says, or that must differ from an inferred one: order only (the claim
// after the keys, the server after its migration, the Ingress after its certificate, whose
// rotation must not rewrite it), and the Jobs that opt out (migrationNodes, the admin Job).
func (ResourceManager) AddResources(_ context.Context, s *giteav1alpha1.GiteaServer, b *controller.Graph) error {
	b.Reference(referencedSecret(s.Spec.Database.SecretRef.Name), controller.RequireKeys(
		giteav1alpha1.DatabaseSecretHostKey, giteav1alpha1.DatabaseSecretPortKey, giteav1alpha1.DatabaseSecretUserKey,
		giteav1alpha1.DatabaseSecretPasswordKey, giteav1alpha1.DatabaseSecretDatabaseKey))
	secrets := b.Add(generatedSecret(s), keyPolicy(s)...)
	b.Add(configMap(s))
	b.Add(dataClaim(s), append(claimPolicy(s.Spec.Storage.DeletionPolicy), controller.After(secrets))...)
	migration := migrationNodes(s, b)
	server := b.Add(deployment(s), controller.After(migration))
	b.Add(service(s))
	if ing := s.Spec.Ingress; ing != nil {
		var opts []controller.NodeOption
		if ing.TLSSecretName != "" {
			tls := b.Reference(referencedSecret(ing.TLSSecretName), controller.RequireKeys(corev1.TLSCertKey, corev1.TLSPrivateKeyKey))
			opts = append(opts, controller.After(tls))
		}
		b.Add(ingress(s), opts...)
	}
	if s.Spec.Admin != nil {
		admin := b.Reference(referencedSecret(s.Spec.Admin.SecretRef.Name), controller.RequireKeys(
			giteav1alpha1.AdminSecretUsernameKey, giteav1alpha1.AdminSecretPasswordKey, giteav1alpha1.AdminSecretEmailKey))
		// It runs once, against the running server, which already waits for what the Job mounts
		// and reads: its edges are the server and the admin Secret, nothing inferred.
		b.Add(adminJob(s), controller.CreateOnly(), controller.NoInferredDependencies(), controller.DependsOn(server, admin))
	}
	return nil
}

// migrationNodes adds the migration of spec.version and returns its node, which the server
// waits for (After: the Job's content is not the server's). The status records migrations
// (status.migration), and the graph follows it:
//   - a migration of an earlier version that is still running stays in the graph (never pruned
//     while it runs) and the new one waits for it: one migration at a time against the database;
//   - a migration recorded as succeeded for spec.version is Finished: its Job, once deleted (a
//     TTL, a clean-up), is not run again, and the server does not roll.
//
// The new migration waits for the Secrets and the ConfigMap its pod reads (inferred edges);
// a running earlier one waits for nothing (NoInferredDependencies): it is only watched to its end.
func migrationNodes(s *giteav1alpha1.GiteaServer, b *controller.Graph) controller.Node {
	opts := []controller.NodeOption{controller.CreateOnly()}
	if prev := s.Status.Migration; prev != nil && prev.Version != s.Spec.Version && migrating(prev.State) {
		old := b.Add(migrationJobOf(s, prev.Version), controller.CreateOnly(), controller.Finished(), controller.ReadyWhen(jobFinished),
			controller.NoInferredDependencies())
		opts = append(opts, controller.After(old))
	}
	if prev := s.Status.Migration; prev != nil && prev.Version == s.Spec.Version && prev.State == giteav1alpha1.MigrationSucceeded {
		opts = append(opts, controller.Finished())
	}
	return b.Add(migrationJob(s), opts...)
}

// migrating reports whether a migration in state may still be running.
func migrating(state giteav1alpha1.MigrationState) bool {
	return state == giteav1alpha1.MigrationPending || state == giteav1alpha1.MigrationRunning
}
