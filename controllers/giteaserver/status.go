package giteaserver

import (
	"context"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	giteav1alpha1 "github.com/kdag-dev/kdag/apis/gitea/v1alpha1"
	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/controller"
)

// outputs are the GiteaServer's own status fields.
type outputs struct {
	Version   string                         `json:"version,omitempty"`
	URL       string                         `json:"url,omitempty"`
	Migration *giteav1alpha1.MigrationStatus `json:"migration,omitempty"`
}

// ReportStatus implements controller.StatusReporter: the deployed version (once everything is
// ready), the URL, and the migration: the one of an earlier version while it still runs (the
// current one waits for it), else the current version's. A success recorded for the current
// version stays recorded when its Job is gone: the graph does not run it again.
func (ResourceManager) ReportStatus(_ context.Context, owner client.Object, report controller.Report) (any, error) {
	s := owner.(*giteav1alpha1.GiteaServer)
	out := &outputs{Version: s.Status.Version, URL: URL(s)}
	if report.Ready {
		out.Version = s.Spec.Version
	}
	prev := s.Status.Migration
	if prev != nil && prev.Version != s.Spec.Version && migrating(prev.State) {
		if old := report.Node("Job", MigrationJobName(s.Name, prev.Version)); old != nil && old.State != kdagv1alpha1.NodeReady {
			out.Migration = migrationStatus(prev.Version, old)
			return out, nil
		}
	}
	current := report.Node("Job", MigrationJobName(s.Name, s.Spec.Version))
	if prev != nil && prev.Version == s.Spec.Version && prev.State == giteav1alpha1.MigrationSucceeded &&
		(current == nil || current.Object == nil) {
		out.Migration = prev.DeepCopy()
		return out, nil
	}
	out.Migration = migrationStatus(s.Spec.Version, current)
	return out, nil
}

// migrationStatus derives the state of version's migration from its Job node.
func migrationStatus(version string, node *controller.NodeReport) *giteav1alpha1.MigrationStatus {
	st := &giteav1alpha1.MigrationStatus{Version: version, State: giteav1alpha1.MigrationPending}
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
	case kdagv1alpha1.NodeReady:
		st.State = giteav1alpha1.MigrationSucceeded
	case kdagv1alpha1.NodeFailed:
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
