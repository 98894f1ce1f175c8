package apply

import (
	"context"
	"strings"
	"time"

	"github.com/pkg/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
)

// Node is one node of an owner's graph as Reconcile needs it: whom it is for, its complete
// policy, the object as the caller's cache holds it, and how to render the desired object.
type Node struct {
	// Owner is whom the object is applied for.
	Owner Owner
	// Policy is the node's complete policy, its options as the author gave them; the owner's
	// kdag.dev/drift annotation, when set, wins over Policy.Drift.
	Policy Policy
	// Live is the object as the caller's cache holds it (read only: it may be the cache's own
	// object), nil when the cache does not hold it.
	Live client.Object
	// Render renders the node's desired object, rendered without an owner reference when
	// release is true (its live object is kept by a user's annotation). It returns the desired
	// hash (kdag.dev/desired-hash) and, when it had to build the object, the object itself; nil
	// when the caller's memory answered with the hash alone.
	Render func(release bool) (hash string, desired *unstructured.Unstructured, err error)
	// Build builds the desired object when Render answered from memory and Reconcile needs the
	// object after all. Required.
	Build func(release bool) (*unstructured.Unstructured, error)
	// BeforeCreate, when not nil, is asked before an object the cache does not hold is created;
	// its error is the node's and nothing is written (a ProtectsData node whose data exists
	// while its key is gone).
	BeforeCreate func(ctx context.Context) error
	// Existed says the object existed when the owner's status was last written: the caller's
	// record of the node, not the cache. With Policy.Recreate, an absent object the engine does
	// not remember deleting is then created only once it has been gone for
	// Options.RecreateSettle, counted from the first Reconcile that found it gone, as one the
	// engine deleted itself would be: a process killed between a Recreate's deletion and its
	// creation leaves the wait to the next one (issue 30), and so does a user's deletion.
	Existed bool
}

// Entry is what Reconcile decided and did for one node: the record the caller collects into the
// owner's status, events and metrics.
type Entry struct {
	// Action is what happened to the object.
	Action Action
	// Object is the object as the API server holds it afterwards (the write's response), or the
	// live object when nothing was written (read only). Nil when nothing exists to read: refused,
	// held, re-created, a Finished node's absent object, a failed write.
	Object client.Object
	// Drifted are the fields another writer had changed (repaired, or with Action Reported left
	// as they are), or with Action Recreating the immutable fields that forced the re-creation.
	// Paths only, never values.
	Drifted []string
	// Repeat, with Action Reported: the same fields were reported before.
	Repeat bool
	// WantsFinalizer: a user keeps the live object, whose owner reference Reconcile drops only
	// once the owner holds kdag's finalizer (so that kdag, not the garbage collector, decides
	// about it when the owner goes). The caller adds the finalizer and reconciles again.
	WantsFinalizer bool
	// Waiting, when not empty, says why the object cannot be used yet although nothing failed
	// ("being deleted; ...", "being re-created: ...": it reads after "the object is"). Its dependents wait; its deletion event brings the
	// owner back.
	Waiting string
	// RetryAfter, with Waiting, is when to look again: nothing the owner watches would say when
	// the wait is over (an object re-created once the old one has been gone long enough). Zero:
	// the object's own watch event brings the owner back.
	RetryAfter time.Duration
	// KeptBy, with Action Orphaned, is the annotation that kept the object (KeptBy).
	KeptBy string
	// Pending, when not empty, says what change of a usable object waits for the cluster (a
	// claim that grows once it is bound): its dependents may run, but the owner is not Ready
	// until the change is made. The object's own watch event brings the owner back.
	Pending string
}

