package reconciler

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/pkg/errors"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/controller/internal/referenced"
	"github.com/kdag-dev/kdag/pkg/graph"
)

// dataKeyMissingError is the error of a ProtectsData node whose object is gone while the data it
// opens exists: a new generated key would not open it, so kdag generates none. It is terminal
// (the owner is Stalled with reason DataKeyMissing) until the object is restored or the data
// deleted, either of which the owner's watches see.
type dataKeyMissingError struct {
	// Node is the node whose object is gone.
	Node graph.NodeID
	// Data is the object holding the data (a volume claim).
	Data graph.NodeID
	// Annotation is the kdagv1alpha1.AnnotationAdopt value a restored object needs when it carries no kdag
	// labels (a copy from a backup).
	Annotation string
}

func (e *dataKeyMissingError) Error() string {
	return fmt.Sprintf("%s is gone while %s, whose data it opens, exists: kdag does not generate a new one, which would "+
		"not open the data; restore %s (from a backup, annotated %s=%s), or delete %s to start with empty data",
		e.Node, e.Data, e.Node, kdagv1alpha1.AnnotationAdopt, e.Annotation, e.Data)
}

// Is makes errors.Is(err, reconcile.TerminalError(nil)) hold: only a person can help.
func (e *dataKeyMissingError) Is(target error) bool {
	return errors.Is(reconcile.TerminalError(nil), target)
}

func (e *dataKeyMissingError) conditionReason() string { return kdagv1alpha1.ReasonDataKeyMissing }

// watchedObjects returns the objects of specs whose changes must reconcile the owner although
// the manager's cache does not hold them: the objects of Reference nodes, and, for ProtectsData
// nodes, their own object and the data they protect.
func (c *Reconciler) watchedObjects(specs []*nodeSpec) ([]referenced.Watched, error) {
	var out []referenced.Watched
	for _, s := range specs {
		switch {
		case s.reference:
			out = append(out, referenced.Watched{ID: s.id, GVK: s.gvk})
		case s.protects != nil:
			data, gvk, err := c.protectedData(s)
			if err != nil {
				return nil, err
			}
			out = append(out, referenced.Watched{ID: s.id, GVK: s.gvk}, referenced.Watched{ID: data, GVK: gvk})
		}
	}
	return out, nil
}

// protectedData returns the identity and kind of the data s protects (ProtectsData); its
// namespace defaults to the node's for a namespaced kind.
func (c *Reconciler) protectedData(s *nodeSpec) (graph.NodeID, schema.GroupVersionKind, error) {
	gvk, err := apiutil.GVKForObject(s.protects, c.scheme)
	if err != nil {
		return graph.NodeID{}, gvk, errors.Wrapf(err, "%s: the kind of the data it protects", s.id)
	}
	ns := s.protects.GetNamespace()
	if ns == "" {
		namespaced, err := c.namespaced(gvk)
		if err != nil {
			return graph.NodeID{}, gvk, errors.Wrapf(err, "%s: the scope of the data it protects", s.id)
		}
		if namespaced {
			ns = s.id.Namespace
		}
	}
	return graph.NodeID{Group: gvk.Group, Kind: gvk.Kind, Namespace: ns, Name: s.protects.GetName()}, gvk, nil
}

// checkProtectedData returns a *dataKeyMissingError when the object of the ProtectsData node s,
// which the cache does not hold, may not be created: the data it protects exists, and the object
// does not (an uncached metadata read tells a missing object from one the cache does not hold,
// such as a restored copy without kdag's labels, which the create path then adopts or refuses).
func (c *Reconciler) checkProtectedData(ctx context.Context, owner client.Object, s *nodeSpec) error {
	if s.protects == nil {
		return nil
	}
	data, gvk, err := c.protectedData(s)
	if err != nil {
		return err
	}
	m, err := c.refs.Cached(ctx, gvk, data.Namespace, data.Name)
	if err != nil {
		return errors.Wrapf(err, "%s: look for %s", s.id, data)
	}
	if m == nil {
		return nil
	}
	existing := &metav1.PartialObjectMetadata{}
	existing.SetGroupVersionKind(s.gvk)
	switch err := c.reader.Get(ctx, client.ObjectKey{Namespace: s.id.Namespace, Name: s.id.Name}, existing); {
	case err == nil:
		return nil
	case !apierrors.IsNotFound(err):
		return errors.Wrapf(err, "%s: read", s.id)
	}
	return &dataKeyMissingError{Node: s.id, Data: data, Annotation: c.applyOwner(owner).AdoptValue(s.id.Namespace)}
}

