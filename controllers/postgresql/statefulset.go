package postgresql

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	giteav1alpha1 "github.com/kdag-dev/kdag/apis/gitea/v1alpha1"
	"github.com/kdag-dev/kdag/controllers/common"
)

// postgresUID is the postgres user of the official image.
const postgresUID = 999

// statefulSet runs one PostgreSQL server with its data on a claim from the volume claim
// template. The root filesystem is read-only; the socket and temporary directories are emptyDir.
func statefulSet(pg *giteav1alpha1.PostgreSQL) *appsv1.StatefulSet {
	secret := CredentialsSecretName(pg.Name)
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: pg.Name, Labels: common.WithVersion(labels(pg), pg.Spec.Version)},
		Spec: appsv1.StatefulSetSpec{
			Replicas:    ptr.To[int32](1),
			ServiceName: ServiceName(pg.Name),
			// The data claim is kdag's (dataClaim, claimPolicy): the StatefulSet controller never
			// deletes it, not even when kdag re-creates the StatefulSet to grow the volume.
			PersistentVolumeClaimRetentionPolicy: &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{
				WhenDeleted: appsv1.RetainPersistentVolumeClaimRetentionPolicyType,
				WhenScaled:  appsv1.RetainPersistentVolumeClaimRetentionPolicyType,
			},
			Selector: &metav1.LabelSelector{MatchLabels: labels(pg)},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels(pg)},
				Spec: corev1.PodSpec{
					SecurityContext: common.PodSecurity(postgresUID),
					Containers: []corev1.Container{{
						Name:  "postgresql",
						Image: common.Image(pg.Spec.Image, pg.Spec.Version),
						Env: []corev1.EnvVar{
							common.SecretEnv("POSTGRES_USER", secret, giteav1alpha1.DatabaseSecretUserKey),
							common.SecretEnv("POSTGRES_PASSWORD", secret, giteav1alpha1.DatabaseSecretPasswordKey),
							common.SecretEnv("POSTGRES_DB", secret, giteav1alpha1.DatabaseSecretDatabaseKey),
							{Name: "PGDATA", Value: "/var/lib/postgresql/data/pgdata"},
						},
						Ports:     []corev1.ContainerPort{{Name: "postgresql", ContainerPort: Port, Protocol: corev1.ProtocolTCP}},
						Resources: pg.Spec.Resources,
						ReadinessProbe: &corev1.Probe{
							ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{
								Command: []string{"sh", "-c", `pg_isready -U "$POSTGRES_USER" -d "$POSTGRES_DB"`},
							}},
							PeriodSeconds: 5,
						},
						SecurityContext: common.ContainerSecurity(),
						VolumeMounts: []corev1.VolumeMount{
							{Name: "data", MountPath: "/var/lib/postgresql/data"},
							{Name: "run", MountPath: "/var/run/postgresql"},
							{Name: "tmp", MountPath: "/tmp"},
						},
					}},
					Volumes: []corev1.Volume{common.EmptyDir("run"), common.EmptyDir("tmp")},
				},
			},
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{
				ObjectMeta: metav1.ObjectMeta{Name: "data", Labels: labels(pg)},
				Spec:       claimSpec(pg),
			}},
		},
	}
}
