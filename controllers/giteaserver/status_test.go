package giteaserver

import (
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	giteav1alpha1 "github.com/kdag-dev/kdag/apis/gitea/v1alpha1"
	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/controllertest"
)

var created = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// aJob is a migration Job of version 1.27.4 created at created with a 10m deadline
// and the given conditions.
func aJob(name string, conditions ...batchv1.JobCondition) *batchv1.Job {
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, CreationTimestamp: metav1.NewTime(created)},
		Spec:       batchv1.JobSpec{ActiveDeadlineSeconds: ptr.To[int64](600)},
		Status:     batchv1.JobStatus{Conditions: conditions},
	}
}

func TestMigrationStatus(t *testing.T) {
	failed := func(reason string) batchv1.JobCondition {
		return batchv1.JobCondition{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: reason}
	}
	deadline := created.Add(10 * time.Minute)
	const cur = "demo-migrate-1-27-4"
	for _, tc := range []struct {
		name        string
		state       kdagv1alpha1.NodeState
		job         *batchv1.Job
		want        giteav1alpha1.MigrationState
		wantTimes   bool
		wantMessage string // substring; "" means no message
	}{
		{name: "no node", want: giteav1alpha1.MigrationPending},
		{name: "blocked: the Job is not created", state: kdagv1alpha1.NodeBlocked, want: giteav1alpha1.MigrationPending},
		{name: "waiting for the Job", state: kdagv1alpha1.NodeWaiting, job: aJob(cur), want: giteav1alpha1.MigrationRunning, wantTimes: true},
		{name: "Job complete", state: kdagv1alpha1.NodeReady,
			job:  aJob(cur, batchv1.JobCondition{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}),
			want: giteav1alpha1.MigrationSucceeded, wantTimes: true},
		{name: "Job failed", state: kdagv1alpha1.NodeFailed, job: aJob(cur, failed(batchv1.JobReasonBackoffLimitExceeded)),
			want: giteav1alpha1.MigrationFailed, wantTimes: true, wantMessage: "delete Job demo-migrate-1-27-4 to run it again"},
		{name: "Job past its deadline", state: kdagv1alpha1.NodeFailed, job: aJob(cur, failed(batchv1.JobReasonDeadlineExceeded)),
			want: giteav1alpha1.MigrationTimedOut, wantTimes: true, wantMessage: "raise it, then delete Job demo-migrate-1-27-4"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := migrationStatus("1.27.4", tc.state, tc.job)
			if got.Version != "1.27.4" || got.State != tc.want {
				t.Errorf("migration = %s %s, want 1.27.4 %s", got.Version, got.State, tc.want)
			}
			if tc.wantTimes {
				if got.StartedAt == nil || !got.StartedAt.Time.Equal(created) {
					t.Errorf("startedAt = %v, want the Job's creation %v", got.StartedAt, created)
				}
				if got.Deadline == nil || !got.Deadline.Time.Equal(deadline) {
					t.Errorf("deadline = %v, want %v (creation + activeDeadlineSeconds)", got.Deadline, deadline)
				}
			} else if got.StartedAt != nil || got.Deadline != nil {
				t.Errorf("startedAt %v, deadline %v: want none before the Job exists", got.StartedAt, got.Deadline)
			}
			switch {
			case tc.wantMessage == "" && got.Message != "":
				t.Errorf("message = %q, want none", got.Message)
			case tc.wantMessage != "" && !strings.Contains(got.Message, tc.wantMessage):
				t.Errorf("message = %q, want it to say %q", got.Message, tc.wantMessage)
			}
		})
	}
}

func TestReportStatus(t *testing.T) {
	for _, tc := range []struct {
		name        string
		server      *giteav1alpha1.GiteaServer
		ready       bool
		graph       *controllertest.Graph
		wantVersion string
		wantURL     string
		wantState   giteav1alpha1.MigrationState
	}{
		{
			// An upgrade from 1.27.3: the migration runs, the status keeps the old version.
			name:        "upgrade in progress",
			server:      defaulted(func(s *giteav1alpha1.GiteaServer) { s.Spec.Version = "1.27.4" }),
			graph:       controllertest.NewGraph(t, scheme).With(aJob("demo-migrate-1-27-4"), kdagv1alpha1.NodeWaiting),
			wantVersion: "1.27.3", wantURL: "http://demo-http.default.svc:3000/", wantState: giteav1alpha1.MigrationRunning,
		},
		{
			name:        "upgrade done",
			server:      defaulted(func(s *giteav1alpha1.GiteaServer) { s.Spec.Version = "1.27.4" }),
			ready:       true,
			graph:       controllertest.NewGraph(t, scheme).With(aJob("demo-migrate-1-27-4"), kdagv1alpha1.NodeReady),
			wantVersion: "1.27.4", wantURL: "http://demo-http.default.svc:3000/", wantState: giteav1alpha1.MigrationSucceeded,
		},
		{
			// The graph's Job is the previous version's: this version's Job is not in it yet.
			name:        "only another version's Job",
			server:      defaulted(func(s *giteav1alpha1.GiteaServer) { s.Spec.Version = "1.28.0"; withIngressAndAdmin(s) }),
			graph:       controllertest.NewGraph(t, scheme).With(aJob("demo-migrate-1-27-4"), kdagv1alpha1.NodeReady),
			wantVersion: "1.27.3", wantURL: "https://git.example.com/", wantState: giteav1alpha1.MigrationPending,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.server.Status.Version = "1.27.3"
			if err := reportStatus(tc.server, tc.ready, tc.graph); err != nil {
				t.Fatal(err)
			}
			out := &tc.server.Status
			if out.Version != tc.wantVersion || out.URL != tc.wantURL || out.Migration == nil ||
				out.Migration.State != tc.wantState || out.Migration.Version != tc.server.Spec.Version {
				t.Errorf("ReportStatus = %+v (migration %+v), want version %s, url %s, migration %s of %s",
					out, out.Migration, tc.wantVersion, tc.wantURL, tc.wantState, tc.server.Spec.Version)
			}
		})
	}
}
