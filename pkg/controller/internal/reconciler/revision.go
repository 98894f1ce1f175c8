package reconciler

import (
	"context"
	"reflect"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/pkg/errors"
	"go.opentelemetry.io/otel/trace"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/apply"
	"github.com/kdag-dev/kdag/pkg/revision"
)

// Revisions: a reconcile that wrote any of the owner's objects (created, applied, adopted,
// re-created, pruned or orphaned one) records what it did as a revision, an apps/v1
// ControllerRevision owned by the owner (package revision has the format). A reconcile that
// wrote nothing records nothing: a settled owner's reconcile still makes no request. The
// revisions are read from the manager's cache (CacheOptions selects them by kdag's controller
// label and strips their data: numbers and pruning need the metadata and the number alone), so
// the next number costs no request either. Revisions carry no shard label: an owner moved to
// another shard keeps one numbered history, which the new shard's cache holds from the start,
// whatever the old shard wrote last.

// revisions remembers the last revision number recorded per owner UID, for a cache that has not
// seen the last write yet.
type revisions struct {
	last sync.Map // types.UID → int64
}

// watchRevisions makes the manager's cache hold ControllerRevisions from its start, so that the
// first reconcile that records one does not wait for an informer to sync.
func watchRevisions(mgr ctrl.Manager) error {
	_, err := mgr.GetCache().GetInformer(context.Background(), &appsv1.ControllerRevision{})
	return err
}

// startRevision records r as a revision of owner, when r wrote any object, on a goroutine of
// its own, and returns a function that waits until it is recorded. The revision and the owner's
// status are independent writes: sent together, the revision adds no round trip to the owner's
// way to Ready (issue 32). The goroutine works on a copy of owner (the status write updates
// owner in place) and on what r wrote, taken before it starts; it never reads r. A reconcile
// that wrote nothing starts nothing.
func (c *Reconciler) startRevision(ctx context.Context, owner client.Object, r *outcome) (wait func()) {
	changes := r.revisionNodes()
	if len(changes) == 0 || owner.GetNamespace() == "" {
		return func() {}
	}
	owner = owner.DeepCopyObject().(client.Object)
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.recordRevision(ctx, owner, changes)
	}()
	return func() { <-done }
}

// recordRevision records changes (what a reconcile wrote, non-empty) as a revision of owner,
// and deletes the oldest revisions beyond the owner's history limit. A failure is logged and
// reported with a Warning event; it never fails the reconcile (the objects are written; only
// their history lacks an entry). Cluster-scoped owners have no revisions (a ControllerRevision
// is namespaced): startRevision never calls it for one.
func (c *Reconciler) recordRevision(ctx context.Context, owner client.Object, changes []revision.NodeChange) {
	limit, valid := revision.HistoryLimit(owner)
	if !valid {
		c.event(ctx, owner, corev1.EventTypeWarning, "InvalidRevisionHistoryLimit",
			"annotation %s=%q is not a non-negative integer: keeping %d revisions", revision.AnnotationHistoryLimit,
			owner.GetAnnotations()[revision.AnnotationHistoryLimit], revision.DefaultHistoryLimit)
	}
	if err := c.writeRevision(ctx, owner, changes, limit); err != nil {
		logFrom(ctx).Info("could not record a revision", "error", err.Error())
		c.event(ctx, owner, corev1.EventTypeWarning, "RevisionFailed", "%s", truncate(err.Error(), 512))
	}
}

