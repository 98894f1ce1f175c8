package controller

import (
	"context"
	"reflect"
	"strings"

	"github.com/kdag-dev/kdag/pkg/apply"

	"github.com/pkg/errors"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/resources"
	"github.com/kdag-dev/kdag/pkg/tracing"
)

// processNode brings one node's object to its desired state and checks its readiness. It
// returns nil when the object is ready, a *waitingError when it is applied but not ready, and
// an error naming the object otherwise.
func (c *Controller) processNode(ctx context.Context, owner client.Object, s *nodeSpec, results []nodeResult, i int) error {
	res := &results[i]
	if s.reference {
		return c.refs.check(ctx, s, res)
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
	case apierrors.IsNotFound(err):
		live = nil
	case err != nil:
		return errors.Wrapf(err, "%s: read from cache", s.id)
	}
	// A user's keep annotation on the live object releases it from the owner reference, once the
	// owner's finalizer is there to orphan it when the owner goes.
	release := live != nil && !s.keep && apply.Kept(live)
	if release && !controllerutil.ContainsFinalizer(owner, kdagv1alpha1.Finalizer) {
		res.wantsFinalizer, release = true, false
	}
	r, desired, err := c.render(owner, s, results, release)
	if err != nil {
		return err
	}
	res.contentHash = r.contentHash

	if live == nil && s.finished {
		// Its work is done and its object gone: nothing to create, nothing to wait for.
		res.action, res.contentHash = apply.Skipped, ""
		return nil
	}
	if live == nil {
		if err := c.checkProtectedData(ctx, owner, s); err != nil {
			return err
		}
	}
	if live != nil && live.GetDeletionTimestamp() != nil && c.engine.Owns(c.applyOwner(owner), live) {
		// Being deleted (re-created by Recreate, or deleted by someone): an apply would only
		// update what is about to go. Its deletion event brings the owner back to create it.
		return &waitingError{msg: s.id.String() + " is being deleted; created again once it is gone", detail: "it is being deleted; created again once it is gone"}
	}
	policy := apply.Policy{CreateOnly: s.createOnly, Adopt: s.adopt, Drift: c.driftPolicy(owner, s), Ignore: s.ignore, Recreate: s.recreate}
	var change apply.Change
	if live != nil && desired == nil && c.engine.Unchanged(c.applyOwner(owner), live, r.desiredHash, policy) {
		// Rendered as before, and the object as the engine last found it: nothing to build.
		change = apply.Change{Action: apply.Skipped, Object: live}
	} else {
		if desired == nil {
			if desired, err = c.desiredObject(owner, s, r.depHash, release); err != nil {
				return err
			}
		}
		change, err = c.engine.Apply(ctx, c.applyOwner(owner), desired, live, policy)
	}
	res.action, res.drifted, res.driftRepeat = change.Action, change.Drifted, change.Repeat
	if err == nil && change.Action == apply.Recreating {
		return &waitingError{msg: s.id.String() + " is being re-created: immutable " + strings.Join(change.Drifted, ", ") + " changed",
			detail: "it is being re-created: immutable " + strings.Join(change.Drifted, ", ") + " changed"}
	}
	if change.Action == apply.Reported && !change.Repeat {
		logFrom(ctx).Info("drift reported, not repaired", "node", s.id.String(), "fields", strings.Join(change.Drifted, ", "))
	}
	if err != nil {
		if isNamespaceTerminating(err) {
			c.markNamespaceTerminating(s.id.Namespace)
			return errNamespaceTerminating(s.id)
		}
		return err
	}

	// The object to judge readiness and content by: the apply response, or the cached object.
	current := change.Object
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
		span.SetAttributes(attrOutcome.String(string(kdagv1alpha1.NodeWaiting)))
		tracing.EndSpan(span, nil)
	} else {
		tracing.EndSpan(span, err)
	}
	return err
}

// driftPolicy is the drift policy of s under owner: the owner's kdag.dev/drift annotation when set
// (checked by validDriftAnnotation before the graph runs), else the node's OnDrift, else
// DriftRepair.
func (c *Controller) driftPolicy(owner client.Object, s *nodeSpec) apply.DriftPolicy {
	if v, ok := owner.GetAnnotations()[kdagv1alpha1.AnnotationDrift]; ok {
		if p, err := apply.ParseDriftPolicy(v); err == nil {
			return p
		}
	}
	if s.drift != "" {
		return s.drift
	}
	return apply.DriftRepair
}

// validDriftAnnotation returns a terminal error when owner's kdag.dev/drift annotation is set to
// an unknown value: only the owner's change can help.
func validDriftAnnotation(owner client.Object) error {
	v, ok := owner.GetAnnotations()[kdagv1alpha1.AnnotationDrift]
	if !ok {
		return nil
	}
	_, err := apply.ParseDriftPolicy(v)
	return errors.Wrapf(err, "annotation %s", kdagv1alpha1.AnnotationDrift)
}

// applyOwner is owner as the apply engine knows it.
func (c *Controller) applyOwner(owner client.Object) apply.Owner {
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

// needsFinalizer reports whether a graph holds an object that only kdag can delete or orphan
// when the owner is deleted (one not owned by reference).
func needsFinalizer(owner client.Object, specs []*nodeSpec) bool {
	for _, s := range specs {
		if !s.reference && !ownedByReference(owner, s) {
			return true
		}
	}
	return false
}

// dependenciesHash combines the content hashes of the node's blockers (DependsOn, not After),
// "" without such blockers. A Builder.Reference counts like an owned object: the hash of the
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
func (c *Controller) checkReady(s *nodeSpec, current client.Object) error {
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
	var notReady *NotReadyError
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

func (c *Controller) newObject(s *nodeSpec) (client.Object, error) {
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
