package reconciler

import (
	"context"
	"fmt"
	"reflect"
	"strings"

	"github.com/pkg/errors"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/apply"
	"github.com/kdag-dev/kdag/pkg/controller/internal/referenced"
	"github.com/kdag-dev/kdag/pkg/resources"
	"github.com/kdag-dev/kdag/pkg/tracing"
)

// processNode brings one node's object to its desired state and checks its readiness. It
// returns nil when the object is ready, a *waitingError when it is applied but not ready, and
// an error naming the object otherwise.
func (c *Reconciler) processNode(ctx context.Context, owner client.Object, oc *ownerCheck, s *nodeSpec, results []nodeResult, i int) error {
	res := &results[i]
	if s.reference {
		return c.checkReference(ctx, s, res)
	}
	if s.beforeDelete != nil {
		// A hook: its Job is created by the owner's teardown only (runBeforeDelete).
		res.action = apply.Skipped
		return nil
	}
	if c.namespaceTerminating(s.id.Namespace) {
		return errNamespaceTerminating(s.id)
	}
	live, err := c.newObject(s)
	if err != nil {
		return err
	}
	// The cache's own object, not a copy (a copy of its managed fields was a third of a settled
	// node's CPU): live is only read from here on; whatever writes makes its own object.
	switch err := c.client.Get(ctx, client.ObjectKey{Namespace: s.id.Namespace, Name: s.id.Name}, live,
		&client.GetOptions{UnsafeDisableDeepCopy: ptr.To(true)}); {
	case apierrors.IsNotFound(err) && s.finished:
		if live, err = c.finishedObject(ctx, owner, s); err != nil {
			return err
		}
	case apierrors.IsNotFound(err):
		live = nil
	case err != nil:
		return errors.Wrapf(err, "%s: read from cache", s.id)
	}
	res.before = live
	var depHash string
	policy := apply.Policy{CreateOnly: s.createOnly, Adopt: s.adopt, Keep: s.keep, Finished: s.finished,
		Drift: s.drift, Ignore: s.ignore, Recreate: s.recreate}
	entry, err := c.engine.Reconcile(ctx, apply.Node{
		Owner: c.applyOwner(owner), Policy: policy, Live: live,
		Render: func(release bool) (string, *unstructured.Unstructured, error) {
			r, desired, err := c.render(owner, s, results, release)
			if err != nil {
				return "", nil, err
			}
			res.contentHash, depHash = r.contentHash, r.depHash
			return r.desiredHash, desired, nil
		},
		Build: func(release bool) (*unstructured.Unstructured, error) {
			return c.desiredObject(owner, s, depHash, release)
		},
		BeforeCreate: func(ctx context.Context) error {
			if c.opts.Deletions.deleted(owner.GetUID()) {
				return errOwnerDeleted(s.id, c.ownerGVK.Kind, owner)
			}
			if needsOwnerFinalizer(owner, s) {
				if err := oc.finalizer.wait(ctx); err != nil {
					return errors.Wrapf(err, "%s: not created before its owner holds kdag's finalizer", s.id)
				}
			}
			if statusListsApplied(owner, s.id) {
				// Created again: is the owner still there?
				switch gone, err := c.ownerGone(ctx, owner, oc); {
				case err != nil:
					return errors.Wrapf(err, "%s", s.id)
				case gone:
					return errOwnerDeleted(s.id, c.ownerGVK.Kind, owner)
				}
			}
			return c.checkProtectedData(ctx, owner, s)
		},
		// Read only where it counts: an absent object of a Recreate node.
		Existed: live == nil && s.recreate != nil && statusListsApplied(owner, s.id),
	})
	res.action, res.drifted, res.driftRepeat = entry.Action, entry.Drifted, entry.Repeat
	res.wantsFinalizer, res.pending = entry.WantsFinalizer, entry.Pending
	if entry.Action == apply.Reported && !entry.Repeat {
		logFrom(ctx).Info("drift reported, not repaired", "node", s.id.String(), "fields", strings.Join(entry.Drifted, ", "))
	}
	switch {
	case isNamespaceTerminating(err):
		c.markNamespaceTerminating(s.id.Namespace)
		return errNamespaceTerminating(s.id)
	case err != nil:
		return err
	case entry.Waiting != "":
		return &waitingError{msg: s.id.String() + " is " + entry.Waiting, detail: "it is " + entry.Waiting, retryAfter: entry.RetryAfter}
	case entry.Object == nil:
		res.contentHash = "" // a Finished node whose object is gone: nothing to consume
		return nil
	}

	// The object to judge readiness and content by: the apply response, or the cached object.
	current := entry.Object
	res.live = current
	if s.createOnly {
		// A create-only object's content is what the API server holds (a generated password).
		if res.contentHash, err = c.liveContentHash(s, current); err != nil {
			return err
		}
	}
	_, span := startSpan(ctx, spanReadiness)
	err = c.checkReady(s, current)
	var w *waitingError
	if errors.As(err, &w) {
		span.SetAttributes(AttrOutcome.String(string(kdagv1alpha1.NodeWaiting)))
		tracing.EndSpan(span, nil)
	} else {
		tracing.EndSpan(span, err)
	}
	return err
}

