package postgresql

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	giteav1alpha1 "github.com/kdag-dev/kdag/apis/gitea/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/controller"
)

// dataClaim is the claim holding the database's data, the one the StatefulSet's volume claim
// template "data" names for its only pod (ordinal 0), with the template's spec: the StatefulSet
// controller finds it and mounts it rather than creating its own.
func dataClaim(pg *giteav1alpha1.PostgreSQL) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: DataClaimName(pg.Name), Labels: labels(pg)},
		Spec:       claimSpec(pg),
	}
}

// claimSpec is the spec of the data claim and of the StatefulSet's template for it.
func claimSpec(pg *giteav1alpha1.PostgreSQL) corev1.PersistentVolumeClaimSpec {
	return corev1.PersistentVolumeClaimSpec{
		AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
		StorageClassName: pg.Spec.Storage.StorageClassName,
		Resources: corev1.VolumeResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceStorage: pg.Spec.Storage.Size},
		},
	}
}

// claimPolicy returns the node options of the data claim. Adopt: a PostgreSQL created by an
// operator version before the claim was kdag's has a claim the StatefulSet controller made, which
// kdag takes over. Keep when the storage's deletion policy is Retain (or unset): the claim stays
// when the PostgreSQL goes, and a PostgreSQL of the same name created later adopts it again with
// its credentials (credentialsPolicy). With Delete, the claim goes with the PostgreSQL.
func claimPolicy(pg *giteav1alpha1.PostgreSQL) []controller.NodeOption {
	opts := []controller.NodeOption{controller.Adopt()}
	if pg.Spec.Storage.DeletionPolicy != giteav1alpha1.StorageDelete {
		opts = append(opts, controller.Keep())
	}
	return opts
}
