package controller_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"

	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/testing/testapi"
)

// kstatusOf computes the kstatus of the named Widget as the API server holds it.
func (f *fixture) kstatusOf(name string) *status.Result {
	f.t.Helper()
	w := f.get(&testapi.Widget{}, name)
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(w)
	if err != nil {
		f.t.Fatalf("convert widget: %v", err)
	}
	res, err := status.Compute(&unstructured.Unstructured{Object: content})
	if err != nil {
		f.t.Fatalf("kstatus compute: %v", err)
	}
	return res
}

func TestStatus_OwnerKstatusFollowsNodeReadiness(t *testing.T) {
	f := newFixture(t, widgetRM{readyDeployment: false})
	w := f.widget("app", testapi.WidgetSpec{MaxReplicas: 3, Data: map[string]string{"k": "v"}})
	f.settle("app")

	deployID := "Deployment " + f.ns + "/app"
	res := f.kstatusOf("app")
	if res.Status != status.InProgressStatus || !strings.Contains(res.Message, deployID) {
		t.Fatalf("kstatus while the Deployment is not available: %s %q, want %s naming %s", res.Status, res.Message, status.InProgressStatus, deployID)
	}
	st := f.status("app")
	rec := condition(st, kdagv1alpha1.ConditionReconciling)
	if rec == nil || rec.Status != metav1.ConditionTrue || rec.Reason != kdagv1alpha1.ReasonWaiting || !strings.Contains(rec.Message, deployID) {
		t.Errorf("Reconciling condition %+v, want True, reason %s, naming %s", rec, kdagv1alpha1.ReasonWaiting, deployID)
	}
	if ready := condition(st, kdagv1alpha1.ConditionReady); ready == nil || ready.Status != metav1.ConditionFalse {
		t.Errorf("Ready condition %+v, want False", ready)
	}
	if g := st.Graph; g == nil || g.Total != 4 || g.Ready != 3 || g.Waiting != 1 ||
		len(g.NotReady) != 1 || g.NotReady[0].Name != "app" || g.NotReady[0].State != kdagv1alpha1.NodeWaiting {
		t.Errorf("status.graph %+v, want 4 nodes, 3 ready, the Deployment waiting", g)
	}

	f.markDeploymentAvailable("app")
	f.settle("app")

	res = f.kstatusOf("app")
	if res.Status != status.CurrentStatus {
		t.Fatalf("kstatus once the Deployment is available: %s %q, want %s", res.Status, res.Message, status.CurrentStatus)
	}
	st = f.status("app")
	if !isTrue(st, kdagv1alpha1.ConditionReady) || condition(st, kdagv1alpha1.ConditionReconciling) != nil || condition(st, kdagv1alpha1.ConditionStalled) != nil {
		t.Errorf("conditions %+v, want only Ready=True", st.Conditions)
	}
	if st.ObservedGeneration != w.Generation || st.OperatorVersion != "dev" {
		t.Errorf("observedGeneration %d operatorVersion %q, want %d and dev", st.ObservedGeneration, st.OperatorVersion, w.Generation)
	}
	if g := st.Graph; g == nil || g.Total != 4 || g.Ready != 4 || len(g.NotReady) != 0 {
		t.Errorf("status.graph %+v, want 4 of 4 ready", g)
	}
	f.waitEvent("app", corev1.EventTypeNormal, "Ready")
}

func TestStatus_StalledOwnerIsFailedForKstatus(t *testing.T) {
	f := newFixture(t, validatingRM{widgetRM{readyDeployment: true}})
	f.widget("app", testapi.WidgetSpec{MaxReplicas: 0})
	if err := f.reconcile("app"); !isTerminalErr(err) {
		t.Fatalf("reconcile: err = %v, want terminal", err)
	}
	if res := f.kstatusOf("app"); res.Status != status.FailedStatus {
		t.Fatalf("kstatus of a stalled owner: %s %q, want %s", res.Status, res.Message, status.FailedStatus)
	}
}

func TestReadiness_NotReadyNodeGatesDependents(t *testing.T) {
	f := newFixture(t, widgetRM{readyDeployment: false, afterDeploy: true})
	f.widget("app", testapi.WidgetSpec{MaxReplicas: 3})
	f.settle("app")

	if !f.notFound(&corev1.ConfigMap{}, "app-after-deploy") {
		t.Fatal("ConfigMap app-after-deploy created before the Deployment it depends on is ready")
	}
	g := f.status("app").Graph
	wantBlocked := "waiting for Deployment " + f.ns + "/app"
	var blocked *kdagv1alpha1.NodeStatus
	for i := range g.NotReady {
		if g.NotReady[i].Name == "app-after-deploy" {
			blocked = &g.NotReady[i]
		}
	}
	if g.Blocked != 1 || blocked == nil || blocked.State != kdagv1alpha1.NodeBlocked || blocked.Message != wantBlocked {
		t.Errorf("status.graph %+v, want app-after-deploy Blocked with %q", g, wantBlocked)
	}

	f.markDeploymentAvailable("app")
	if err := f.reconcile("app"); err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	f.get(&corev1.ConfigMap{}, "app-after-deploy")
	f.settle("app")
	if st := f.status("app"); !isTrue(st, kdagv1alpha1.ConditionReady) {
		t.Errorf("conditions %+v, want Ready=True", st.Conditions)
	}
}
