package postgresql

import (
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	giteav1alpha1 "github.com/kdag-dev/kdag/apis/gitea/v1alpha1"
	"github.com/kdag-dev/kdag/controllers/common"
	"github.com/kdag-dev/kdag/pkg/controller"
)

// A PostgreSQL whose storage's deletion policy is Delete loses its data claim with it. Before
// that, its teardown runs a dump of the database (a controller.BeforeDelete Job) into a claim of
// its own that is kept (controller.Keep): the dump outlives the PostgreSQL, its data claim and
// its namespace's other objects, and is found again by name. The claim is kept rather than
// deleted because that is the point of it, and a claim rather than an emptyDir or the data claim
// because only a claim of its own survives the teardown: the Job's pod and the data claim go
// with the PostgreSQL. Orphaned with kdag.dev/adopt naming the PostgreSQL, the claim is adopted
// again (with the dumps it holds) by a PostgreSQL of the same name with deletionPolicy Delete,
// and each dump is a new file, so none overwrites another. Under Retain the data claim itself is
// kept, and there is no dump.

// DumpClaimName is the name of the kept claim that the dump before deletion writes to.
func DumpClaimName(pgName string) string { return pgName + "-dump" }

// DumpJobName is the name of the Job that dumps the database before a PostgreSQL with
// deletionPolicy Delete is deleted.
func DumpJobName(pgName string) string { return pgName + "-dump" }

// DumpTimeout bounds the dump: the Job's activeDeadlineSeconds, and the BeforeDelete timeout
// after which the teardown is Stalled (the PostgreSQL's data is not deleted until the dump
// completes, is run again by deleting its Job, or is skipped with kdag.dev/before-delete=skip).
const DumpTimeout = 30 * time.Minute

// dumpMountPath is where the dump claim is mounted in the Job's pod.
const dumpMountPath = "/dump"

// dumpClaim is the kept claim of the dumps, as large as the data claim (a dump in pg_dump's
// custom format, compressed, is smaller than the data directory it comes from).
func dumpClaim(pg *giteav1alpha1.PostgreSQL) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: DumpClaimName(pg.Name), Labels: common.Labels("postgresql", pg.Name, "dump")},
		Spec:       claimSpec(pg),
	}
}

// dumpJob runs pg_dump against the running server through its Service, with the credentials of
// the generated Secret, into a new file on the dump claim named after the database and the time
// in UTC ("gitea-20260126T031200Z.dump", pg_dump's custom format: restore it with pg_restore).
// The file is written under a temporary name and renamed once complete, so that a failed or
// interrupted dump never looks like a good one.
func dumpJob(pg *giteav1alpha1.PostgreSQL) *batchv1.Job {
	secret := CredentialsSecretName(pg.Name)
	dump := `set -eu
f="` + dumpMountPath + `/${PGDATABASE}-$(date -u +%Y%m%dT%H%M%SZ).dump"
pg_dump --format=custom --file="$f.partial"
mv "$f.partial" "$f"
echo "dumped database $PGDATABASE to the claim ` + DumpClaimName(pg.Name) + `: ${f#` + dumpMountPath + `/}"`
	lbls := common.Labels("postgresql", pg.Name, "dump")
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: DumpJobName(pg.Name), Labels: lbls},
		Spec: batchv1.JobSpec{
			BackoffLimit:          ptr.To[int32](2),
			ActiveDeadlineSeconds: ptr.To(int64(DumpTimeout.Seconds())),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: lbls},
				Spec: corev1.PodSpec{
					RestartPolicy:   corev1.RestartPolicyNever,
					SecurityContext: common.PodSecurity(postgresUID),
					Containers: []corev1.Container{{
						Name:    "dump",
						Image:   common.Image(pg.Spec.Image, pg.Spec.Version),
						Command: []string{"sh", "-c", dump},
						Env: []corev1.EnvVar{
							common.SecretEnv("PGHOST", secret, giteav1alpha1.DatabaseSecretHostKey),
							common.SecretEnv("PGPORT", secret, giteav1alpha1.DatabaseSecretPortKey),
							common.SecretEnv("PGUSER", secret, giteav1alpha1.DatabaseSecretUserKey),
							common.SecretEnv("PGPASSWORD", secret, giteav1alpha1.DatabaseSecretPasswordKey),
							common.SecretEnv("PGDATABASE", secret, giteav1alpha1.DatabaseSecretDatabaseKey),
						},
						SecurityContext: common.ContainerSecurity(),
						VolumeMounts: []corev1.VolumeMount{
							{Name: "dump", MountPath: dumpMountPath},
							{Name: "tmp", MountPath: "/tmp"},
						},
					}},
					Volumes: []corev1.Volume{
						{Name: "dump", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{
							ClaimName: DumpClaimName(pg.Name)}}},
						common.EmptyDir("tmp"),
					},
				},
			},
		},
	}
}

// addDump adds, for a PostgreSQL whose storage's deletion policy is Delete, the kept dump claim
// and the BeforeDelete Job that dumps into it, after the server (the Job reads the database
// through it; the Builder infers its edges to the Secret and the claim from its references).
func addDump(pg *giteav1alpha1.PostgreSQL, b *controller.Graph, server controller.Node) {
	if pg.Spec.Storage.DeletionPolicy != giteav1alpha1.StorageDelete {
		return
	}
	claim := b.Add(dumpClaim(pg), controller.Keep())
	b.Add(dumpJob(pg), controller.BeforeDelete(DumpTimeout), controller.After(server, claim))
}
