package apply

import (
	"testing"
	"time"
)

// TestRecreations_Settling: an object the engine deleted to re-create it is created again only
// once it has been gone for the settle time, counted from the first time the engine found it
// gone; any other object at once; an entry whose owner never came back is dropped. An object that
// existed (Node.Existed) but that this engine did not delete, as after a restart between a
// Recreate's deletion and its creation, waits the same from the first time it was found gone, once.
func TestRecreations_Settling(t *testing.T) {
	const settle = 3 * time.Second
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	type ask struct {
		key  string
		at   time.Duration // after t0
		want time.Duration
		// existed: the owner's status listed the object (Node.Existed): goneUnseen first, as
		// Engine.Reconcile calls it. deleteAgain: the engine deletes it at at (no settling asked).
		existed, deleteAgain bool
	}
	for _, tc := range []struct {
		name    string
		deleted map[string]time.Duration // key -> deleted at, after t0
		asks    []ask
	}{
		{name: "not deleted by the engine: created at once",
			asks: []ask{{key: "a", at: 0, want: 0}}},
		{name: "found gone: waits the settle time from then, then is forgotten",
			deleted: map[string]time.Duration{"a": 0},
			asks: []ask{
				{key: "a", at: 10 * time.Second, want: settle},
				{key: "a", at: 11 * time.Second, want: 2 * time.Second},
				{key: "a", at: 13 * time.Second, want: 0},
				{key: "a", at: 13*time.Second + time.Millisecond, want: 0},
			}},
		{name: "another object of the same kind waits nothing",
			deleted: map[string]time.Duration{"a": 0},
			asks:    []ask{{key: "b", at: time.Second, want: 0}, {key: "a", at: time.Second, want: settle}}},
		{name: "an entry older than its memory is dropped at the next deletion",
			deleted: map[string]time.Duration{"a": 0, "b": recreationMemory + time.Second},
			asks:    []ask{{key: "a", at: recreationMemory + 2*time.Second, want: 0}, {key: "b", at: recreationMemory + 2*time.Second, want: settle}}},
		{name: "existed, not deleted by this engine (a restart): waits from the first time found gone",
			asks: []ask{
				{key: "a", at: 5 * time.Second, existed: true, want: settle},
				{key: "a", at: 6 * time.Second, existed: true, want: 2 * time.Second},
				{key: "a", at: 8 * time.Second, existed: true, want: 0},
			}},
		{name: "existed, settled: a cache that has not seen the new object starts no second wait",
			asks: []ask{
				{key: "a", at: 0, existed: true, want: settle},
				{key: "a", at: 3 * time.Second, existed: true, want: 0},
				{key: "a", at: 4 * time.Second, existed: true, want: 0},
			}},
		{name: "existed and deleted by this engine: one wait, the deletion's",
			deleted: map[string]time.Duration{"a": 0},
			asks: []ask{
				{key: "a", at: time.Second, existed: true, want: settle},
				{key: "a", at: 4 * time.Second, existed: true, want: 0},
			}},
		{name: "deleted again once settled: waits again",
			deleted: map[string]time.Duration{"a": 0},
			asks: []ask{
				{key: "a", at: 0, want: settle},
				{key: "a", at: 3 * time.Second, want: 0},
				{key: "a", at: time.Minute, deleteAgain: true},
				{key: "a", at: time.Minute + time.Second, existed: true, want: settle},
			}},
		{name: "existed long ago: forgotten after its memory, so a later disappearance waits again",
			asks: []ask{
				{key: "a", at: 0, existed: true, want: settle},
				{key: "a", at: 3 * time.Second, existed: true, want: 0},
				{key: "a", at: recreationMemory + time.Minute, existed: true, want: settle},
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var r recreations
			for _, key := range []string{"a", "b"} { // in a fixed order: "b" is deleted after "a"
				if at, ok := tc.deleted[key]; ok {
					r.deletedAt(key, t0.Add(at))
				}
			}
			for _, a := range tc.asks {
				if a.deleteAgain {
					r.deletedAt(a.key, t0.Add(a.at))
					continue
				}
				if a.existed {
					r.goneUnseen(a.key, t0.Add(a.at))
				}
				if got := r.settling(a.key, t0.Add(a.at), settle); got != a.want {
					t.Errorf("settling(%s) at +%s = %s, want %s", a.key, a.at, got, a.want)
				}
			}
		})
	}
}
