package reconciler

import (
	"context"
	"strings"

	"github.com/pkg/errors"
	"go.opentelemetry.io/otel/attribute"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/graph"
	"github.com/kdag-dev/kdag/pkg/tracing"
)

type pruneResult struct {
	pruned   []graph.NodeID
	orphaned []graph.NodeID // kept objects, released instead of deleted
	keptBy   []string       // for each of orphaned, the annotation that kept it
	// terminating are the owner's objects that left the graph and are being deleted but still
	// exist (another finalizer holds them: a claim in use, a load balancer's clean-up), with
	// the finalizers that hold them: the owner is not Ready until they are gone, and their
	// deletion event reconciles it again (a recheck every TeardownRecheck bounds the wait).
	terminating []terminatingObject
	err         error
}

// terminatingObject is an object prune waits for.
type terminatingObject struct {
	id         graph.NodeID
	finalizers []string
}

// prune deletes the objects of the owned types that carry this owner's UID label but are not in
// the graph any more (a component switched off). It reads from the cache, matches on the owner's
// UID (never on names) and deletes with a UID precondition, so it cannot touch an object that
// kdag did not apply for this owner. A kept object (on the live object: Keep, or a
// user's annotation) is orphaned instead. An object of the owner's that left the graph and is
// being deleted is recorded as terminating (r.terminating): the owner is not Ready while it exists.
func (c *Reconciler) prune(ctx context.Context, owner client.Object, inGraph map[graph.NodeID]int) (r pruneResult) {
	ctx, span := startSpan(ctx, spanPrune)
	defer func() {
		span.SetAttributes(attribute.Int("kdag.prune.deleted", len(r.pruned)))
		tracing.EndSpan(span, r.err)
	}()
	var failed []string
	defer func() {
		if r.err != nil { // a list failed
			failed = append(failed, r.err.Error())
		}
		if len(failed) > 0 {
			r.err = errors.Errorf("%s; kdag retries with backoff: let the manager delete it (RBAC, an admission webhook), or delete it yourself",
				strings.Join(failed, "; "))
		}
	}()
	for _, l := range c.ownedObjects(ctx, owner, &r.err) {
		id := l.id()
		if _, ok := inGraph[id]; ok || !c.engine.Owns(c.applyOwner(owner), l.obj) {
			continue // in the graph, or not owner's (a copy that kept the labels)
		}
		entry, err := c.engine.Prune(ctx, c.applyOwner(owner), l.own())
		switch {
		case err != nil:
			failed = append(failed, errors.Wrapf(err, "prune %s", id).Error())
			continue
		case entry.Waiting != "":
			// Going, but still there (its finalizers): the owner waits for it, and a reconcile of
			// it already running creates nothing more.
			c.opts.Deletions.Record(id, l.obj.GetUID())
			r.terminating = append(r.terminating, terminatingObject{id: id, finalizers: l.obj.GetFinalizers()})
			continue
		case entry.KeptBy != "":
			logFrom(ctx).Info("orphaned", "node", id.String(), "action", entry.Action, "keptBy", entry.KeptBy)
			r.orphaned, r.keptBy = append(r.orphaned, id), append(r.keptBy, entry.KeptBy)
			continue
		}
		logFrom(ctx).Info("pruned", "node", id.String(), "action", entry.Action)
		c.opts.Deletions.Record(id, l.obj.GetUID())
		r.pruned = append(r.pruned, id)
	}
	return r
}

// listed is an object ownedObjects found, with its kind.
type listed struct {
	obj client.Object
	gvk schema.GroupVersionKind
}

func (l listed) id() graph.NodeID {
	return graph.NodeID{Group: l.gvk.Group, Kind: l.gvk.Kind, Namespace: l.obj.GetNamespace(), Name: l.obj.GetName()}
}

// own returns a copy of the object with its GVK set, to write or hand to the engine.
func (l listed) own() client.Object {
	o := l.obj.DeepCopyObject().(client.Object)
	o.GetObjectKind().SetGroupVersionKind(l.gvk)
	return o
}

// ownedObjects lists, from the cache, every object of the owned types that carries the owner's
// UID label. The objects are the cache's own (read them; listed.own makes a copy to change). A
// failed list is recorded in *errp and skipped.
func (c *Reconciler) ownedObjects(ctx context.Context, owner client.Object, errp *error) []listed {
	var out []listed
	for _, t := range c.owned {
		obj, err := c.scheme.New(t.list)
		if err != nil {
			*errp = errors.Wrapf(err, "new %s", t.list.Kind)
			continue
		}
		list, ok := obj.(client.ObjectList)
		if !ok {
			continue
		}
		var match client.ListOption = client.MatchingLabels{kdagv1alpha1.LabelOwnerUID: string(owner.GetUID())}
		if t.indexed {
			match = client.MatchingFields{c.ownerIndex(): string(owner.GetUID())}
		}
		// No copy: every reconcile lists, and only the few objects kdag writes need one.
		if err := c.client.List(ctx, list, match, client.UnsafeDisableDeepCopy); err != nil {
			*errp = errors.Wrapf(err, "list %s", t.list.Kind)
			continue
		}
		items, err := meta.ExtractList(list)
		if err != nil {
			*errp = errors.Wrapf(err, "read %s", t.list.Kind)
			continue
		}
		for _, item := range items {
			if o, ok := item.(client.Object); ok {
				out = append(out, listed{obj: o, gvk: t.gvk})
			}
		}
	}
	return out
}
