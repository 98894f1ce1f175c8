package postgresql

import (
	"slices"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	giteav1alpha1 "github.com/kdag-dev/kdag/apis/gitea/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/graph"
	"github.com/kdag-dev/kdag/pkg/plan"
)

// TestDump_OnlyWithDeletionPolicyDelete: a PostgreSQL with deletionPolicy Delete has a kept dump
// claim and a BeforeDelete Job that dumps the database into it through the Service, with the
// generated credentials (never a literal password); under Retain (and unset) there is neither.
func TestDump_OnlyWithDeletionPolicyDelete(t *testing.T) {
	for _, tc := range []struct {
		policy   giteav1alpha1.StorageDeletionPolicy
		wantDump bool
	}{{giteav1alpha1.StorageRetain, false}, {"", false}, {giteav1alpha1.StorageDelete, true}} {
		t.Run(string(tc.policy), func(t *testing.T) {
			pg := defaulted(func(pg *giteav1alpha1.PostgreSQL) {
				pg.Spec.Storage.DeletionPolicy = tc.policy
				pg.Spec.Storage.Size = resource.MustParse("20Gi")
			})
			nodes := map[string]plan.PlannedNode{}
			for _, n := range planOf(t, pg).Nodes {
				nodes[n.ID.String()] = n
			}
			claimNode, hasClaim := nodes["PersistentVolumeClaim default/demo-postgresql-dump"]
			jobNode, hasJob := nodes["Job default/demo-postgresql-dump"]
			if hasClaim != tc.wantDump || hasJob != tc.wantDump {
				t.Fatalf("dump claim %v, dump Job %v; want both %v", hasClaim, hasJob, tc.wantDump)
			}
			if !tc.wantDump {
				return
			}
			if !claimNode.Keep || claimNode.Adopt {
				t.Errorf("dump claim keep %v adopt %v, want kept (it must outlive the PostgreSQL) and not adopting others' claims", claimNode.Keep, claimNode.Adopt)
			}
			claim := claimNode.Object.(*corev1.PersistentVolumeClaim)
			if !claim.Spec.Resources.Requests.Storage().Equal(resource.MustParse("20Gi")) {
				t.Errorf("dump claim size %v, want the data's 20Gi", claim.Spec.Resources.Requests.Storage())
			}
			if jobNode.BeforeDelete != DumpTimeout {
				t.Errorf("dump Job BeforeDelete %v, want %v", jobNode.BeforeDelete, DumpTimeout)
			}
			for _, blocker := range []string{"StatefulSet default/demo-postgresql", "PersistentVolumeClaim default/demo-postgresql-dump",
				"Secret default/demo-postgresql-credentials"} {
				if !slices.ContainsFunc(jobNode.Blockers, func(id graph.NodeID) bool { return id.String() == blocker }) {
					t.Errorf("dump Job blockers %v, want %s", jobNode.Blockers, blocker)
				}
			}
			job := jobNode.Object.(*batchv1.Job)
			if got := *job.Spec.ActiveDeadlineSeconds; got != int64(DumpTimeout.Seconds()) {
				t.Errorf("activeDeadlineSeconds %d, want the hook's timeout", got)
			}
			pod := job.Spec.Template.Spec
			c := pod.Containers[0]
			if c.Image != "docker.io/library/postgres:17" || !strings.Contains(strings.Join(c.Command, " "), "pg_dump --format=custom") {
				t.Errorf("dump container %s %v, want pg_dump of the server's image", c.Image, c.Command)
			}
			for _, e := range c.Env {
				if e.Value != "" || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef.Name != "demo-postgresql-credentials" {
					t.Errorf("env %s = %+v, want it from the credentials Secret", e.Name, e)
				}
			}
			if pod.Volumes[0].PersistentVolumeClaim == nil || pod.Volumes[0].PersistentVolumeClaim.ClaimName != "demo-postgresql-dump" ||
				c.VolumeMounts[0].MountPath != "/dump" {
				t.Errorf("volumes %+v mounts %+v, want the dump claim at /dump", pod.Volumes, c.VolumeMounts)
			}
		})
	}
}
