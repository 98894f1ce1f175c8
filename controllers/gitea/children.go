package gitea

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	giteav1alpha1 "github.com/kdag-dev/kdag/apis/gitea/v1alpha1"
	"github.com/kdag-dev/kdag/controllers/common"
)

// Names of the children: they follow from the Gitea's name only.
func postgreSQLName(g *giteav1alpha1.Gitea) string { return g.Name + "-postgresql" }
func valkeyName(g *giteav1alpha1.Gitea) string     { return g.Name + "-valkey" }
func serverName(g *giteav1alpha1.Gitea) string     { return g.Name }

func labels(g *giteav1alpha1.Gitea, component string) map[string]string {
	return common.Labels("gitea", g.Name, component)
}

// postgreSQL is the managed database. A Gitea written as `database: {type: managed}` has no
// managed block: the defaults apply.
func postgreSQL(g *giteav1alpha1.Gitea) *giteav1alpha1.PostgreSQL {
	managed := giteav1alpha1.ManagedDatabaseSpec{
		Version: giteav1alpha1.DefaultPostgreSQLVersion,
		Image:   giteav1alpha1.DefaultPostgreSQLImage,
		Storage: giteav1alpha1.StorageSpec{Size: resource.MustParse(giteav1alpha1.DefaultStorageSize), DeletionPolicy: giteav1alpha1.StorageRetain},
	}
	if m := g.Spec.Database.Managed; m != nil {
		managed = *m.DeepCopy()
	}
	return &giteav1alpha1.PostgreSQL{
		ObjectMeta: metav1.ObjectMeta{Name: postgreSQLName(g), Labels: labels(g, "database")},
		Spec: giteav1alpha1.PostgreSQLSpec{
			ManagedDatabaseSpec: managed,
			Database:            giteav1alpha1.DefaultDatabaseName,
			User:                giteav1alpha1.DefaultDatabaseUser,
		},
	}
}

func valkeyCache(g *giteav1alpha1.Gitea) *giteav1alpha1.Valkey {
	return &giteav1alpha1.Valkey{
		ObjectMeta: metav1.ObjectMeta{Name: valkeyName(g), Labels: labels(g, "cache")},
		Spec: giteav1alpha1.ValkeySpec{
			Version:   g.Spec.Cache.Version,
			Image:     g.Spec.Cache.Image,
			Resources: *g.Spec.Cache.Resources.DeepCopy(),
		},
	}
}

// giteaServer connects the server to the database through databaseSecret (the PostgreSQL's
// credentials Secret or the user's external one) and to the cache at cacheAddress ("" without
// cache): the children's outputs, not copies of the user's spec.
func giteaServer(g *giteav1alpha1.Gitea, databaseSecret, cacheAddress string) *giteav1alpha1.GiteaServer {
	s := &giteav1alpha1.GiteaServer{
		ObjectMeta: metav1.ObjectMeta{Name: serverName(g), Labels: labels(g, "server")},
		Spec: giteav1alpha1.GiteaServerSpec{
			Version:      g.Spec.Version,
			Image:        g.Spec.Image,
			Replicas:     g.Spec.Replicas,
			Resources:    *g.Spec.Resources.DeepCopy(),
			Storage:      *g.Spec.Storage.DeepCopy(),
			Database:     giteav1alpha1.ServerDatabaseSpec{SecretRef: giteav1alpha1.SecretReference{Name: databaseSecret}},
			Ingress:      g.Spec.Ingress.DeepCopy(),
			Admin:        g.Spec.Admin.DeepCopy(),
			PodOverrides: *g.Spec.PodOverrides.DeepCopy(),
		},
	}
	if cacheAddress != "" {
		s.Spec.Cache = &giteav1alpha1.ServerCacheSpec{Address: cacheAddress}
	}
	return s
}
