package apply

import (
	"context"
	"hash/fnv"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/go-logr/logr"
	"github.com/pkg/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/resources"
)

// update decides whether a cached object needs a write and applies it if so. A repair of another
// writer's changes is subject to the drift budget: once spent, update writes nothing and returns
// a *DriftConflictError.
func (e *Engine) update(ctx context.Context, owner Owner, desired *unstructured.Unstructured, live client.Object, p Policy) (Change, error) {
	gvk := desired.GroupVersionKind()
	if !e.Owns(owner, live) {
		if !e.mayAdopt(owner, p, live) {
			return Change{Action: Refused}, e.refusal(owner, desired, live)
		}
		obj, err := e.adopt(ctx, desired, live, p)
		return Change{Action: Adopted, Object: obj}, err
	}
	if p.CreateOnly {
		// Its data is never written again (a generated password); its ownership metadata
		// follows the policy: labels back after someone removed one, the owner reference dropped
		// when it is kept (Keep added, a user's keep) and back when it no longer is.
		if e.ownershipMatches(owner, desired, live) {
			return Change{Action: Skipped, Object: live}, nil
		}
		obj, err := e.takeOwnership(ctx, desired)
		return Change{Action: Applied, Object: obj}, err
	}
	if !hasOwnerShard(owner, live) {
		// The shard label is metadata, never drift: a moved owner's new shard label is written
		// with one merge patch whatever the drift policy (report writes nothing else), so the
		// object enters its owner's new cache and stays in prune's sight.
		obj, err := e.takeOwnership(ctx, desired)
		if err != nil {
			return Change{Action: Applied}, err
		}
		live = obj
	}
	if want, has, ok := pendingGrowth(live, desired); ok {
		return e.applyPending(ctx, desired, live, want, has)
	}
	hash := desired.GetAnnotations()[kdagv1alpha1.AnnotationDesiredHash]
	if e.isVerified(live, hash) {
		return Change{Action: Skipped, Object: live}, nil
	}
	if p.Drift == DriftReport {
		if fields, ok := e.reportedAt(live, hash); ok {
			// Reported at this resourceVersion already: nothing changed since.
			return Change{Action: Reported, Object: live, Drifted: fields, Repeat: true}, nil
		}
	}
	// Ignored fields are neither compared nor applied: they are others' after the create.
	desired = withoutFields(desired, p.Ignore)
	// live is typed as the cache holds it: the drift checks convert it only when a managed-fields
	// entry says a field may differ, so an object only kdag wrote is verified without a conversion.
	name := describe(desired, gvk)
	fields, err := resources.DriftFields(live, desired, e.opts.FieldManager)
	if err != nil {
		return Change{}, errors.Wrapf(err, "%s: compare managed fields", name)
	}
	drifted := driftPaths(fields)
	unchanged := live.GetAnnotations()[kdagv1alpha1.AnnotationDesiredHash] == hash
	if len(drifted) == 0 && unchanged && !e.entryVerified(live, hash) {
		missing, err := resources.MissingFields(live, desired, e.opts.FieldManager, e.schemas.WithContext(ctx))
		if err != nil {
			// Whether someone removed a field kdag set is unknown: apply, which repairs it if
			// so, and which the verified record then spares the next calls.
			logr.FromContextOrDiscard(ctx).Info("cannot check for fields removed by others; applying", "object", name, "error", err.Error())
			unchanged = false
		}
		drifted = missing
	}
	if len(drifted) == 0 && unchanged {
		e.reported.Delete(live.GetUID())
		e.verify(live, hash)
		return Change{Action: Skipped, Object: live}, nil
	}
	if len(drifted) > 0 && unchanged && p.Drift == DriftReport {
		repeat := e.report(live, hash, drifted)
		return Change{Action: Reported, Object: live, Drifted: drifted, Repeat: repeat}, nil
	}
	if len(drifted) > 0 && p.Drift != DriftReport {
		if d := e.drift.decide(live.GetUID()); !d.repair {
			conflict := newDriftConflict(name, e.opts.FieldManager, fields, drifted)
			conflict.RetryAfter, conflict.Started = d.hold, d.started
			return Change{Action: Held}, conflict
		}
	}
	if !e.refsMatch(desired, live) {
		// An owner reference or keep annotation that a merge patch wrote (adoption, a create-only
		// past) is not the apply's to remove: switch them to the policy's first.
		if _, err := e.takeOwnership(ctx, desired); err != nil {
			return Change{Action: Applied}, err
		}
	}
	if err := e.releaseFields(ctx, live, desired, p.Ignore); err != nil {
		return Change{Action: Applied}, err
	}
	if err := e.apply(ctx, desired); err != nil {
		// Not a repair: only a write the API server accepted repairs anything.
		fields := ChangedImmutableFields(err, desired, live)
		switch {
		case len(fields) == 0:
			return Change{Action: Applied}, err
		case p.Recreate == nil:
			return Change{Action: Applied}, &ImmutableFieldError{Object: name, Fields: fields, Err: err}
		case p.Keep || Kept(live):
			// Deleting it would lose what keep protects: a person decides.
			return Change{Action: Applied}, e.errKeptRecreate(name, live, p, fields, err)
		}
		if err := e.recreate(ctx, live, *p.Recreate); err != nil {
			return Change{Action: Recreating}, errors.Wrapf(err, "%s: delete to re-create it (immutable %s changed)", name, strings.Join(fields, ", "))
		}
		e.recreated.deletedAt(objectKey(desired), time.Now())
		return Change{Action: Recreating, Drifted: fields}, nil
	}
	e.reported.Delete(live.GetUID())
	return Change{Action: Applied, Object: desired, Drifted: drifted}, nil
}

