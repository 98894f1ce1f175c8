package resources

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestReady(t *testing.T) {
	tests := []struct {
		name        string
		manifest    string
		wantStatus  string
		wantMessage string // substring, optional
		// wantInherited: the status is an earlier object's (Readiness.Inherited)
		wantInherited bool
	}{
		{name: "deployment rolling out", wantStatus: StatusInProgress, wantMessage: "Updated: 1/3", manifest: `
apiVersion: apps/v1
kind: Deployment
metadata: {namespace: ns, name: web, generation: 2}
spec: {replicas: 3}
status: {observedGeneration: 2, replicas: 3, updatedReplicas: 1, readyReplicas: 3, availableReplicas: 3}
`},
		{name: "deployment with stale observedGeneration", wantStatus: StatusInProgress, wantMessage: "observed generation is 1", manifest: `
apiVersion: apps/v1
kind: Deployment
metadata: {namespace: ns, name: web, generation: 2}
spec: {replicas: 1}
status: {observedGeneration: 1, replicas: 1, updatedReplicas: 1, readyReplicas: 1, availableReplicas: 1}
`},
		{name: "deployment updated but not available", wantStatus: StatusInProgress, wantMessage: "Available: 1/3", manifest: `
apiVersion: apps/v1
kind: Deployment
metadata: {namespace: ns, name: web, generation: 2}
spec: {replicas: 3}
status: {observedGeneration: 2, replicas: 3, updatedReplicas: 3, readyReplicas: 1, availableReplicas: 1}
`},
		{name: "deployment available", wantStatus: StatusCurrent, manifest: `
apiVersion: apps/v1
kind: Deployment
metadata: {namespace: ns, name: web, generation: 2}
spec: {replicas: 3, progressDeadlineSeconds: 600}
status:
  observedGeneration: 2
  replicas: 3
  updatedReplicas: 3
  readyReplicas: 3
  availableReplicas: 3
  conditions:
  - {type: Available, status: "True"}
  - {type: Progressing, status: "True", reason: NewReplicaSetAvailable}
`},
		{name: "deployment past its progress deadline", wantStatus: StatusFailed, manifest: `
apiVersion: apps/v1
kind: Deployment
metadata: {namespace: ns, name: web, generation: 2}
spec: {replicas: 3, progressDeadlineSeconds: 600}
status:
  observedGeneration: 2
  replicas: 3
  updatedReplicas: 1
  conditions:
  - {type: Progressing, status: "False", reason: ProgressDeadlineExceeded}
`},
		{name: "job complete", wantStatus: StatusCurrent, manifest: `
apiVersion: batch/v1
kind: Job
metadata: {namespace: ns, name: migrate, generation: 1}
status:
  startTime: "2026-01-01T00:00:00Z"
  succeeded: 1
  conditions: [{type: Complete, status: "True"}]
`},
		{name: "job running", wantStatus: StatusInProgress, wantMessage: "Job not complete", manifest: `
apiVersion: batch/v1
kind: Job
metadata: {namespace: ns, name: migrate, generation: 1}
status: {startTime: "2026-01-01T00:00:00Z", active: 1}
`},
		{name: "job not started", wantStatus: StatusInProgress, manifest: `
apiVersion: batch/v1
kind: Job
metadata: {namespace: ns, name: migrate, generation: 1}
`},
		{name: "job failed", wantStatus: StatusFailed, wantMessage: "Job Failed", manifest: `
apiVersion: batch/v1
kind: Job
metadata: {namespace: ns, name: migrate, generation: 1}
status:
  startTime: "2026-01-01T00:00:00Z"
  failed: 6
  conditions: [{type: Failed, status: "True", reason: BackoffLimitExceeded}]
`},
		{name: "service", wantStatus: StatusCurrent, manifest: `
apiVersion: v1
kind: Service
metadata: {namespace: ns, name: web}
spec: {type: ClusterIP, clusterIP: 10.0.0.1, ports: [{port: 80}]}
`},
		{name: "load balancer without an IP", wantStatus: StatusInProgress, manifest: `
apiVersion: v1
kind: Service
metadata: {namespace: ns, name: web}
spec: {type: LoadBalancer, ports: [{port: 80}]}
`},
		{name: "configmap", wantStatus: StatusCurrent, manifest: `
apiVersion: v1
kind: ConfigMap
metadata: {namespace: ns, name: cfg}
data: {a: b}
`},
		{name: "custom resource ready and observed", wantStatus: StatusCurrent, manifest: `
apiVersion: testing.kdag.dev/v1alpha1
kind: Widget
metadata: {namespace: ns, name: w, generation: 4}
status:
  observedGeneration: 4
  conditions: [{type: Ready, status: "True", reason: Done}]
`},
		{name: "custom resource ready but stale", wantStatus: StatusInProgress, wantMessage: "generation is 4", manifest: `
apiVersion: testing.kdag.dev/v1alpha1
kind: Widget
metadata: {namespace: ns, name: w, generation: 4}
status:
  observedGeneration: 3
  conditions: [{type: Ready, status: "True", reason: Done}]
`},
		{name: "custom resource not ready", wantStatus: StatusInProgress, wantMessage: "waiting for database", manifest: `
apiVersion: testing.kdag.dev/v1alpha1
kind: Widget
metadata: {namespace: ns, name: w, generation: 4}
status:
  observedGeneration: 4
  conditions: [{type: Ready, status: "False", reason: Waiting, message: waiting for database}]
`},
		{name: "custom resource stalled", wantStatus: StatusFailed, wantMessage: "bad spec", manifest: `
apiVersion: testing.kdag.dev/v1alpha1
kind: Widget
metadata: {namespace: ns, name: w, generation: 4}
status:
  observedGeneration: 4
  conditions: [{type: Stalled, status: "True", reason: Invalid, message: bad spec}]
`},
		{name: "pvc bound", wantStatus: StatusCurrent, manifest: `
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {namespace: ns, name: data}
status: {phase: Bound}
`},
		// Pending is ready (WaitForFirstConsumer binds only once the consumer's pod is scheduled).
		{name: "pvc pending", wantStatus: StatusCurrent, wantMessage: "Pending", manifest: `
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {namespace: ns, name: data}
status: {phase: Pending}
`},
		{name: "pvc without status yet", wantStatus: StatusCurrent, wantMessage: "Pending", manifest: `
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {namespace: ns, name: data}
`},
		{name: "pvc lost", wantStatus: StatusFailed, wantMessage: "Lost", manifest: `
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {namespace: ns, name: data}
status: {phase: Lost}
`},
		{name: "pvc terminating", wantStatus: StatusTerminating, manifest: `
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {namespace: ns, name: data, deletionTimestamp: "2026-01-01T00:00:00Z"}
status: {phase: Bound}
`},
		{name: "statefulset ready", wantStatus: StatusCurrent, manifest: `
apiVersion: apps/v1
kind: StatefulSet
metadata: {namespace: ns, name: db, generation: 1}
spec: {replicas: 2}
status: {observedGeneration: 1, replicas: 2, readyReplicas: 2, currentReplicas: 2, updatedReplicas: 2,
  currentRevision: db-1, updateRevision: db-1}
`},
		{name: "statefulset not ready", wantStatus: StatusInProgress, wantMessage: "Ready: 1/2", manifest: `
apiVersion: apps/v1
kind: StatefulSet
metadata: {namespace: ns, name: db, generation: 1}
spec: {replicas: 2}
status: {observedGeneration: 1, replicas: 2, readyReplicas: 1, currentReplicas: 2, updatedReplicas: 2,
  currentRevision: db-1, updateRevision: db-1}
`},
		{name: "statefulset rolling to a new revision", wantStatus: StatusInProgress, manifest: `
apiVersion: apps/v1
kind: StatefulSet
metadata: {namespace: ns, name: db, generation: 2}
spec: {replicas: 2}
status: {observedGeneration: 2, replicas: 2, readyReplicas: 2, currentReplicas: 2, updatedReplicas: 1,
  currentRevision: db-1, updateRevision: db-2}
`},
		{name: "statefulset with an earlier object's status (re-created)", wantStatus: StatusInProgress, wantInherited: true,
			wantMessage: "observedGeneration 2, generation 1", manifest: `
apiVersion: apps/v1
kind: StatefulSet
metadata: {namespace: ns, name: db, generation: 1}
spec: {replicas: 1}
status: {observedGeneration: 2, replicas: 1, readyReplicas: 1, currentReplicas: 1, updatedReplicas: 1,
  currentRevision: db-1, updateRevision: db-1}
`},
		{name: "statefulset being deleted, generation bumped by the deletion", wantStatus: StatusTerminating, manifest: `
apiVersion: apps/v1
kind: StatefulSet
metadata: {namespace: ns, name: db, generation: 2, deletionTimestamp: "2026-01-01T00:00:00Z", finalizers: [orphan]}
spec: {replicas: 1}
status: {observedGeneration: 3, replicas: 1, readyReplicas: 1, currentReplicas: 1, updatedReplicas: 1,
  currentRevision: db-1, updateRevision: db-1}
`},
		{name: "terminating", wantStatus: StatusTerminating, manifest: `
apiVersion: v1
kind: ConfigMap
metadata: {namespace: ns, name: cfg, deletionTimestamp: "2026-01-01T00:00:00Z"}
`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Ready(obj(t, tt.manifest))
			if err != nil {
				t.Fatal(err)
			}
			if got.Status != tt.wantStatus {
				t.Errorf("Status = %q (%s), want %q", got.Status, got.Message, tt.wantStatus)
			}
			if got.Ready != (tt.wantStatus == StatusCurrent) {
				t.Errorf("Ready = %v with Status %q", got.Ready, got.Status)
			}
			if got.Inherited != tt.wantInherited {
				t.Errorf("Inherited = %v, want %v", got.Inherited, tt.wantInherited)
			}
			if !strings.Contains(got.Message, tt.wantMessage) {
				t.Errorf("Message = %q, want it to contain %q", got.Message, tt.wantMessage)
			}
		})
	}
}

