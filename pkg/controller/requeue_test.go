package controller_test

import (
	"testing"

	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/controller"
	"github.com/kdag-dev/kdag/pkg/testing/testapi"
)

// TestReconcile_RequeuesWhileWaiting: an owner that waits for a node's readiness is reconciled
// again within controller.WaitingRecheck even when no watch event comes (a readiness rule that reads what no
// watch reports, an event lost); a Ready owner is never requeued (its no-op costs nothing).
func TestReconcile_RequeuesWhileWaiting(t *testing.T) {
	for _, tc := range []struct {
		name    string
		rm      widgetRM
		ready   bool
		requeue bool
	}{
		{name: "Ready", rm: widgetRM{readyDeployment: true}, ready: true, requeue: false},
		{name: "waiting for its Deployment", rm: widgetRM{}, ready: false, requeue: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, tc.rm)
			f.widget("app", testapi.WidgetSpec{})
			f.settle("app")
			if got := isTrue(f.status("app"), kdagv1alpha1.ConditionReady); got != tc.ready {
				t.Fatalf("Ready %v, want %v: %+v", got, tc.ready, f.status("app").Conditions)
			}
			res, err := f.reconcileResult("app")
			switch {
			case err != nil:
				t.Fatalf("reconcile: %v", err)
			case tc.requeue && (res.RequeueAfter <= 0 || res.RequeueAfter > controller.WaitingRecheck):
				t.Errorf("RequeueAfter %s, want a requeue within %s", res.RequeueAfter, controller.WaitingRecheck)
			case !tc.requeue && res.RequeueAfter != 0:
				t.Errorf("RequeueAfter %s on a Ready owner, want none", res.RequeueAfter)
			}
		})
	}
}