// namespaced reports whether objects of gvk live in namespaces.
func (c *Reconciler) namespaced(gvk schema.GroupVersionKind) (bool, error) {
	mapping, err := c.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return false, err
	}
	return mapping.Scope.Name() == "namespace", nil
}

// terminatingMemory is how long kdag remembers that a namespace is being deleted, unless an
// owner created since says the namespace was created again.
const terminatingMemory = 10 * time.Minute

// isNamespaceTerminating reports whether err is the API server refusing to create an object in
// a namespace that is being deleted.
func isNamespaceTerminating(err error) bool {
	return apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause)
}

// markNamespaceTerminating records that namespace is being deleted: its owners are going away,
// so kdag makes no more attempts to create anything there.
func (c *Reconciler) markNamespaceTerminating(namespace string) {
	c.terminating.Store(namespace, time.Now())
}

// namespaceTerminating reports whether namespace was seen being deleted (within
// terminatingMemory).
func (c *Reconciler) namespaceTerminating(namespace string) bool {
	v, ok := c.terminating.Load(namespace)
	if !ok {
		return false
	}
	if time.Since(v.(time.Time)) > terminatingMemory {
		c.terminating.Delete(namespace)
		return false
	}
	return true
}

// forgetTerminatingNamespace drops the record of owner's namespace being deleted when owner was
// created after it was seen: the namespace exists again.
func (c *Reconciler) forgetTerminatingNamespace(owner client.Object) {
	if v, ok := c.terminating.Load(owner.GetNamespace()); ok && owner.GetCreationTimestamp().After(v.(time.Time)) {
		c.terminating.Delete(owner.GetNamespace())
	}
}

// errNamespaceTerminating is the node's state in a namespace being deleted: waiting, not an
// error: no retry, no error log, no Warning event; the owner goes with its namespace.
func errNamespaceTerminating(id graph.NodeID) error {
	return &waitingError{msg: id.String() + ": its namespace is being deleted", detail: "its namespace is being deleted"}
}

// errOwnerDeleted is the node's state when its owner is going while the owner's reconcile runs:
// this process deleted it (a parent's prune), or the API server no longer holds it as the
// reconcile read it (ownerGone). Waiting, not an error; nothing is created for an owner that is
// going, and the deletion's event reconciles it again (its teardown).
func errOwnerDeleted(id graph.NodeID, kind string, owner client.Object) error {
	detail := fmt.Sprintf("its owner %s %s/%s is being deleted", kind, owner.GetNamespace(), owner.GetName())
	return &waitingError{msg: id.String() + ": " + detail, detail: detail}
}

// leaveDyingNamespace is the reconcile of an owner whose namespace is being deleted: the owner
// goes with it, so kdag creates nothing, writes no status and emits no event (the API server
// refuses new objects there, events included). Only objects outside the namespace (another
// namespace, cluster-scoped) need kdag: with its finalizer held, kdag deletes them (or orphans
// kept ones) and then removes the finalizer, so that the namespace can go.
func (c *Reconciler) leaveDyingNamespace(ctx context.Context, owner client.Object) (reconcile.Result, error) {
	logFrom(ctx).V(1).Info("namespace is being deleted: the owner goes with it")
	if !controllerutil.ContainsFinalizer(owner, kdagv1alpha1.Finalizer) {
		return reconcile.Result{}, nil
	}
	var listErr error
	objs := c.ownedObjects(ctx, owner, &listErr)
	if listErr != nil {
		return reconcile.Result{}, listErr
	}
	remaining := 0
	for _, l := range objs {
		if l.obj.GetNamespace() == owner.GetNamespace() || !c.engine.Owns(c.applyOwner(owner), l.obj) {
			continue // goes with the namespace, or not owner's
		}
		remaining++
		if err := c.deleteForTeardown(ctx, owner, l.id(), l.own()); err != nil {
			return reconcile.Result{}, err
		}
	}
	if remaining > 0 {
		return reconcile.Result{RequeueAfter: TeardownRecheck}, nil
	}
	return c.removeFinalizer(ctx, owner)
}