// finishedObject returns the object of a Finished node that the cache does not hold, read from
// the API server, when it exists and is the owner's; nil when it does not. A Finished node is
// never created, so this read is what finds an object of the owner's that is out of the cache:
// its owner just moved to this manager's shard and the object still carries the old shard's
// label. Applied as a live object, it gets the new label and enters the cache; left alone, it
// would stay out of this shard's sight, never pruned nor torn down. The read is made once per
// owner and node while the object is gone (remembered until the owner leaves the cache): an
// unchanged owner's reconcile reads nothing uncached.
func (c *Reconciler) finishedObject(ctx context.Context, owner client.Object, s *nodeSpec) (client.Object, error) {
	gone := c.renders.finishedGone(owner.GetUID())
	if _, ok := gone.Load(s.id); ok {
		return nil, nil
	}
	obj, err := c.newObject(s)
	if err != nil {
		return nil, err
	}
	switch err := c.reader.Get(ctx, client.ObjectKey{Namespace: s.id.Namespace, Name: s.id.Name}, obj); {
	case apierrors.IsNotFound(err):
	case err != nil:
		return nil, errors.Wrapf(err, "%s: read the finished node's object, which the cache does not hold", s.id)
	case c.engine.Owns(c.applyOwner(owner), obj):
		return obj, nil
	}
	// Gone, or another's object of the name (never the owner's: a Finished node is not created).
	gone.Store(s.id, struct{}{})
	return nil, nil
}

// applyOwner is owner as the apply engine knows it.
func (c *Reconciler) applyOwner(owner client.Object) apply.Owner {
	return apply.Owner{Object: owner, Kind: c.ownerGVK.Kind, Controller: c.name}
}

// ownedByReference reports whether the node's object gets a controller owner reference to
// owner, so that the garbage collector deletes it with the owner and the Owns watch maps its
// events back: yes unless the object is in another namespace than a namespaced owner, or
// cluster-scoped under a namespaced owner (an owner reference cannot cross namespaces), or kept
// (Keep: the garbage collector must not delete it). Such objects are tracked by kdag's labels
// and field manager, and the owner holds kdag's finalizer (needsFinalizer).
func ownedByReference(owner client.Object, s *nodeSpec) bool {
	return !s.keep && (owner.GetNamespace() == "" || s.id.Namespace == owner.GetNamespace())
}

// finalizerNeed is when a graph needs its owner to hold kdag's finalizer (needsFinalizer).
type finalizerNeed int

const (
	// finalizerNone: the garbage collector deletes every object with the owner.
	finalizerNone finalizerNeed = iota
	// finalizerBeside: some objects only kdag can delete or orphan; the finalizer is written
	// while the graph runs, and those objects are created once it is in place (finalizerWrite).
	finalizerBeside
	// finalizerFirst: a BeforeDelete hook, which runs before any of the owner's objects goes,
	// needs the finalizer before the first object exists.
	finalizerFirst
)

// needsFinalizer says whether and when a graph needs kdag's finalizer on its owner: for an
// object that only kdag can delete or orphan when the owner is deleted (one not owned by
// reference, needsOwnerFinalizer), or for a BeforeDelete hook, which kdag runs when the owner is
// deleted.
func needsFinalizer(owner client.Object, specs []*nodeSpec) finalizerNeed {
	need := finalizerNone
	for _, s := range specs {
		switch {
		case s.beforeDelete != nil:
			return finalizerFirst
		case needsOwnerFinalizer(owner, s):
			need = finalizerBeside
		}
	}
	return need
}

