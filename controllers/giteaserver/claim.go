package giteaserver

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	giteav1alpha1 "github.com/kdag-dev/kdag/apis/gitea/v1alpha1"
)

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