// removeFinalizer removes kdag's finalizer from owner, on the condition that owner is the version
// kdag read (another finalizer added meanwhile is not lost). When the cache was behind, the API
// server answers Conflict: kdag tries again once the cache has caught up, without an error.
func (c *Reconciler) removeFinalizer(ctx context.Context, owner client.Object) (reconcile.Result, error) {
	patch := client.MergeFromWithOptions(owner.DeepCopyObject().(client.Object), client.MergeFromWithOptimisticLock{})
	controllerutil.RemoveFinalizer(owner, kdagv1alpha1.Finalizer)
	err := c.client.Patch(ctx, owner, patch, client.FieldOwner(c.opts.FieldManager))
	if apierrors.IsConflict(err) {
		return reconcile.Result{RequeueAfter: time.Second}, nil
	}
	return reconcile.Result{}, errors.Wrapf(client.IgnoreNotFound(err), "%s %s: remove finalizer", c.ownerGVK.Kind, client.ObjectKeyFromObject(owner))
}

// ownerCheck is what the nodes of one reconcile share about their owner: its live read
// (ownerGone), made at most once, by the first node that asks, whatever the number of nodes
// running concurrently; and its finalizer being written beside them (nil when none is).
type ownerCheck struct {
	once      sync.Once
	gone      bool
	err       error
	finalizer *finalizerWrite
}

// ownerGone reports whether owner, as the API server holds it now, is gone, replaced by another
// object of its name (another UID) or being deleted, while the reconcile's copy (the cache's, or
// one read before a deletion made while the graph ran) shows none of that. It is asked before an
// object that the owner's last status lists as applied is created again: that object was deleted,
// and the one who deletes an owner's objects is often the garbage collector, which deletes them
// once the owner is gone, and which the owner's cache may not have seen yet. Created then, the
// object would be garbage at once, deleted again a moment later (found by the crash explorer:
// TestGitea_DeletedWithDeletePolicy after write 21, the Valkey's Deployment). The read is of
// metadata only, uncached, and made at most once per reconcile, only there: a first deploy and a
// no-op read nothing. A gone owner is recorded in Deletions, so that the reconcile writes no
// status either. The error is the read's, naming the owner.
func (c *Reconciler) ownerGone(ctx context.Context, owner client.Object, oc *ownerCheck) (bool, error) {
	oc.once.Do(func() {
		m := &metav1.PartialObjectMetadata{}
		m.SetGroupVersionKind(c.ownerGVK)
		switch err := c.reader.Get(ctx, client.ObjectKeyFromObject(owner), m); {
		case apierrors.IsNotFound(err):
			oc.gone = true
		case err != nil:
			oc.err = errors.Wrapf(err, "%s %s/%s: read the owner from the API server before creating again an object "+
				"it had (retried; the account needs get on %s)", c.ownerGVK.Kind, owner.GetNamespace(), owner.GetName(), c.ownerGVK.Kind)
			return
		default:
			oc.gone = m.UID != owner.GetUID() || m.DeletionTimestamp != nil
		}
		if oc.gone {
			c.opts.Deletions.Record(graph.NodeID{Group: c.ownerGVK.Group, Kind: c.ownerGVK.Kind,
				Namespace: owner.GetNamespace(), Name: owner.GetName()}, owner.GetUID())
		}
	})
	return oc.gone, oc.err
}
