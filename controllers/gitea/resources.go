// Package gitea is the user-facing controller of the reference operator: a Gitea object becomes
// one child object per component (PostgreSQL, Valkey, GiteaServer), each reconciled by its own
// kdag Controller. The database and the cache come first; the server waits until both are Ready.
package gitea

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"

	giteav1alpha1 "github.com/kdag-dev/kdag/apis/gitea/v1alpha1"
	"github.com/kdag-dev/kdag/controllers/postgresql"
	"github.com/kdag-dev/kdag/controllers/valkey"
	"github.com/kdag-dev/kdag/pkg/controller"
	"github.com/kdag-dev/kdag/pkg/resources"
)

// +kubebuilder:rbac:groups=gitea.kdag.dev,resources=giteas,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=gitea.kdag.dev,resources=giteas/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=gitea.kdag.dev,resources=giteas/finalizers,verbs=update
// +kubebuilder:rbac:groups=gitea.kdag.dev,resources=postgresqls;valkeys;giteaservers,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=apps,resources=controllerrevisions,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch

// ResourceManager reconciles Gitea objects.
type ResourceManager struct{}

// OwnedTypes implements controller.OwnedTypes.
func (ResourceManager) OwnedTypes() []client.Object {
	return []client.Object{&giteav1alpha1.PostgreSQL{}, &giteav1alpha1.Valkey{}, &giteav1alpha1.GiteaServer{}}
}

// ChildReadiness registers, once per child kind, the rule that gates a child's dependents on its
// Ready condition (resources.CustomResourceReady), so the server starts on a database that runs. Give
// them to the gitea component (controllers.Components does).
func ChildReadiness() controller.Options {
	return controller.Options{ReadyWhen: []controller.KindReadiness{
		{Kind: &giteav1alpha1.PostgreSQL{}, Ready: resources.CustomResourceReady},
		{Kind: &giteav1alpha1.Valkey{}, Ready: resources.CustomResourceReady},
		{Kind: &giteav1alpha1.GiteaServer{}, Ready: resources.CustomResourceReady},
	}}
}

// AddResources implements controller.ResourceManager. Each child gates its dependents on its
// Ready condition (ChildReadiness).
func (ResourceManager) AddResources(_ context.Context, g *giteav1alpha1.Gitea, b *controller.Graph) error {
	var before []controller.Node
	databaseSecret := ""
	if g.Spec.Database.Type == giteav1alpha1.DatabaseExternal {
		databaseSecret = g.Spec.Database.External.SecretRef.Name
	} else {
		pg := postgreSQL(g)
		before = append(before, b.Add(pg))
		databaseSecret = postgresql.CredentialsSecretName(pg.Name)
	}
	cacheAddress := ""
	if g.Spec.Cache.IsEnabled() {
		vk := valkeyCache(g)
		before = append(before, b.Add(vk))
		cacheAddress = valkey.Address(vk.Name, g.Namespace)
	}
	b.Add(giteaServer(g, databaseSecret, cacheAddress), controller.DependsOn(before...))
	return nil
}
