package giteaserver

import (
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	giteav1alpha1 "github.com/kdag-dev/kdag/apis/gitea/v1alpha1"
	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/controller"
)

var created = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// migrationJobNode is the report of the migration Job node of version 1.27.4 in state, its Job
// created at created with a 10m deadline and the given conditions; job false means no object.
func migrationJobNode(t *testing.T, state kdagv1alpha1.NodeState, job bool, conditions ...batchv1.JobCondition) *controller.NodeReport {
	t.Helper()
	n := &controller.NodeReport{
		ID:    controller.NodeID{Group: "batch", Kind: "Job", Namespace: "default", Name: "demo-migrate-1-27-4"},
		State: state,
	}
	if !job {
		return n
	}
	j := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "demo-migrate-1-27-4", CreationTimestamp: metav1.NewTime(created)},
		Spec:       batchv1.JobSpec{ActiveDeadlineSeconds: ptr.To[int64](600)},
		Status:     batchv1.JobStatus{Conditions: conditions},
	}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(j)
	if err != nil {
		t.Fatal(err)
	}
	n.Object = &unstructured.Unstructured{Object: u}
	return n
}

func TestMigrationStatus(t *testing.T) {
	failed := func(reason string) batchv1.JobCondition {
		return batchv1.JobCondition{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: reason}
	}
	deadline := created.Add(10 * time.Minute)
	for _, tc := range []struct {
		name        string
		node        *controller.NodeReport
		want        giteav1alpha1.MigrationState
		wantTimes   bool
		wantMessage string // substring; "" means no message
	}{
		{name: "no node", node: nil, want: giteav1alpha1.MigrationPending},
		{name: "blocked: the Job is not created", node: migrationJobNode(t, kdagv1alpha1.NodeBlocked, false), want: giteav1alpha1.MigrationPending},
		{name: "waiting for the Job", node: migrationJobNode(t, kdagv1alpha1.NodeWaiting, true), want: giteav1alpha1.MigrationRunning, wantTimes: true},
		{name: "Job complete", node: migrationJobNode(t, kdagv1alpha1.NodeReady, true,
			batchv1.JobCondition{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}),
			want: giteav1alpha1.MigrationSucceeded, wantTimes: true},
		{name: "Job failed", node: migrationJobNode(t, kdagv1alpha1.NodeFailed, true, failed(batchv1.JobReasonBackoffLimitExceeded)),
			want: giteav1alpha1.MigrationFailed, wantTimes: true, wantMessage: "delete Job demo-migrate-1-27-4 to run it again"},
		{name: "Job past its deadline", node: migrationJobNode(t, kdagv1alpha1.NodeFailed, true, failed(batchv1.JobReasonDeadlineExceeded)),
			want: giteav1alpha1.MigrationTimedOut, wantTimes: true, wantMessage: "raise it, then delete Job demo-migrate-1-27-4"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := defaulted(func(s *giteav1alpha1.GiteaServer) { s.Spec.Version = "1.27.4" })
			got := migrationStatus(s.Spec.Version, tc.node)
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
		report      controller.Report
		wantVersion string
		wantURL     string
		wantState   giteav1alpha1.MigrationState
	}{
		{
			// An upgrade from 1.27.3: the migration runs, the status keeps the old version.
			name:        "upgrade in progress",
			server:      defaulted(func(s *giteav1alpha1.GiteaServer) { s.Spec.Version = "1.27.4" }),
			report:      controller.Report{Nodes: []controller.NodeReport{*migrationJobNode(t, kdagv1alpha1.NodeWaiting, true)}},
			wantVersion: "1.27.3", wantURL: "http://demo-http.default.svc:3000/", wantState: giteav1alpha1.MigrationRunning,
		},
		{
			name:        "upgrade done",
			server:      defaulted(func(s *giteav1alpha1.GiteaServer) { s.Spec.Version = "1.27.4" }),
			report:      controller.Report{Ready: true, Nodes: []controller.NodeReport{*migrationJobNode(t, kdagv1alpha1.NodeReady, true)}},
			wantVersion: "1.27.4", wantURL: "http://demo-http.default.svc:3000/", wantState: giteav1alpha1.MigrationSucceeded,
		},
		{
			// The report's Job is the previous version's: this version's Job is not in it yet.
			name:        "only another version's Job",
			server:      defaulted(func(s *giteav1alpha1.GiteaServer) { s.Spec.Version = "1.28.0"; withIngressAndAdmin(s) }),
			report:      controller.Report{Nodes: []controller.NodeReport{*migrationJobNode(t, kdagv1alpha1.NodeReady, true)}},
			wantVersion: "1.27.3", wantURL: "https://git.example.com/", wantState: giteav1alpha1.MigrationPending,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.server.Status.Version = "1.27.3"
			got, err := ResourceManager{}.ReportStatus(t.Context(), tc.server, tc.report)
			if err != nil {
				t.Fatal(err)
			}
			out := got.(*outputs)
			if out.Version != tc.wantVersion || out.URL != tc.wantURL || out.Migration == nil ||
				out.Migration.State != tc.wantState || out.Migration.Version != tc.server.Spec.Version {
				t.Errorf("ReportStatus = %+v (migration %+v), want version %s, url %s, migration %s of %s",
					out, out.Migration, tc.wantVersion, tc.wantURL, tc.wantState, tc.server.Spec.Version)
			}
		})
	}
}