// needsOwnerFinalizer reports whether s's object is one only kdag can delete or orphan when the
// owner is deleted: the owner must hold kdag's finalizer before it is created.
func needsOwnerFinalizer(owner client.Object, s *nodeSpec) bool {
	return !s.reference && s.beforeDelete == nil && !ownedByReference(owner, s)
}

// dependenciesHash combines the content hashes of the node's blockers (DependsOn, not After),
// "" without such blockers. A Graph.Reference counts like an owned object: the hash of the
// keys its dependents read.
func dependenciesHash(s *nodeSpec, results []nodeResult) string {
	hashes := make(map[string]string, len(s.blockers))
	for _, b := range s.blockers {
		if !s.orderOnly(b) {
			hashes[b.id.String()] = results[b.index].contentHash
		}
	}
	if len(hashes) == 0 {
		return ""
	}
	return resources.CombineHashes(hashes)
}

// checkReady judges current, the node's object, by its ReadyWhen function, or else by kstatus
// (remembered per resourceVersion: kstatus reads the object only). It returns nil when ready, a
// *waitingError when not yet, an *objectFailedError when the object failed.
func (c *Reconciler) checkReady(s *nodeSpec, current client.Object) error {
	readyWhen := s.readyWhen
	if readyWhen == nil {
		readyWhen = c.kindReady[s.gvk.GroupKind()]
	}
	if readyWhen == nil {
		return c.kstatusReady(s, current)
	}
	typed, err := c.newObject(s)
	if err != nil {
		return err
	}
	if reflect.TypeOf(typed) == reflect.TypeOf(current) {
		typed = current.DeepCopyObject().(client.Object)
	} else {
		u, err := unstructuredOf(current, s)
		if err != nil {
			return err
		}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, typed); err != nil {
			return errors.Wrapf(err, "%s: convert for readiness", s.id)
		}
	}
	ok, err := readyWhen(typed)
	var notReady *resources.NotReadyError
	switch {
	case errors.As(err, &notReady):
		return &waitingError{msg: s.id.String() + " is not ready: " + notReady.Reason, detail: notReady.Reason}
	case err != nil:
		return errors.Wrapf(err, "%s: readiness", s.id)
	case !ok:
		return &waitingError{msg: s.id.String() + " is not ready"}
	}
	return nil
}

func (c *Reconciler) newObject(s *nodeSpec) (client.Object, error) {
	obj, err := c.scheme.New(s.gvk)
	if err != nil {
		return nil, errors.Wrapf(err, "%s: new object", s.id)
	}
	co, ok := obj.(client.Object)
	if !ok {
		return nil, errors.Errorf("%s: %T is not a client.Object", s.id, obj)
	}
	return co, nil
}

// checkReference returns nil when the object of the Graph.Reference node s exists and holds the
// keys the node requires, with res.contentHash set to the hash of what dependents read (the
// required keys, or all of a Secret's or ConfigMap's data, or another kind's spec). A missing
// object or key keeps the node waiting (*waitingError) with a message naming the object and what
// to do; the reference's watch resumes the owner when it changes.
func (c *Reconciler) checkReference(ctx context.Context, s *nodeSpec, res *nodeResult) error {
	gone := &waitingError{msg: s.id.String() + " does not exist", detail: "it does not exist yet: create it"}
	m, err := c.refs.Cached(ctx, s.gvk, s.id.Namespace, s.id.Name)
	switch {
	case err != nil:
		return errors.Wrapf(err, "%s", s.id)
	case m == nil:
		return gone
	}
	st, err := c.refs.Content(ctx, referenced.Ref{ID: s.id, GVK: s.gvk, RequireKeys: s.requireKeys}, m)
	switch {
	case errors.Is(err, referenced.ErrNotFound):
		return gone
	case err != nil:
		return err
	}
	if len(st.Missing) > 0 {
		detail := fmt.Sprintf("it has no key %s: add it", strings.Join(st.Missing, ", "))
		if len(st.Missing) > 1 {
			detail = fmt.Sprintf("it has no keys %s: add them", strings.Join(st.Missing, ", "))
		}
		return &waitingError{msg: s.id.String() + " lacks keys " + strings.Join(st.Missing, ", "), detail: detail}
	}
	res.contentHash = st.ContentHash
	return nil
}
