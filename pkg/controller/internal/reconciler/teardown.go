package reconciler

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/pkg/errors"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/graph"
)

// TeardownRecheck is how soon a teardown that waits for objects to be gone runs again. The
// deletions' watch events usually resume it sooner; this bounds the wait when none comes.
const TeardownRecheck = 5 * time.Second

// finalize tears down a deleted owner that holds kdag's finalizer, then removes the finalizer.
// First it runs the graph's BeforeDelete hooks (runBeforeDelete): nothing is deleted until they
// completed or were skipped. With ordered teardown (OrderedTeardown or a Cleaner) it deletes the owner's objects in reverse
// dependency order (an object only once every object that depends on it is gone), then runs the
// Cleaner. Otherwise (the finalizer is held because the graph has objects owner references
// cannot cover) it deletes only the objects without an owner reference to the owner and leaves
// the rest to the garbage collector. Kept objects are orphaned, never deleted. While objects are
// still being deleted it requeues after TeardownRecheck.
func (c *Reconciler) finalize(ctx context.Context, owner client.Object) (reconcile.Result, error) {
	if !controllerutil.ContainsFinalizer(owner, kdagv1alpha1.Finalizer) {
		return reconcile.Result{}, nil
	}
	if res, done, err := c.runBeforeDelete(ctx, owner); !done {
		return res, err
	}
	var remaining int
	var err error
	if c.teardown {
		remaining, err = c.teardownObjects(ctx, owner)
	} else {
		remaining, err = c.releaseUnowned(ctx, owner)
	}
	if err != nil {
		c.event(ctx, owner, corev1.EventTypeWarning, kdagv1alpha1.ReasonTearingDown, "%s", err.Error())
		return reconcile.Result{}, err
	}
	if remaining > 0 {
		logFrom(ctx).V(1).Info("waiting for objects to be deleted", "remaining", remaining)
		return reconcile.Result{RequeueAfter: TeardownRecheck}, nil
	}
	if _, err := c.rm.Cleanup(ctx, owner); err != nil {
		c.event(ctx, owner, corev1.EventTypeWarning, kdagv1alpha1.ReasonCleanupFailed, "cleanup failed, will retry: %s", err.Error())
		return reconcile.Result{}, errors.Wrapf(err, "%s %s: cleanup", c.ownerGVK.Kind, client.ObjectKeyFromObject(owner))
	}
	return c.removeFinalizer(ctx, owner)
}

// releaseUnowned deletes (or orphans, when kept) the owner's objects that carry no owner
// reference to it, and returns how many of them still exist. The garbage collector deletes the
// others once the owner is gone.
func (c *Reconciler) releaseUnowned(ctx context.Context, owner client.Object) (int, error) {
	var listErr error
	objs := c.ownedObjects(ctx, owner, &listErr)
	if listErr != nil {
		return 0, listErr
	}
	remaining := 0
	var errs []string
	for _, l := range objs {
		if c.engine.LeftToGarbageCollector(c.applyOwner(owner), l.obj) || !c.engine.Owns(c.applyOwner(owner), l.obj) {
			continue // the garbage collector's, or not owner's
		}
		// A kept object that still has its owner reference (a user annotated it after kdag's last
		// reconcile) is orphaned too: the garbage collector must not delete it.
		remaining++
		if err := c.deleteForTeardown(ctx, owner, l.id(), l.own()); err != nil {
			errs = append(errs, err.Error())
		}
	}
	if len(errs) > 0 {
		return 0, errors.New(strings.Join(errs, "; "))
	}
	return remaining, nil
}

