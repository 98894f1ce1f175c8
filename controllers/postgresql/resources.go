// Package postgresql is the PostgreSQL component of the reference operator: a kdag
// ResourceManager that runs one PostgreSQL server per PostgreSQL object.
package postgresql

import (
	"context"

	"github.com/pkg/errors"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
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
// +kubebuilder:rbac:groups="",resources=persistentvolumeclaims,verbs=get;list;watch

// ResourceManager reconciles PostgreSQL objects.
type ResourceManager struct{}

// OwnedTypes implements controller.OwnedTypes.
func (ResourceManager) OwnedTypes() []client.Object {
	return []client.Object{&corev1.Secret{}, &corev1.Service{}, &appsv1.StatefulSet{}}
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
// Service, and the StatefulSet that needs both (the Builder infers both edges from the
// StatefulSet's serviceName and secretKeyRefs, issue 15). The PostgreSQL is Ready when the
// StatefulSet is. The credentials and the data live and die together (credentialsPolicy).
func (ResourceManager) AddResources(_ context.Context, pg *giteav1alpha1.PostgreSQL, b *controller.Builder) error {
	b.Add(credentialsSecret(pg), credentialsPolicy(pg)...)
	b.Add(headlessService(pg))
	b.Add(statefulSet(pg))
	return nil
}
