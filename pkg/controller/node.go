package controller

import (
	"context"

	"github.com/kdag-dev/kdag/pkg/apply"

	"github.com/pkg/errors"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

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
	desired, err := c.desired(owner, s, results)
	if err != nil {
		return err
	}
	// What dependents consume of a node kdag renders is the desired object as rendered, hashed
	// before the apply replaces it with the API server's response (which adds defaults): the
	// same hash whether the object was just created or read from the cache (issue 20, item 6).
	if !s.createOnly {
		if res.contentHash, err = resources.ContentHash(desired); err != nil {
			return errors.Wrapf(err, "%s: hash content", s.id)
		}
	}

	live, err := c.newObject(s)
	if err != nil {
		return err
	}
	switch err := c.client.Get(ctx, client.ObjectKeyFromObject(desired), live); {
	case apierrors.IsNotFound(err):
		live = nil
	case err != nil:
		return errors.Wrapf(err, "%s: read from cache", s.id)
	}

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
	change, err := c.engine.Apply(ctx, c.applyOwner(owner), desired, live, apply.Policy{CreateOnly: s.createOnly, Adopt: s.adopt})
	res.action, res.drifted = change.Action, change.Drifted
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
		if res.contentHash, err = resources.ContentHash(current); err != nil {
			return errors.Wrapf(err, "%s: hash content", s.id)
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

// applyOwner is owner as the apply engine knows it.
func (c *Controller) applyOwner(owner client.Object) apply.Owner {
	return apply.Owner{Object: owner, Kind: c.ownerGVK.Kind, Controller: c.name}
}

// desired returns the node's object as it will be applied (apply.Desired): the author's object
// with kdag's labels, the Keep annotation, the owner reference, the dependencies' hash and the
// desired hash.
func (c *Controller) desired(owner client.Object, s *nodeSpec, results []nodeResult) (*unstructured.Unstructured, error) {
	return apply.Desired(c.applyOwner(owner), s.obj, s.gvk, c.scheme,
		apply.DesiredOptions{Keep: s.keep, DependenciesHash: dependenciesHash(s, results)})
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

// checkReady returns nil when current is ready, a *waitingError when not yet, and an error when
// it failed for good (a Failed Job) or the readiness function failed.
func (c *Controller) checkReady(s *nodeSpec, current *unstructured.Unstructured) error {
	if s.readyWhen != nil {
		typed, err := c.newObject(s)
		if err != nil {
			return err
		}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(current.Object, typed); err != nil {
			return errors.Wrapf(err, "%s: convert for readiness", s.id)
		}
		ok, err := s.readyWhen(typed)
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
	r, err := resources.Ready(current)
	switch {
	case err != nil:
		return errors.Wrapf(err, "%s: readiness", s.id)
	case r.Status == resources.StatusFailed:
		return newObjectFailed(s.id, current, r.Message)
	case !r.Ready:
		return &waitingError{msg: s.id.String() + " is not ready (" + r.Status + ")"}
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
