package controller_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	applycorev1 "k8s.io/client-go/applyconfigurations/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/controller"
	"github.com/kdag-dev/kdag/pkg/testing/testapi"
)

// rogueApply force-applies data[key]=value to the named ConfigMap as field manager "rogue-sync",
// as a second controller fighting over the field would, and waits until the cache has it.
func (f *fixture) rogueApply(name, key, value string) {
	f.t.Helper()
	cm := applycorev1.ConfigMap(name, f.ns).WithData(map[string]string{key: value})
	if err := f.cl.Apply(context.Background(), cm, client.FieldOwner("rogue-sync"), client.ForceOwnership); err != nil {
		f.t.Fatalf("rogue apply: %v", err)
	}
	live := f.get(&corev1.ConfigMap{}, name)
	f.waitCachedVersion(&corev1.ConfigMap{}, name, live.GetResourceVersion())
}

// TestDrift_FightIsBounded: another field manager keeps force-applying its value of a field kdag
// owns, and each of its writes is followed by a reconcile (as the Owns watch would start). With
// the default budget kdag repairs DriftRepairLimit times, then leaves the object alone: no write,
// the node held with a DriftConflictError, the owner Reconciling with reason DriftConflict naming
// the other manager and the field, one Warning event, and a requeue for the end of the pause.
// Without a limit every write is reverted: the hot loop the budget prevents.
func TestDrift_FightIsBounded(t *testing.T) {
	const rounds = 12
	for _, tt := range []struct {
		name        string
		opts        []controller.Options
		wantRepairs int
	}{
		{name: "default budget", wantRepairs: 5},
		{name: "no limit", opts: []controller.Options{{DriftRepairLimit: -1}}, wantRepairs: rounds},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, widgetRM{readyDeployment: true}, tt.opts...)
			f.widget("app", testapi.WidgetSpec{MaxReplicas: 3, Data: map[string]string{"k": "v"}})
			f.settle("app")
			cmPath := "/api/v1/namespaces/" + f.ns + "/configmaps/app-config"

			repairs := 0
			var res reconcile.Result
			for round := 1; round <= rounds; round++ {
				f.rogueApply("app-config", "k", fmt.Sprintf("rogue-%d", round))
				f.calls.Reset()
				var err error
				res, err = f.reconcileResult("app")
				if err != nil {
					t.Fatalf("round %d: reconcile: %v", round, err)
				}
				n := 0
				for _, w := range f.objectWrites() {
					if strings.HasSuffix(w, cmPath) {
						n++
					}
				}
				if n > 1 {
					t.Fatalf("round %d: %d writes of the ConfigMap, want at most one", round, n)
				}
				repairs += n
			}
			if repairs != tt.wantRepairs {
				t.Fatalf("%d repairs over %d rogue writes, want %d", repairs, rounds, tt.wantRepairs)
			}
			if tt.wantRepairs == rounds {
				return
			}

			if res.RequeueAfter <= 0 || res.RequeueAfter > 30*time.Second {
				t.Errorf("held reconcile: RequeueAfter %s, want the rest of the 30 s pause", res.RequeueAfter)
			}
			if cm := f.get(&corev1.ConfigMap{}, "app-config").(*corev1.ConfigMap); cm.Data["k"] != fmt.Sprintf("rogue-%d", rounds) {
				t.Errorf("ConfigMap data %v: want the rogue value left alone during the pause", cm.Data)
			}
			cmID := "ConfigMap " + f.ns + "/app-config"
			st := f.status("app")
			for _, typ := range []string{kdagv1alpha1.ConditionReady, kdagv1alpha1.ConditionReconciling} {
				c := condition(st, typ)
				want := metav1.ConditionFalse
				if typ == kdagv1alpha1.ConditionReconciling {
					want = metav1.ConditionTrue
				}
				if c == nil || c.Status != want || c.Reason != kdagv1alpha1.ReasonDriftConflict {
					t.Fatalf("%s condition %+v, want %s with reason %s", typ, c, want, kdagv1alpha1.ReasonDriftConflict)
				}
				for _, part := range []string{cmID, `"rogue-sync"`, ".data.k", f.fieldManager} {
					if !strings.Contains(c.Message, part) {
						t.Errorf("%s message %q does not name %s", typ, c.Message, part)
					}
				}
			}
			e := f.waitEvent("app", corev1.EventTypeWarning, kdagv1alpha1.ReasonDriftConflict)
			if !strings.Contains(e.Note, cmID) || !strings.Contains(e.Note, `"rogue-sync"`) || !strings.Contains(e.Note, "next repair attempt in") {
				t.Errorf("DriftConflict event %q, want it to name %s, the other manager and the pause", e.Note, cmID)
			}
			if n := len(f.events(kdagv1alpha1.ReasonDriftConflict)); n != 1 {
				t.Errorf("%d DriftConflict events, want 1 (one per pause)", n)
			}
		})
	}
}