// Reconcile brings one node's object to its desired state under its policy and returns one
// entry saying what it did. It is the one call a controller makes per node; the decision table
// it follows is in docs/design.md ("Node lifecycle"):
//
//   - absent: a Finished node is done (Skipped); otherwise BeforeCreate is asked, then the object
//     is created (or, when something of its name exists after all, adopted, refused or applied).
//   - being deleted and kdag's: Waiting, nothing written.
//   - kept by a user's annotation (Kept, not kdag's own Keep annotation): rendered without owner
//     reference, once the owner holds kdag's finalizer (WantsFinalizer until then).
//   - create-only: its data is never written again; its ownership metadata (labels, owner
//     reference, kdag's keep annotation) converges to the policy with one merge patch.
//   - otherwise: skipped when unchanged and verified, else applied (drift repaired or reported
//     per Policy.Drift); an immutable change is re-created under Policy.Recreate unless the
//     object is kept (a *KeptRecreateError: Stalled); a claim that is not bound yet keeps its
//     size until it binds (Pending).
//
// Errors are Apply's (they name the object) and BeforeCreate's; Entry.Action is set as far as
// the decision went.
func (e *Engine) Reconcile(ctx context.Context, n Node) (Entry, error) {
	live, p := n.Live, n.Policy
	p.Drift = driftFor(n.Owner.Object, p.Drift)
	if live == nil {
		if p.Finished {
			// Its work is done and its object gone: nothing to create, nothing to wait for.
			return Entry{Action: Skipped}, nil
		}
		if n.BeforeCreate != nil {
			if err := n.BeforeCreate(ctx); err != nil {
				return Entry{}, err
			}
		}
		desired, err := e.desired(n, false)
		if err != nil {
			return Entry{}, err
		}
		key, now := objectKey(desired), time.Now()
		if p.Recreate != nil && n.Existed {
			e.recreated.goneUnseen(key, now)
		}
		if wait := e.recreated.settling(key, now, e.opts.RecreateSettle); wait > 0 {
			return Entry{Action: Skipped, Waiting: "being re-created: created again once the old one has been gone for " +
				e.opts.RecreateSettle.String(), RetryAfter: wait}, nil
		}
		c, err := e.create(ctx, n.Owner, desired, p)
		if err != nil || c.existing == nil {
			return entryOf(c), err
		}
		// The owner's object, which the cache does not hold (yet): decided as a live one, so
		// that a user's keep, create-only data and the drift policy hold here too.
		live = c.existing
	}
	if live.GetDeletionTimestamp() != nil && e.Owns(n.Owner, live) {
		// Re-created by Recreate, or deleted by someone: an apply would only update what is
		// about to go. Its deletion event brings the owner back to create it.
		return Entry{Action: Skipped, Waiting: "being deleted; created again once it is gone"}, nil
	}
	var entry Entry
	release := !p.Keep && e.UserKept(live) != ""
	if release && !controllerutil.ContainsFinalizer(n.Owner.Object, kdagv1alpha1.Finalizer) {
		entry.WantsFinalizer, release = true, false
	}
	hash, desired, err := n.Render(release)
	if err != nil {
		return entry, err
	}
	if desired == nil && e.unchanged(n.Owner, live, hash, p, release) {
		// Rendered as before, and the object as the engine last found it: nothing to build.
		entry.Action, entry.Object = Skipped, live
		return entry, nil
	}
	if desired == nil {
		if desired, err = n.Build(release); err != nil {
			return entry, err
		}
	}
	c, err := e.update(ctx, n.Owner, desired, live, p)
	entry.Action, entry.Object, entry.Drifted, entry.Repeat, entry.Pending = c.Action, c.Object, c.Drifted, c.Repeat, c.pending
	if err == nil && c.Action == Recreating {
		entry.Waiting = "being re-created: immutable " + strings.Join(c.Drifted, ", ") + " changed"
	}
	return entry, err
}

// desired renders n's object (release: without owner reference), building it when Render
// answered from memory.
func (e *Engine) desired(n Node, release bool) (*unstructured.Unstructured, error) {
	_, desired, err := n.Render(release)
	if err != nil || desired != nil {
		return desired, err
	}
	return n.Build(release)
}

func entryOf(c Change) Entry {
	return Entry{Action: c.Action, Object: c.Object, Drifted: c.Drifted, Repeat: c.Repeat, Pending: c.pending}
}