func TestReady_NotFound(t *testing.T) {
	got, err := Ready(nil)
	if err != nil || got.Ready || got.Status != StatusNotFound {
		t.Fatalf("Ready(nil) = %+v, %v; want not ready, NotFound, no error", got, err)
	}
}

func TestReady_MalformedStatusIsAnError(t *testing.T) {
	_, err := Ready(obj(t, `
apiVersion: testing.kdag.dev/v1alpha1
kind: Widget
metadata: {namespace: ns, name: w, generation: 1}
status: {observedGeneration: 1, conditions: not-a-list}
`))
	if err == nil || !strings.Contains(err.Error(), "Widget ns/w") {
		t.Fatalf("error = %v, want one naming Widget ns/w", err)
	}
}

// TestTypedReady_AgreesWithKstatus: for each kind TypedReady answers without a conversion, its
// answer is Ready's (kstatus') on the unstructured form, live and being deleted; other objects are
// left to Ready.
func TestTypedReady_AgreesWithKstatus(t *testing.T) {
	meta := func() metav1.ObjectMeta { return metav1.ObjectMeta{Namespace: "ns", Name: "x", Generation: 3} }
	objects := []Object{
		&corev1.ConfigMap{ObjectMeta: meta()},
		&corev1.Secret{ObjectMeta: meta()},
		&corev1.ServiceAccount{ObjectMeta: meta()},
		&rbacv1.Role{ObjectMeta: meta()},
		&rbacv1.RoleBinding{ObjectMeta: meta()},
		&rbacv1.ClusterRole{ObjectMeta: meta()},
		&rbacv1.ClusterRoleBinding{ObjectMeta: meta()},
	}
	gvks := []schema.GroupVersionKind{
		corev1.SchemeGroupVersion.WithKind("ConfigMap"), corev1.SchemeGroupVersion.WithKind("Secret"),
		corev1.SchemeGroupVersion.WithKind("ServiceAccount"), rbacv1.SchemeGroupVersion.WithKind("Role"),
		rbacv1.SchemeGroupVersion.WithKind("RoleBinding"), rbacv1.SchemeGroupVersion.WithKind("ClusterRole"),
		rbacv1.SchemeGroupVersion.WithKind("ClusterRoleBinding"),
	}
	for i, obj := range objects {
		for _, deleting := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/deleting=%v", gvks[i].Kind, deleting), func(t *testing.T) {
				if deleting {
					obj.SetDeletionTimestamp(&metav1.Time{Time: time.Unix(1, 0)})
					obj.SetFinalizers([]string{"example.com/hold"})
				}
				got, ok := TypedReady(obj)
				if !ok {
					t.Fatal("TypedReady did not answer")
				}
				u, err := ToUnstructured(obj, gvks[i])
				if err != nil {
					t.Fatal(err)
				}
				want, err := Ready(u)
				if err != nil {
					t.Fatal(err)
				}
				if got != want {
					t.Errorf("TypedReady = %+v, kstatus (Ready) = %+v", got, want)
				}
			})
		}
	}
	for _, obj := range []Object{&corev1.Service{}, &corev1.PersistentVolumeClaim{}, (*corev1.ConfigMap)(nil),
		&unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap"}}} {
		if r, ok := TypedReady(obj); ok {
			t.Errorf("TypedReady(%T) answered %+v, want no answer (Ready's job)", obj, r)
		}
	}
}

