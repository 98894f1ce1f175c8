package controller_test

import (
	"context"
	"testing"
	"time"

	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/kdag-dev/kdag/pkg/testing/poll"
	"github.com/kdag-dev/kdag/pkg/testing/testapi"
)

// TestWatch_UnchangedObjectsRedeliveredReconcileNothing: an informer delivers every cached object
// again, as an update with the same resourceVersion, on each resync (the cache's SyncPeriod) and
// after each relist (when an API server or etcd restart ends its watch and the resourceVersion is
// too old to resume). Such an update carries no change, so it must reconcile no owner, however
// many children the owner has. Before owned objects' watches filtered them, each redelivery
// reconciled every owner once per owned kind: after an etcd restart under 20 Giteas, some 300
// reconciles in the 15 s after the fleet was Ready again (test/e2e/controlplane).
func TestWatch_UnchangedObjectsRedeliveredReconcileNothing(t *testing.T) {
	const resync = time.Second
	f := startFixture(t, fixtureConfig{register: true, syncPeriod: resync}, widgetRM{readyDeployment: true})
	f.widget("app", testapi.WidgetSpec{MaxReplicas: 1, Data: map[string]string{"k": "v"}})
	poll.True(t, "the Widget Ready", waitTimeout, func(context.Context) bool {
		return isTrue(f.status("app"), "Ready")
	})
	// The reconciles that the owner's own writes (children, status) cause are over once the
	// count stays still for a resync period with nothing pending; with the defect it never does,
	// so the wait is bounded and the check below reports.
	var settled float64
	for i := 0; i < 20; i++ {
		before := reconcileTotal(t, f.name)
		time.Sleep(resync + resync/2)
		if settled = reconcileTotal(t, f.name); settled == before {
			break
		}
	}
	time.Sleep(4 * resync)
	if n := reconcileTotal(t, f.name) - settled; n != 0 {
		t.Errorf("%.0f reconciles of an unchanged Ready owner in %s of resyncs every %s, want 0", n, 4*resync, resync)
	}
}

// reconcileTotal is controller-runtime's controller_runtime_reconcile_total of the named
// controller, over every result.
func reconcileTotal(t *testing.T, controller string) float64 {
	t.Helper()
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var total float64
	for _, mf := range families {
		if mf.GetName() != "controller_runtime_reconcile_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "controller" && l.GetValue() == controller {
					total += m.GetCounter().GetValue()
				}
			}
		}
	}
	return total
}
