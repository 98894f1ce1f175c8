package giteaserver

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	giteav1alpha1 "github.com/kdag-dev/kdag/apis/gitea/v1alpha1"
	"github.com/kdag-dev/kdag/controllers/common"
	"github.com/kdag-dev/kdag/pkg/controller"
)

// Keys of the generated Secret.
const (
	secretKeyKey     = "secret-key"
	internalTokenKey = "internal-token"
)

// referencedSecret is a Secret the server reads but the user (or another component) manages,
// for a controller.Graph.Reference node: only its name counts.
func referencedSecret(name string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name}}
}

// generatedSecret holds Gitea's secret key and internal token, generated once (create-only):
// changing them would invalidate every session and stored secret (two-factor secrets in the
// database are encrypted with the secret key). Immutable: the API server refuses an edit.
func generatedSecret(s *giteav1alpha1.GiteaServer) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: generatedSecretName(s.Name), Labels: labels(s)},
		Type:       corev1.SecretTypeOpaque,
		Immutable:  ptr.To(true),
		StringData: map[string]string{
			secretKeyKey:     common.RandomSecret(48),
			internalTokenKey: common.RandomSecret(64),
		},
	}
}

// keyPolicy returns the node options of the generated keys: created once, never generated again
// while the repositories' claim exists (the data and the database written with them would not
// open), and kept with the claim when the storage's deletion policy is Retain, so that a
// GiteaServer of the same name created later adopts both.
func keyPolicy(s *giteav1alpha1.GiteaServer) []controller.NodeOption {
	opts := []controller.NodeOption{controller.CreateOnly(), controller.ProtectsData(dataClaim(s))}
	if s.Spec.Storage.DeletionPolicy != giteav1alpha1.StorageDelete {
		opts = append(opts, controller.Keep())
	}
	return opts
}