// TestGenerationObserved: what a custom resource's status must say before kstatus' verdict is
// trusted (controller.Options.ReadyWhen documents the rule).
func TestGenerationObserved(t *testing.T) {
	tests := []struct {
		name   string
		status map[string]any
		want   bool
	}{
		{name: "no status", want: false},
		{name: "empty status", status: map[string]any{}, want: false},
		{name: "observedGeneration of another generation", status: map[string]any{"observedGeneration": int64(2)}, want: false},
		{name: "observedGeneration of this generation", status: map[string]any{"observedGeneration": int64(3)}, want: true},
		{name: "a condition of another generation (cert-manager style)",
			status: map[string]any{"conditions": []any{map[string]any{"type": "Ready", "status": "True", "observedGeneration": int64(2)}}}, want: false},
		{name: "conditions of this generation",
			status: map[string]any{"conditions": []any{map[string]any{"type": "Ready", "status": "True", "observedGeneration": int64(3)}}}, want: true},
		{name: "a status that names no generation is kstatus' to judge",
			status: map[string]any{"phase": "Running"}, want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u := &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"generation": int64(3)}}}
			if tt.status != nil {
				u.Object["status"] = tt.status
			}
			if got := GenerationObserved(u); got != tt.want {
				t.Errorf("GenerationObserved = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestFailure: the condition that says an object failed for good, with the object's reason and
// message; none for a progressing or ready object.
func TestFailure(t *testing.T) {
	cond := func(typ, status, reason, msg string) any {
		return map[string]any{"type": typ, "status": status, "reason": reason, "message": msg}
	}
	tests := []struct {
		name                string
		conditions          []any
		wantReason, wantMsg string
		wantOK              bool
	}{
		{name: "no status"},
		{name: "complete Job", conditions: []any{cond("Complete", "True", "Completed", "done")}},
		{name: "failed Job", conditions: []any{cond("Complete", "False", "", ""), cond("Failed", "True", "BackoffLimitExceeded", "Job has reached the specified backoff limit")},
			wantReason: "BackoffLimitExceeded", wantMsg: "Job has reached the specified backoff limit", wantOK: true},
		{name: "Failed=False is no failure", conditions: []any{cond("Failed", "False", "Retrying", "")}},
		{name: "Stalled resource", conditions: []any{cond("Stalled", "True", "Invalid", "use a shorter name")},
			wantReason: "Invalid", wantMsg: "use a shorter name", wantOK: true},
		{name: "Deployment past its progress deadline", conditions: []any{cond("Available", "True", "MinimumReplicasAvailable", ""), cond("Progressing", "False", "ProgressDeadlineExceeded", "ReplicaSet web-1 has timed out progressing.")},
			wantReason: "ProgressDeadlineExceeded", wantMsg: "ReplicaSet web-1 has timed out progressing.", wantOK: true},
		{name: "the first failure wins", conditions: []any{cond("Stalled", "True", "First", "a"), cond("Failed", "True", "Second", "b")},
			wantReason: "First", wantMsg: "a", wantOK: true},
		{name: "a malformed condition is passed over", conditions: []any{"Failed", cond("Failed", "True", "", "")}, wantOK: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u := &unstructured.Unstructured{Object: map[string]any{}}
			if tt.conditions != nil {
				u.Object["status"] = map[string]any{"conditions": tt.conditions}
			}
			reason, msg, ok := Failure(u)
			if reason != tt.wantReason || msg != tt.wantMsg || ok != tt.wantOK {
				t.Errorf("Failure = %q, %q, %v; want %q, %q, %v", reason, msg, ok, tt.wantReason, tt.wantMsg, tt.wantOK)
			}
		})
	}
}