// UserKept returns the annotation with which someone other than kdag keeps obj, as KeptBy says
// it ("kdag.dev/keep: true", or "kdag.dev/resource-policy: keep" when a field manager other than
// the engine's holds that annotation), or "" when only kdag's own Keep annotation, or nothing,
// keeps it. kdag's own annotation follows the node's Keep option: removing Keep removes it.
func (e *Engine) UserKept(obj client.Object) string {
	ann := obj.GetAnnotations()
	if ann[kdagv1alpha1.AnnotationKeep] == "true" {
		return kdagv1alpha1.AnnotationKeep + ": true"
	}
	if ann[kdagv1alpha1.AnnotationResourcePolicy] != kdagv1alpha1.ResourcePolicyKeep {
		return ""
	}
	if e.keepIsOurs(obj) {
		return ""
	}
	return kdagv1alpha1.AnnotationResourcePolicy + ": " + kdagv1alpha1.ResourcePolicyKeep
}

// keepIsOurs reports whether obj's kdag.dev/resource-policy annotation is held by the engine's
// field manager alone (kdag wrote it for a Keep node), as its managed fields say.
func (e *Engine) keepIsOurs(obj client.Object) bool {
	key := `"f:` + kdagv1alpha1.AnnotationResourcePolicy + `"`
	ours, others := false, false
	for _, mf := range obj.GetManagedFields() {
		if mf.FieldsV1 == nil || !strings.Contains(mf.FieldsV1.GetRawString(), key) {
			continue
		}
		if mf.Manager == e.opts.FieldManager {
			ours = true
		} else {
			others = true
		}
	}
	return ours && !others
}

// ownershipCurrent reports whether live's ownership metadata is what policy p wants for owner:
// kdag's labels, a controller owner reference to owner exactly when one is expected (not kept by
// p.Keep or a user, same namespace), kdag's keep annotation exactly when p.Keep.
func (e *Engine) ownershipCurrent(owner Owner, live client.Object, p Policy, release bool) bool {
	if !hasOwnerLabels(owner, live) {
		return false
	}
	wantRef := !p.Keep && !release && sameScope(owner.Object, live)
	ref := controllerRef(live)
	if wantRef != (ref != nil && ref.UID == owner.Object.GetUID()) {
		return false
	}
	hasKeep := live.GetAnnotations()[kdagv1alpha1.AnnotationResourcePolicy] == kdagv1alpha1.ResourcePolicyKeep
	if p.Keep {
		return hasKeep
	}
	return !hasKeep || !e.keepIsOurs(live)
}

// unchanged is Unchanged with the user's keep decided: a create-only object is unchanged when
// its ownership metadata is current; any other when the engine verified it for hash.
func (e *Engine) unchanged(owner Owner, live client.Object, hash string, p Policy, release bool) bool {
	if !e.Owns(owner, live) {
		return false
	}
	if p.CreateOnly {
		return e.ownershipCurrent(owner, live, p, release)
	}
	return e.isVerified(live, hash)
}

// KeptRecreateError is a Recreate refused because the object is kept: an immutable field
// changed, and deleting the object to re-create it would lose what keep protects. It is terminal:
// the owner is Stalled until its spec changes back or a person removes the annotation (or deletes
// the object, which kdag then creates as desired).
type KeptRecreateError struct {
	// Object names the object: "Kind namespace/name".
	Object string
	// KeptBy is the annotation that keeps it ("kdag.dev/resource-policy: keep"), or "the node's
	// Keep option".
	KeptBy string
	// Fields are the immutable fields the desired object changes.
	Fields []string
	// Err is the API server's refusal of the update.
	Err error
}

func (e *KeptRecreateError) Error() string {
	return "" + e.Object + ": immutable " + strings.Join(e.Fields, ", ") + " changed, and kdag does not delete it to re-create it " +
		"because it is kept (" + e.KeptBy + "): change the owner's spec back, or remove the annotation (or delete the object yourself) " +
		"to let kdag re-create it"
}

func (e *KeptRecreateError) Unwrap() error { return e.Err }

// errKeptRecreate builds the KeptRecreateError of live.
func (e *Engine) errKeptRecreate(name string, live client.Object, p Policy, fields []string, err error) error {
	by := KeptBy(live)
	if by == "" && p.Keep {
		by = "the node's Keep option"
	}
	return errors.WithStack(&KeptRecreateError{Object: name, KeptBy: by, Fields: fields, Err: err})
}
