package giteaserver

import (
	"context"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	giteav1alpha1 "github.com/kdag-dev/kdag/apis/gitea/v1alpha1"
	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/controller"
)

// ReportStatus implements controller.StatusReporter: the deployed version (once everything is
// ready), the URL, and the migration: the one of an earlier version while it still runs (the
// current one waits for it), else the current version's. A success recorded for the current
// version stays recorded when its Job is gone: the graph does not run it again.
func (ResourceManager) ReportStatus(_ context.Context, s *giteav1alpha1.GiteaServer, report controller.Report) error {
	return reportStatus(s, report.Ready, report)
}

// graph is what reportStatus reads of a controller.Report: a node's state and its object.
type graph interface {
	State(obj client.Object) kdagv1alpha1.NodeState
	Get(obj client.Object) (bool, error)
}

// reportStatus sets s's own status from the graph of a reconcile (ready: every node Ready).
func reportStatus(s *giteav1alpha1.GiteaServer, ready bool, g graph) error {
	s.Status.URL = URL(s)
	if ready {
		s.Status.Version = s.Spec.Version
	}
	prev := s.Status.Migration
	if prev != nil && prev.Version != s.Spec.Version && migrating(prev.State) {
		old, state, err := migrationNode(s, prev.Version, g)
		if err != nil {
			return err
		}
		if state != "" && state != kdagv1alpha1.NodeReady {
			s.Status.Migration = migrationStatus(prev.Version, state, old)
			return nil
		}
	}
	current, state, err := migrationNode(s, s.Spec.Version, g)
	if err != nil {
		return err
	}
	if prev != nil && prev.Version == s.Spec.Version && prev.State == giteav1alpha1.MigrationSucceeded && current == nil {
		return nil // recorded success, its Job gone: the status says so already
	}
	s.Status.Migration = migrationStatus(s.Spec.Version, state, current)
	return nil
}

// migrationNode returns the migration Job of version as the graph holds it (nil without an
// object) and its node's state ("" when the graph has no such node).
func migrationNode(s *giteav1alpha1.GiteaServer, version string, g graph) (*batchv1.Job, kdagv1alpha1.NodeState, error) {
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: MigrationJobName(s.Name, version)}}
	state := g.State(job)
	found, err := g.Get(job)
	if err != nil || !found {
		return nil, state, err
	}
	return job, state, nil
}

// migrationStatus derives the state of version's migration from its Job and the Job node's
// state; job is nil when the Job does not exist (yet).
func migrationStatus(version string, state kdagv1alpha1.NodeState, job *batchv1.Job) *giteav1alpha1.MigrationStatus {
	st := &giteav1alpha1.MigrationStatus{Version: version, State: giteav1alpha1.MigrationPending}
	if job == nil {
		return st
	}
	start := job.CreationTimestamp
	deadline := metav1.NewTime(start.Add(time.Duration(ptrOr(job.Spec.ActiveDeadlineSeconds)) * time.Second))
	st.StartedAt, st.Deadline = &start, &deadline
	switch state {
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
