package apply

import (
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
)

// TestDriftBudget_Decide walks one object through a long fight on a fake clock: limit repairs in
// the window, a pause, one repair on probation, pauses doubling up to the cap, and a fresh start
// once the object stayed as kdag left it for a window.
func TestDriftBudget_Decide(t *testing.T) {
	start := time.Unix(1_000_000, 0)
	fake := clocktesting.NewFakeClock(start)
	b := newDriftBudget(Options{DriftRepairLimit: 2, DriftRepairWindow: time.Minute, DriftBackoff: 30 * time.Second, DriftBackoffMax: 100 * time.Second}, fake)
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
		fake.SetTime(start.Add(s.at))
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

	unlimited := newDriftBudget(Options{DriftRepairLimit: -1}, fake)
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
	fake := clocktesting.NewFakeClock(start)
	b := newDriftBudget(Options{DriftRepairLimit: 1, DriftRepairWindow: time.Minute, DriftBackoff: 10 * time.Minute, DriftBackoffMax: time.Hour}, fake)
	for i := range 100 {
		b.decide(types.UID(fmt.Sprint("quiet-", i)))
	}
	b.decide("fighting")
	if d := b.decide("fighting"); d.repair {
		t.Fatalf("second drift within the window with limit 1: %+v, want a pause", d)
	}
	fake.SetTime(start.Add(2 * time.Minute))
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
	o.defaults()
	if o.DriftRepairLimit != 5 || o.DriftRepairWindow != time.Minute || o.DriftBackoff != 30*time.Second || o.DriftBackoffMax != 10*time.Minute {
		t.Errorf("defaults: limit %d window %s backoff %s max %s, want 5, 1m, 30s, 10m",
			o.DriftRepairLimit, o.DriftRepairWindow, o.DriftBackoff, o.DriftBackoffMax)
	}
}
