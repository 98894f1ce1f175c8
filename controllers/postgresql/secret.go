package postgresql

import (
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	giteav1alpha1 "github.com/kdag-dev/kdag/apis/gitea/v1alpha1"
	"github.com/kdag-dev/kdag/controllers/common"
)

// credentialsSecret holds the connection details with a generated password. It is create-only:
// the password is generated once and survives every later reconcile and operator restart.
func credentialsSecret(pg *giteav1alpha1.PostgreSQL) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: CredentialsSecretName(pg.Name), Labels: labels(pg)},
		Type:       corev1.SecretTypeOpaque,
		StringData: map[string]string{
			giteav1alpha1.DatabaseSecretHostKey:     Host(pg.Name, pg.Namespace),
			giteav1alpha1.DatabaseSecretPortKey:     strconv.Itoa(Port),
			giteav1alpha1.DatabaseSecretUserKey:     pg.Spec.User,
			giteav1alpha1.DatabaseSecretPasswordKey: common.RandomSecret(24),
			giteav1alpha1.DatabaseSecretDatabaseKey: pg.Spec.Database,
		},
	}
}
