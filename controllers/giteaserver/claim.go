package giteaserver

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	giteav1alpha1 "github.com/kdag-dev/kdag/apis/gitea/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/controller"
)

// claimPolicy returns the node options of a claim with deletion policy p: Retain (or unset)
// keeps the claim when the GiteaServer goes (controller.Keep), and a GiteaServer of the same
// name created later adopts it again, repositories included.
func claimPolicy(p giteav1alpha1.StorageDeletionPolicy) []controller.NodeOption {
	if p == giteav1alpha1.StorageDelete {
		return nil
	}
	return []controller.NodeOption{controller.Keep()}
}

// dataClaim holds repositories, attachments and indexes.
func dataClaim(s *giteav1alpha1.GiteaServer) *corev1.PersistentVolumeClaim {
	mode := s.Spec.Storage.AccessMode
	if mode == "" {
		mode = corev1.ReadWriteOnce
	}
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: dataClaimName(s.Name), Labels: labels(s)},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{mode},
			StorageClassName: s.Spec.Storage.StorageClassName,
			Resources: corev1.VolumeResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceStorage: s.Spec.Storage.Size},
			},
		},
	}
}