// reportedAt is the drift the engine last reported of an object (DriftReport).
type reportedAt struct {
	resourceVersion, desiredHash string
	fields                       []string
}

// reportedAt returns the fields reported of live at its resourceVersion for the desired hash
// hash, if the engine reported drift of it there.
func (e *Engine) reportedAt(live client.Object, hash string) ([]string, bool) {
	v, ok := e.reported.Load(live.GetUID())
	if !ok {
		return nil, false
	}
	r := v.(reportedAt)
	if r.resourceVersion != live.GetResourceVersion() || r.desiredHash != hash {
		return nil, false
	}
	return r.fields, true
}

// report records that fields of live drifted and were reported, and returns whether the same
// fields were reported of it before (at an earlier resourceVersion).
func (e *Engine) report(live client.Object, hash string, fields []string) (repeat bool) {
	prev, ok := e.reported.Swap(live.GetUID(), reportedAt{resourceVersion: live.GetResourceVersion(), desiredHash: hash, fields: fields})
	return ok && slices.Equal(prev.(reportedAt).fields, fields)
}

// verifiedAt is the state in which the engine last found an object as it wants it: its
// resourceVersion, the desired hash, and the fingerprint of kdag's Apply entry in its managed
// fields (appliedEntry), which then held every field kdag applies.
type verifiedAt struct {
	resourceVersion, desiredHash string
	entry                        uint64
}

// verify records obj, as the API server returned or the cache holds it, as found the way the
// engine wants it for the desired hash hash.
func (e *Engine) verify(obj metav1.Object, hash string) {
	e.verified.store(obj.GetUID(), verifiedAt{
		resourceVersion: obj.GetResourceVersion(), desiredHash: hash, entry: appliedEntry(obj, e.opts.FieldManager)})
}

// isVerified reports whether the engine found live, at its resourceVersion, as it wants it with
// the desired hash hash: nothing changed the object since, so the drift check would find nothing.
func (e *Engine) isVerified(live client.Object, hash string) bool {
	at, ok := e.verified.load(live.GetUID())
	if !ok {
		return false
	}
	return at.resourceVersion == live.GetResourceVersion() && at.desiredHash == hash &&
		live.GetAnnotations()[kdagv1alpha1.AnnotationDesiredHash] == hash
}

// entryVerified reports whether kdag's Apply entry in live's managed fields is, byte for byte,
// the one the engine last verified for the desired hash hash, at an earlier resourceVersion:
// then no field kdag applies was removed since, and resources.MissingFields (which needs the API
// server's schema) can only find nothing. The API server recomputes every manager's entry on
// each write (KEP-555): a field another writer removes, or changes with an update or a forced
// apply, leaves kdag's entry, so an identical entry means kdag still owns all it applied. A
// write that changed only others' fields (a controller's status, a label of someone else's)
// leaves the entry as it was; the object's own resourceVersion, generation or the entry's
// timestamp are not part of the fingerprint. After a restart the engine remembers nothing and
// checks in full, so edits made while kdag was down are still found.
func (e *Engine) entryVerified(live client.Object, hash string) bool {
	at, ok := e.verified.load(live.GetUID())
	if !ok {
		return false
	}
	return at.desiredHash == hash && at.entry != 0 && at.entry == appliedEntry(live, e.opts.FieldManager)
}

// appliedEntry is the FNV-1a 64-bit hash of the field set (fieldsV1, as the API server
// serialized it) of fieldManager's Apply entry on the main resource of obj, 0 when there is none.
func appliedEntry(obj metav1.Object, fieldManager string) uint64 {
	mf := resources.AppliedEntry(obj, fieldManager)
	if mf == nil {
		return 0
	}
	raw := mf.FieldsV1.GetRawBytes()
	if len(raw) == 0 {
		return 0
	}
	h := fnv.New64a()
	_, _ = h.Write(raw)
	return max(h.Sum64(), 1)
}

// driftPaths returns the distinct paths of fields, sorted.
func driftPaths(fields []resources.FieldDrift) []string {
	var paths []string
	for _, f := range fields {
		if len(paths) == 0 || paths[len(paths)-1] != f.Path {
			paths = append(paths, f.Path)
		}
	}
	return paths
}

// Unchanged reports whether Apply of a desired state whose kdag.dev/desired-hash is desiredHash
// would skip live, the owner's object as the cache holds it, without looking at the desired
// object: the engine applied or verified live for that hash at its current resourceVersion (or,
// with p.CreateOnly, live is the owner's and carries its labels). A caller that remembers the
// hash of what it would apply can then spare building the desired object. False says nothing
// but "call Apply".
func (e *Engine) Unchanged(owner Owner, live client.Object, desiredHash string, p Policy) bool {
	if !e.Owns(owner, live) {
		return false
	}
	if p.CreateOnly {
		return hasOwnerLabels(owner, live)
	}
	return e.isVerified(live, desiredHash)
}

// Verified reports whether the engine remembers obj as found the way it wants it at obj's
// current resourceVersion: its next Apply with the same desired hash skips the drift check.
func (e *Engine) Verified(obj metav1.Object) bool {
	at, ok := e.verified.load(obj.GetUID())
	return ok && at.resourceVersion == obj.GetResourceVersion()
}
