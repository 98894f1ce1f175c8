package giteaserver

import (
	"github.com/pkg/errors"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	giteav1alpha1 "github.com/kdag-dev/kdag/apis/gitea/v1alpha1"
	"github.com/kdag-dev/kdag/controllers/common"
	"github.com/kdag-dev/kdag/pkg/resources"
)

// migrationJob migrates the database to spec.version (kubegres-style blocking operation: the
// server waits for it; its state and deadline are in status.migration). The Job's deadline is
// spec.migrationTimeout. It is create-only: a Job's template is immutable, and the Job of a
// version runs once.
func migrationJob(s *giteav1alpha1.GiteaServer) *batchv1.Job {
	return migrationJobOf(s, s.Spec.Version)
}

// migrationJobOf is the migration Job of version: its name is all that counts for one already
// running (create-only, Finished).
func migrationJobOf(s *giteav1alpha1.GiteaServer, version string) *batchv1.Job {
	migrate := corev1.Container{Name: "migrate", Command: []string{"gitea", "migrate"}}
	scratch := corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Name:   MigrationJobName(s.Name, version),
			Labels: common.WithVersion(labels(s), version),
		},
		Spec: batchv1.JobSpec{
			BackoffLimit:          ptr.To[int32](2),
			ActiveDeadlineSeconds: ptr.To(int64(s.Spec.MigrationTimeout.Seconds())),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: podMeta(s, "migration"),
				Spec:       withRestartNever(podSpec(s, scratch, migrate)),
			},
		},
	}
}

// adminJob creates the administrator from the user's admin Secret once the server runs.
func adminJob(s *giteav1alpha1.GiteaServer) *batchv1.Job {
	secret := s.Spec.Admin.SecretRef.Name
	create := corev1.Container{
		Name: "create-admin",
		Command: []string{"sh", "-c", `gitea admin user create --admin --username "$ADMIN_USERNAME" ` +
			`--password "$ADMIN_PASSWORD" --email "$ADMIN_EMAIL" --must-change-password=false || ` +
			`gitea admin user list --admin | grep -q "$ADMIN_USERNAME"`},
	}
	claim := corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: dataClaimName(s.Name)}}
	spec := withRestartNever(podSpec(s, claim, create))
	spec.Containers[0].Env = append(spec.Containers[0].Env,
		common.SecretEnv("ADMIN_USERNAME", secret, giteav1alpha1.AdminSecretUsernameKey),
		common.SecretEnv("ADMIN_PASSWORD", secret, giteav1alpha1.AdminSecretPasswordKey),
		common.SecretEnv("ADMIN_EMAIL", secret, giteav1alpha1.AdminSecretEmailKey),
	)
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: s.Name + "-admin", Labels: labels(s)},
		Spec: batchv1.JobSpec{
			BackoffLimit: ptr.To[int32](3),
			Template:     corev1.PodTemplateSpec{ObjectMeta: podMeta(s, "admin"), Spec: spec},
		},
	}
}

func withRestartNever(spec corev1.PodSpec) corev1.PodSpec {
	spec.RestartPolicy = corev1.RestartPolicyNever
	return spec
}

// jobFinished is the readiness of a migration Job of an earlier version that the current one
// waits for: done when it completed or failed (a failed old migration must not hold the new
// one, which the user asked for, perhaps to fix it).
func jobFinished(live client.Object) (bool, error) {
	job, ok := live.(*batchv1.Job)
	if !ok {
		return false, errors.Errorf("%T is not a Job", live)
	}
	for _, c := range job.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return true, nil
		}
	}
	return false, &resources.NotReadyError{Reason: "the migration of version " + job.Labels["app.kubernetes.io/version"] +
		" still runs: the next one waits for it"}
}
