package controller

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	applycorev1 "k8s.io/client-go/applyconfigurations/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/testing/testapi"
)

// TestDriftBudget_Decide walks one object through a long fight on a fake clock: limit repairs in
// the window, a pause, one repair on probation, pauses doubling up to the cap, and a fresh start
// once the object stayed as kdag left it for a window.
func TestDriftBudget_Decide(t *testing.T) {
	start := time.Unix(1_000_000, 0)
	now := start
	b := newDriftBudget(&Options{DriftRepairLimit: 2, DriftRepairWindow: time.Minute, DriftBackoff: 30 * time.Second, DriftBackoffMax: 100 * time.Second})
	b.now = func() time.Time { return now }
	const uid = types.UID("u1")
	steps := []struct {
		at   time.Duration // since start
		want driftDecision
	}{
		{0, driftDecision{repair: true}},
		{time.Second, driftDecision{repair: true}},
		{2 * time.Second, driftDecision{hold: 30 * time.Second, started: true}},  // limit spent
		{10 * time.Second, driftDecision{hold: 22 * time.Second}},                // still paused: no new event
		{32 * time.Second, driftDecision{repair: true}},                          // pause over: one repair on probation
		{33 * time.Second, driftDecision{hold: 60 * time.Second, started: true}}, // drifted again: twice as long
		{93 * time.Second, driftDecision{repair: true}},
		{94 * time.Second, driftDecision{hold: 100 * time.Second, started: true}}, // capped (not 120 s)
		{194 * time.Second, driftDecision{repair: true}},
		{300 * time.Second, driftDecision{repair: true}}, // a window since the last repair: starts over
		{301 * time.Second, driftDecision{repair: true}},
		{302 * time.Second, driftDecision{hold: 30 * time.Second, started: true}}, // backoff starts over too
	}
	for _, s := range steps {
		now = start.Add(s.at)
		if got := b.decide(uid); got != s.want {
			t.Fatalf("at %s: decide = %+v, want %+v", s.at, got, s.want)
		}
	}
	if got := b.decide("other"); !got.repair {
		t.Errorf("another object: decide = %+v, want a repair (budgets are per object)", got)
	}
	b.forget(uid)
	if got := b.decide(uid); !got.repair {
		t.Errorf("after forget: decide = %+v, want a repair", got)
	}

	unlimited := newDriftBudget(&Options{DriftRepairLimit: -1})
	for i := range 100 {
		if got := unlimited.decide(uid); !got.repair {
			t.Fatalf("no limit: decide #%d = %+v, want a repair", i, got)
		}
	}
}

// TestDriftBudget_SweepsQuietObjects: records of objects that stopped drifting (deleted by the
// garbage collector, or settled) are dropped after a window; an object in a pause keeps its
// record, and with it its backoff.
func TestDriftBudget_SweepsQuietObjects(t *testing.T) {
	start := time.Unix(1_000_000, 0)
	now := start
	b := newDriftBudget(&Options{DriftRepairLimit: 1, DriftRepairWindow: time.Minute, DriftBackoff: 10 * time.Minute, DriftBackoffMax: time.Hour})
	b.now = func() time.Time { return now }
	for i := range 100 {
		b.decide(types.UID(fmt.Sprint("quiet-", i)))
	}
	b.decide("fighting")
	if d := b.decide("fighting"); d.repair {
		t.Fatalf("second drift within the window with limit 1: %+v, want a pause", d)
	}
	now = start.Add(2 * time.Minute)
	b.decide("new")
	if _, ok := b.objects["fighting"]; !ok {
		t.Error("the record of an object in a pause was swept")
	}
	if n := len(b.objects); n != 2 {
		t.Errorf("%d records after a quiet window, want 2 (the paused object and the new one)", n)
	}
	if d := b.decide("fighting"); d.repair || d.started {
		t.Errorf("paused object after the sweep: %+v, want still paused", d)
	}
}

func TestOptions_DriftDefaults(t *testing.T) {
	var o Options
	o.defaults("x")
	if o.DriftRepairLimit != 5 || o.DriftRepairWindow != time.Minute || o.DriftBackoff != 30*time.Second || o.DriftBackoffMax != 10*time.Minute {
		t.Errorf("defaults: limit %d window %s backoff %s max %s, want 5, 1m, 30s, 10m",
			o.DriftRepairLimit, o.DriftRepairWindow, o.DriftBackoff, o.DriftBackoffMax)
	}
}

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
		opts        []Option
		wantRepairs int
	}{
		{name: "default budget", wantRepairs: 5},
		{name: "no limit", opts: []Option{WithDriftRepairLimit(-1, 0)}, wantRepairs: rounds},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, widgetRM{readyDeployment: true}, tt.opts...)
			f.widget("app", testapi.WidgetSpec{MaxReplicas: 3, Data: map[string]string{"k": "v"}})
			f.settle("app")
			cmPath := "/api/v1/namespaces/" + f.ns + "/configmaps/app-config"
			req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: f.ns, Name: "app"}}

			repairs := 0
			var res reconcile.Result
			for round := 1; round <= rounds; round++ {
				f.rogueApply("app-config", "k", fmt.Sprintf("rogue-%d", round))
				f.calls.reset()
				var err error
				res, err = f.c.Reconcile(context.Background(), req)
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
				for _, part := range []string{cmID, `"rogue-sync"`, ".data.k", f.c.opts.FieldManager} {
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
