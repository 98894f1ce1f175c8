// Package postgresql is the PostgreSQL component of the reference operator: a kdag
// ResourceManager that runs one PostgreSQL server per PostgreSQL object.
package postgresql

import (
	"context"

	"github.com/pkg/errors"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	giteav1alpha1 "github.com/kdag-dev/kdag/apis/gitea/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/controller"
)

// +kubebuilder:rbac:groups=gitea.kdag.dev,resources=postgresqls,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=gitea.kdag.dev,resources=postgresqls/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=gitea.kdag.dev,resources=postgresqls/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=secrets;services,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=apps,resources=statefulsets,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=persistentvolumeclaims,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=storage.k8s.io,resources=storageclasses,verbs=get;list;watch
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch;create;update;patch;delete

// ResourceManager reconciles PostgreSQL objects.
type ResourceManager struct{}

// OwnedTypes implements controller.OwnedTypes.
func (ResourceManager) OwnedTypes() []client.Object {
	return []client.Object{&corev1.Secret{}, &corev1.Service{}, &corev1.PersistentVolumeClaim{}, &appsv1.StatefulSet{}, &batchv1.Job{}}
}

// Validate implements controller.Validator: the name must leave room for the revision label of
// the StatefulSet's pods (MaxNameLength). A name is a spec error: the error is terminal.
func (ResourceManager) Validate(_ context.Context, pg *giteav1alpha1.PostgreSQL) error {
	if err := ValidateName(pg.Name); err != nil {
		return reconcile.TerminalError(errors.Wrap(err, "the name is too long; use a shorter name"))
	}
	return nil
}

// AddResources implements controller.ResourceManager: generated credentials, a headless
// Service, the data claim, and the StatefulSet that needs all three (the Builder infers the
// edges to the Service and the Secret from the StatefulSet's serviceName and secretKeyRefs).
// The PostgreSQL is Ready when the StatefulSet is. The credentials and the data live and die
// together (credentialsPolicy, claimPolicy).
//
// The data claim is kdag's, not the StatefulSet controller's, so that the volume can grow: the
// StatefulSet controller creates a claim from its template only if none of that name exists,
// and never updates one, and the API server refuses any change of the template. So kdag creates
// the claim before the StatefulSet, raises its storage request when spec.storage.size
// grows (the StorageClass must allow volume expansion, else the PostgreSQL is Stalled with reason
// VolumeExpansionForbidden), then re-creates the StatefulSet with the new template, deleting it
// with propagation Orphan: its pod, the running server, stays and the new StatefulSet adopts it.
//
// With deletionPolicy Delete, the database is dumped into a kept claim before it is deleted
// (addDump).
func (ResourceManager) AddResources(_ context.Context, pg *giteav1alpha1.PostgreSQL, b *controller.Graph) error {
	secret := b.Add(credentialsSecret(pg), credentialsPolicy(pg)...)
	b.Add(headlessService(pg))
	claim := b.Add(dataClaim(pg), append(claimPolicy(pg), controller.After(secret))...)
	server := b.Add(statefulSet(pg), controller.After(claim), controller.Recreate(metav1.DeletePropagationOrphan))
	addDump(pg, b, server)
	return nil
}
