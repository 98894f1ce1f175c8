package giteaserver

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	giteav1alpha1 "github.com/kdag-dev/kdag/apis/gitea/v1alpha1"
	"github.com/kdag-dev/kdag/controllers/common"
)

// Keys of the generated Secret.
const (
	secretKeyKey     = "secret-key"
	internalTokenKey = "internal-token"
)

// referencedSecret is a Secret the server reads but the user (or another component) manages,
// for a controller.Builder.Reference node: only its name counts.
func referencedSecret(name string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name}}
}

// generatedSecret holds Gitea's secret key and internal token, generated once (create-only):
// changing them would invalidate every session and stored secret.
func generatedSecret(s *giteav1alpha1.GiteaServer) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: generatedSecretName(s.Name), Labels: labels(s)},
		Type:       corev1.SecretTypeOpaque,
		StringData: map[string]string{
			secretKeyKey:     common.RandomSecret(48),
			internalTokenKey: common.RandomSecret(64),
		},
	}
}