// teardownObjects deletes the owner's objects, dependents before their blockers, and returns
// how many still exist. Objects outside the current graph (the graph cannot be built, or they
// were never pruned) go first, in any order.
func (c *Reconciler) teardownObjects(ctx context.Context, owner client.Object) (int, error) {
	var listErr error
	objs := c.ownedObjects(ctx, owner, &listErr)
	if listErr != nil {
		return 0, listErr
	}
	live := make(map[graph.NodeID]client.Object, len(objs))
	for _, l := range objs {
		if !c.engine.Owns(c.applyOwner(owner), l.obj) {
			continue // a copy that kept the labels: not owner's, not kdag's to delete
		}
		live[l.id()] = l.own()
	}
	if len(live) == 0 {
		return 0, nil
	}

	// The graph of the owner as it is now; without it, everything is "outside the graph".
	var specs []*nodeSpec
	if b, err := buildGraph(ctx, c.rm, owner, c.scheme, c.mapper, c.ownedKind); err == nil {
		specs = b.nodes
	}
	inGraph := make(map[graph.NodeID]bool, len(specs))
	for _, s := range specs {
		inGraph[s.id] = true
	}

	// Reverse graph: a node's blockers are its dependents, added first (reverse insertion order).
	g := graph.New[graph.NodeID](graph.Options{SizeHint: len(specs) + 1})
	const outside = "(objects outside the graph)"
	outsideID := graph.NodeID{Kind: outside}
	deleteOutside := func(ctx context.Context) error {
		pending := 0
		var firstErr error
		for id, o := range live {
			if !inGraph[id] {
				pending++
				if err := c.deleteForTeardown(ctx, owner, id, o); err != nil && firstErr == nil {
					firstErr = err
				}
			}
		}
		if firstErr != nil {
			return firstErr
		}
		if pending > 0 {
			return &waitingError{msg: fmt.Sprintf("%d objects outside the graph are being deleted", pending)}
		}
		return nil
	}
	if err := g.AddNode(outsideID, deleteOutside); err != nil {
		return 0, err
	}
	dependents := make(map[graph.NodeID][]graph.NodeID, len(specs))
	for _, s := range specs {
		for _, bl := range s.blockers {
			dependents[bl.id] = append(dependents[bl.id], s.id)
		}
	}
	for i := len(specs) - 1; i >= 0; i-- {
		id := specs[i].id
		fn := func(ctx context.Context) error {
			o, ok := live[id]
			if !ok {
				return nil
			}
			if err := c.deleteForTeardown(ctx, owner, id, o); err != nil {
				return err
			}
			return &waitingError{msg: id.String() + " is being deleted"}
		}
		if err := g.AddNode(id, fn, append([]graph.NodeID{outsideID}, dependents[id]...)...); err != nil {
			return 0, err
		}
	}
	res, _ := g.Run(ctx, graph.RunOptions{MaxParallel: c.opts.MaxParallelNodes})
	for _, n := range res.Nodes {
		var w *waitingError
		if n.Outcome == graph.Failed && !errors.As(n.Err, &w) {
			return 0, n.Err
		}
	}
	// Every object listed still existed when this pass began; the deletions just issued are
	// seen by the next pass, which their watch events start.
	return len(live), nil
}

// deleteForTeardown deletes o unless it is already terminating, or orphans it when it is kept.
// o still counts as existing until the cache says otherwise, and its blockers wait for that. A
// failed delete is returned: no watch event would resume the teardown, so the reconcile must
// fail and be retried.
func (c *Reconciler) deleteForTeardown(ctx context.Context, owner client.Object, id graph.NodeID, o client.Object) error {
	entry, err := c.engine.Teardown(ctx, c.applyOwner(owner), o)
	switch {
	case err != nil:
		return errors.Wrapf(err, "teardown: %s", id)
	case entry.KeptBy != "":
		logFrom(ctx).Info("orphaned", "node", id.String(), "action", entry.Action, "keptBy", entry.KeptBy)
		c.eventRelated(ctx, owner, o, corev1.EventTypeNormal, "Orphaned", "Kept %s (teardown): released, not deleted (annotated %s)", id, entry.KeptBy)
	case entry.Waiting == "":
		c.opts.Deletions.Record(id, o.GetUID())
		logFrom(ctx).Info("deleted", "node", id.String(), "action", entry.Action)
		c.event(ctx, owner, corev1.EventTypeNormal, "Deleted", "Deleted %s (teardown)", id)
	}
	return nil
}