// writeRevision creates the revision of changes (unless limit is 0) and prunes the owner's
// revisions to limit.
func (c *Reconciler) writeRevision(ctx context.Context, owner client.Object, changes []revision.NodeChange, limit int) error {
	what := c.ownerGVK.Kind + " " + client.ObjectKeyFromObject(owner).String()
	existing, err := c.listRevisions(ctx, owner, false)
	if err != nil {
		return errors.Wrapf(err, "%s: list its revisions from the cache", what)
	}
	if limit > 0 {
		spec, err := revision.Spec(owner)
		if err != nil {
			return errors.Wrapf(err, "%s: record a revision", what)
		}
		rec := &revision.Record{
			Time: metav1.NewTime(time.Now()),
			Owner: revision.OwnerRef{APIVersion: c.ownerGVK.GroupVersion().String(), Kind: c.ownerGVK.Kind,
				Name: owner.GetName(), UID: string(owner.GetUID())},
			Generation: owner.GetGeneration(), SpecHash: revision.SpecHash(spec), OperatorVersion: c.opts.OperatorVersion,
			Controller: c.name, Spec: spec, Nodes: changes,
		}
		if sc := trace.SpanContextFromContext(ctx); sc.HasTraceID() {
			rec.TraceID = sc.TraceID().String()
		}
		cr, err := c.createRevision(ctx, owner, rec, nextRevision(existing, c.revisions.lastOf(owner)))
		if apierrors.IsAlreadyExists(err) {
			// The cache has not seen a revision written since (by this process before a restart,
			// or by the owner's previous shard): ask the API server.
			if existing, err = c.listRevisions(ctx, owner, true); err != nil {
				return errors.Wrapf(err, "%s: list its revisions", what)
			}
			cr, err = c.createRevision(ctx, owner, rec, nextRevision(existing, c.revisions.lastOf(owner)))
		}
		if err != nil {
			return errors.Wrapf(err, "%s: create revision", what)
		}
		c.revisions.last.Store(owner.GetUID(), cr.Revision)
		existing = append(existing, *cr)
	}
	return c.pruneRevisions(ctx, existing, limit, what)
}

// createRevision creates revision n of owner holding rec.
func (c *Reconciler) createRevision(ctx context.Context, owner client.Object, rec *revision.Record, n int64) (*appsv1.ControllerRevision, error) {
	data, err := revision.Encode(rec)
	if err != nil {
		return nil, err
	}
	cr := &appsv1.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: owner.GetNamespace(),
			Name:      revision.Name(c.ownerGVK.Kind, owner.GetName(), n),
			Labels:    revision.Labels(owner, c.ownerGVK.Kind, c.name),
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: c.ownerGVK.GroupVersion().String(), Kind: c.ownerGVK.Kind, Name: owner.GetName(),
				UID: owner.GetUID(), Controller: ptr.To(true),
			}},
		},
		Data:     data,
		Revision: n,
	}
	return cr, c.client.Create(ctx, cr, client.FieldOwner(c.opts.FieldManager))
}

// pruneRevisions deletes the oldest of revs beyond limit, each with a UID precondition.
func (c *Reconciler) pruneRevisions(ctx context.Context, revs []appsv1.ControllerRevision, limit int, what string) error {
	if len(revs) <= limit {
		return nil
	}
	sort.Slice(revs, func(i, j int) bool { return revs[i].Revision < revs[j].Revision })
	for i := range revs[:len(revs)-limit] {
		cr := &revs[i]
		err := c.client.Delete(ctx, cr, client.Preconditions{UID: ptr.To(cr.UID)})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return errors.Wrapf(err, "%s: delete its revision %d (ControllerRevision %s) beyond the history limit %d", what,
				cr.Revision, cr.Name, limit)
		}
	}
	return nil
}

// listRevisions returns owner's revisions: from the cache (without their data), or from the API
// server when live. From the cache the list is a lookup in the owner index (indexRevisions); the
// API server, which knows no such index, filters by the labels.
func (c *Reconciler) listRevisions(ctx context.Context, owner client.Object, live bool) ([]appsv1.ControllerRevision, error) {
	list := &appsv1.ControllerRevisionList{}
	var r client.Reader = c.client
	var match client.ListOption = client.MatchingLabels{
		kdagv1alpha1.LabelOwnerUID: string(owner.GetUID()), kdagv1alpha1.LabelController: c.name,
	}
	switch {
	case live:
		r = c.reader
	case c.revisionsIndexed:
		match = client.MatchingFields{c.ownerIndex(): string(owner.GetUID())}
	}
	if err := r.List(ctx, list, client.InNamespace(owner.GetNamespace()), match); err != nil {
		return nil, err
	}
	return list.Items, nil
}

