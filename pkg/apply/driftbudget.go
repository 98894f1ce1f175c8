package apply

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/utils/clock"

	"github.com/kdag-dev/kdag/pkg/resources"
)

// DriftConflictError is Apply's error when other field managers keep changing fields kdag owns
// on the object and kdag has stopped reverting them for a while (see Options.DriftRepairLimit).
// The object is left as the other writer set it; kdag tries one repair again once the backoff
// has passed. Its message stays the same while the same managers fight over the same fields, so
// it does not make the owner's status change on every reconcile.
type DriftConflictError struct {
	// Object names the object fought over, "Kind namespace/name".
	Object string
	// FieldManager is kdag's field manager, which owns the fields.
	FieldManager string
	// Managers are the other field managers that changed the fields, sorted.
	Managers []string
	// Fields are the fields they changed, sorted, as resources.Drift renders them.
	Fields []string
	// RetryAfter is how long until kdag tries a repair again.
	RetryAfter time.Duration
	// Started is true when this Apply started the pause (report it once).
	Started bool
}

func (e *DriftConflictError) Error() string {
	fields := strings.Join(e.Fields, ", ")
	if len(fields) > 256 {
		fields = fields[:253] + "..."
	}
	return fmt.Sprintf("%s: field manager %s keeps changing %s, owned by %s; kdag stopped reverting it and retries "+
		"with backoff: stop the other writer, or leave the field to it by removing it from the object kdag applies",
		e.Object, quoteJoin(e.Managers), fields, e.FieldManager)
}

func quoteJoin(names []string) string {
	quoted := make([]string, len(names))
	for i, n := range names {
		quoted[i] = fmt.Sprintf("%q", n)
	}
	return strings.Join(quoted, ", ")
}

// newDriftConflict describes the conflict from the drifted fields; without them (fields removed
// from kdag's own entry, see missingFields) the other writer is unknown.
func newDriftConflict(object, fieldManager string, fields []resources.FieldDrift, paths []string) *DriftConflictError {
	e := &DriftConflictError{Object: object, FieldManager: fieldManager}
	for _, f := range fields {
		e.Managers = append(e.Managers, f.Manager)
		e.Fields = append(e.Fields, f.Path)
	}
	if len(e.Managers) == 0 {
		e.Managers, e.Fields = []string{"(unknown)"}, paths
	}
	slices.Sort(e.Managers)
	slices.Sort(e.Fields)
	e.Managers, e.Fields = slices.Compact(e.Managers), slices.Compact(e.Fields)
	return e
}

// driftBudget limits how often kdag reverts other writers' changes to one object. Without it, a
// writer that keeps setting a field kdag owns (another controller, a GitOps tool, an autoscaler)
// and kdag, which reverts every change its watch reports, write the object in turn as fast as the
// API server lets them: a hot loop that only the other writer's rate bounds.
//
// Per object: up to limit repairs within window; the next drift starts a pause with no repair
// (backoff, doubling on every pause up to maxBackoff while the fight goes on). After a pause one
// repair is tried; if the object drifts again within window, the next, longer pause starts. An
// object that stays as kdag left it for window after kdag's last repair starts over. The pauses'
// lengths are client-go's flowcontrol.Backoff per object (initial backoff, doubled up to
// maxBackoff, no jitter), reset when the object starts over.
type driftBudget struct {
	limit  int // < 0: no limit
	window time.Duration
	clock  clock.Clock
	pauses *flowcontrol.Backoff // by object UID

	mu        sync.Mutex
	objects   map[types.UID]*driftRecord
	lastSweep time.Time // of records that would start over anyway (see sweep)
}

type driftRecord struct {
	repairs   []time.Time // kdag's repairs within the window, oldest first
	holdUntil time.Time   // no repair before this; zero outside a pause
	probation bool        // a pause ended: one more drift within the window starts the next
}

// driftDecision is what to do with a drifted object.
type driftDecision struct {
	repair  bool
	hold    time.Duration // when !repair: how long until kdag tries again
	started bool          // when !repair: this drift started the pause
}

// newDriftBudget returns the budget of o's drift options on c (clock.RealClock outside tests).
func newDriftBudget(o Options, c clock.Clock) *driftBudget {
	pauses := flowcontrol.NewBackOff(o.DriftBackoff, o.DriftBackoffMax)
	pauses.Clock = c
	return &driftBudget{limit: o.DriftRepairLimit, window: o.DriftRepairWindow, clock: c, pauses: pauses,
		objects: map[types.UID]*driftRecord{}}
}

// decide records that the object uid drifted and says whether to repair it now.
func (b *driftBudget) decide(uid types.UID) driftDecision {
	if b.limit < 0 {
		return driftDecision{repair: true}
	}
	now := b.clock.Now()
	b.mu.Lock()
	defer b.mu.Unlock()
	b.sweep(now)
	r := b.objects[uid]
	if r == nil {
		r = &driftRecord{}
		b.objects[uid] = r
	}
	if now.Before(r.holdUntil) {
		return driftDecision{hold: r.holdUntil.Sub(now)}
	}
	if !r.holdUntil.IsZero() { // the pause is over: one repair on probation
		r.holdUntil, r.probation, r.repairs = time.Time{}, true, nil
	}
	if n := len(r.repairs); n > 0 && now.Sub(r.repairs[n-1]) >= b.window {
		*r = driftRecord{} // stable for a window since kdag's last repair: start over
		b.pauses.Reset(string(uid))
	}
	r.repairs = slices.DeleteFunc(r.repairs, func(t time.Time) bool { return now.Sub(t) >= b.window })
	limit := b.limit
	if r.probation {
		limit = 1
	}
	if len(r.repairs) >= limit {
		b.pauses.Next(string(uid), now)
		pause := b.pauses.Get(string(uid))
		r.holdUntil, r.repairs = now.Add(pause), nil
		return driftDecision{hold: pause, started: true}
	}
	r.repairs = append(r.repairs, now)
	return driftDecision{repair: true}
}

// sweep drops, at most once per window, the records of objects that have not drifted for a
// window after kdag's last repair and the end of their last pause: their next drift starts over
// anyway, and without the sweep the records of objects deleted by others (the garbage collector
// after their owner) would stay for the life of the process. Caller holds mu.
func (b *driftBudget) sweep(now time.Time) {
	if now.Sub(b.lastSweep) < b.window {
		return
	}
	b.lastSweep = now
	for uid, r := range b.objects {
		quietSince := r.holdUntil
		if n := len(r.repairs); n > 0 && r.repairs[n-1].After(quietSince) {
			quietSince = r.repairs[n-1]
		}
		if now.Sub(quietSince) >= b.window {
			delete(b.objects, uid)
			b.pauses.Reset(string(uid))
		}
	}
}

// forget drops the object's record (it was deleted).
func (b *driftBudget) forget(uid types.UID) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.objects, uid)
	b.pauses.Reset(string(uid))
}
