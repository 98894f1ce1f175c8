package postgresql

import (
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	giteav1alpha1 "github.com/kdag-dev/kdag/apis/gitea/v1alpha1"
	"github.com/kdag-dev/kdag/controllers/common"
	"github.com/kdag-dev/kdag/pkg/controller"
)

// credentialsSecret holds the connection details with a generated password. It is create-only:
// the password is generated once and survives every later reconcile and operator restart. It is
// immutable: the database's role keeps the password it was initialised with, so an edit could
// only break the server's connection.
func credentialsSecret(pg *giteav1alpha1.PostgreSQL) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: CredentialsSecretName(pg.Name), Labels: labels(pg)},
		Type:       corev1.SecretTypeOpaque,
		Immutable:  ptr.To(true),
		StringData: map[string]string{
			giteav1alpha1.DatabaseSecretHostKey:     Host(pg.Name, pg.Namespace),
			giteav1alpha1.DatabaseSecretPortKey:     strconv.Itoa(Port),
			giteav1alpha1.DatabaseSecretUserKey:     pg.Spec.User,
			giteav1alpha1.DatabaseSecretPasswordKey: common.RandomSecret(24),
			giteav1alpha1.DatabaseSecretDatabaseKey: pg.Spec.Database,
		},
	}
}

// credentialsPolicy returns the node options of the credentials Secret: generated once
// (create-only), never generated again while the database's claim exists (the data directory
// keeps the password it was initialised with), and kept with the claim when the storage's
// deletion policy is Retain, so that a PostgreSQL of the same name created later adopts both.
func credentialsPolicy(pg *giteav1alpha1.PostgreSQL) []controller.NodeOption {
	opts := []controller.NodeOption{controller.CreateOnly(), controller.ProtectsData(dataClaim(pg))}
	if pg.Spec.Storage.DeletionPolicy != giteav1alpha1.StorageDelete {
		opts = append(opts, controller.Keep())
	}
	return opts
}