// indexRevisions indexes the cached ControllerRevisions this controller recorded by their owner
// UID label, under ownerIndex (the index of the owned types: a revision carries the same two
// labels). Without it every revision recorded lists the cache's revisions of every owner in the
// namespace and matches their labels: a cost that grows with owners² over a deploy
// (docs/benchmarks.md, section 3, has the measurements). When the type is also one the
// controller owns, indexOwned added the index already. It reports false when the cache cannot
// add it (it has started): the list then filters by label.
func (c *Reconciler) indexRevisions(mgr ctrl.Manager) bool {
	for _, t := range c.owned {
		if t.gvk.Group == appsv1.GroupName && t.gvk.Kind == "ControllerRevision" {
			return t.indexed
		}
	}
	return c.indexOwned(mgr, &appsv1.ControllerRevision{})
}

// lastOf returns the last revision number this process recorded of owner, 0 when none.
func (r *revisions) lastOf(owner client.Object) int64 {
	if v, ok := r.last.Load(owner.GetUID()); ok {
		return v.(int64)
	}
	return 0
}

// forget drops what r remembers of an owner.
func (r *revisions) forget(owner metav1.Object) {
	r.last.Delete(owner.GetUID())
}

// nextRevision is one more than the highest of existing and last.
func nextRevision(existing []appsv1.ControllerRevision, last int64) int64 {
	for i := range existing {
		last = max(last, existing[i].Revision)
	}
	return last + 1
}

// revisionNodes returns what r wrote, per object, for a revision: the nodes created, applied,
// adopted or re-created (whose write went through), then the objects pruned and orphaned. Nil
// when r wrote nothing.
func (r *outcome) revisionNodes() []revision.NodeChange {
	var out []revision.NodeChange
	for i := range r.nodes {
		n := &r.nodes[i]
		ch := revision.NodeChange{Group: n.spec.id.Group, Kind: n.spec.id.Kind, Namespace: n.spec.id.Namespace,
			Name: n.spec.id.Name, Action: string(n.action)}
		switch n.action {
		case apply.Created, apply.Applied, apply.Adopted:
			if n.live == nil { // the write did not go through
				continue
			}
			if n.action != apply.Created {
				ch.Fields = changedPaths(n.before, n.live)
				ch.Drifted = slices.Clone(n.drifted)
			}
		case apply.Recreating:
			if n.state == kdagv1alpha1.NodeFailed { // the delete did not go through
				continue
			}
			ch.Fields = slices.Clone(n.drifted)
		default:
			continue
		}
		if len(ch.Fields) > revision.MaxFields {
			ch.MoreFields = len(ch.Fields) - revision.MaxFields
			ch.Fields = ch.Fields[:revision.MaxFields]
		}
		out = append(out, ch)
	}
	for _, id := range r.prune.pruned {
		out = append(out, revision.NodeChange{Group: id.Group, Kind: id.Kind, Namespace: id.Namespace, Name: id.Name, Action: string(apply.Pruned)})
	}
	for _, id := range r.prune.orphaned {
		out = append(out, revision.NodeChange{Group: id.Group, Kind: id.Kind, Namespace: id.Namespace, Name: id.Name, Action: string(apply.Orphaned)})
	}
	return out
}

// changedPaths returns the paths of the fields that differ between before (the object the cache
// held, typed or unstructured; nil when there was none) and after (the write's response). A typed
// before is compared with after converted to its type and back, so that what the conversion
// normalizes (a duration "10m" written "10m0s") is no change.
func changedPaths(before, after client.Object) []string {
	if before == nil || after == nil {
		return nil
	}
	b, err := contentOf(before)
	if err != nil {
		return nil
	}
	if u, ok := after.(*unstructured.Unstructured); ok {
		if _, typed := before.(*unstructured.Unstructured); !typed {
			if t, ok := reflect.New(reflect.TypeOf(before).Elem()).Interface().(client.Object); ok &&
				runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, t) == nil {
				after = t
			}
		}
	}
	a, err := contentOf(after)
	if err != nil {
		return nil
	}
	return revision.ChangedPaths(b, a)
}

// contentOf returns obj's content (read only).
func contentOf(obj client.Object) (map[string]any, error) {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		return u.Object, nil
	}
	return runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
}
