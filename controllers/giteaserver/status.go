package giteaserver

import (
	"context"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	giteav1alpha1 "github.com/kdag-dev/kdag/apis/gitea/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/api"
	"github.com/kdag-dev/kdag/pkg/controller"
)

// outputs are the GiteaServer's own status fields.
type outputs struct {
	Version   string                         `json:"version,omitempty"`
	URL       string                         `json:"url,omitempty"`
	Migration *giteav1alpha1.MigrationStatus `json:"migration,omitempty"`
}

// ReportStatus implements controller.StatusReporter: the deployed version (once everything is
// ready), the URL, and the state of the current version's migration.
func (ResourceManager) ReportStatus(_ context.Context, owner client.Object, report controller.Report) (any, error) {
	s := owner.(*giteav1alpha1.GiteaServer)
	out := &outputs{Version: s.Status.Version, URL: URL(s)}
	if report.Ready {
		out.Version = s.Spec.Version
	}
	out.Migration = migrationStatus(s, report.Node("Job", MigrationJobName(s.Name, s.Spec.Version)))
	return out, nil
}

// migrationStatus derives the migration's state from its Job node.
func migrationStatus(s *giteav1alpha1.GiteaServer, node *controller.NodeReport) *giteav1alpha1.MigrationStatus {
	st := &giteav1alpha1.MigrationStatus{Version: s.Spec.Version, State: giteav1alpha1.MigrationPending}
	if node == nil || node.Object == nil {
		return st
	}
	job := &batchv1.Job{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(node.Object.Object, job); err != nil {
		return st
	}
	start := job.CreationTimestamp
	deadline := metav1.NewTime(start.Add(time.Duration(ptrOr(job.Spec.ActiveDeadlineSeconds)) * time.Second))
	st.StartedAt, st.Deadline = &start, &deadline
	switch node.State {
	case api.NodeReady:
		st.State = giteav1alpha1.MigrationSucceeded
	case api.NodeFailed:
		st.State, st.Message = giteav1alpha1.MigrationFailed,
			"the migration Job failed: read its logs, fix the cause, then delete Job "+job.Name+" to run it again"
		for _, c := range job.Status.Conditions {
			if c.Type == batchv1.JobFailed && c.Reason == batchv1.JobReasonDeadlineExceeded {
				st.State, st.Message = giteav1alpha1.MigrationTimedOut,
					"the migration did not finish before spec.migrationTimeout: raise it, then delete Job "+job.Name
			}
		}
	default:
		st.State = giteav1alpha1.MigrationRunning
	}
	return st
}

func ptrOr(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}
