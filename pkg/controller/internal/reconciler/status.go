package reconciler

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/pkg/errors"
	"go.opentelemetry.io/otel/trace"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/apply"
	"github.com/kdag-dev/kdag/pkg/graph"
)

// writeStatus computes the owner's kdag status from r, writes it with a server-side apply of the
// status subresource — only when it differs from the cached owner's, so an unchanged owner costs
// no write — and then emits events for what changed. The events go last, written or not, so that
// their requests do not compete with the status write, the end of the reconcile's critical path.
func (c *Reconciler) writeStatus(ctx context.Context, owner client.Object, r *outcome) error {
	var (
		live map[string]any // the owner's status as content; nil until needed
		old  *kdagv1alpha1.Status
		err  error
	)
	current, w := c.statusBase(ctx, owner)
	if w != nil {
		// The cached owner is older than this process's last status write (KEP-5504 makes
		// resourceVersions comparable): what the API server holds is that write, not the cached
		// status. Comparing with the cache would write the same status again, and emit the
		// events of a change that was already told.
		old, live = w.kdag.DeepCopy(), w.content
	} else if st := kdagStatusOf(current); st != nil {
		old = st.DeepCopy() // read in place: the whole owner need not be converted
	} else if live, old, err = currentStatus(current); err != nil {
		return errors.Wrapf(err, "%s %s: read status", c.ownerGVK.Kind, client.ObjectKeyFromObject(owner))
	}
	next := old.DeepCopy()
	next.ObservedGeneration = owner.GetGeneration()
	next.OperatorVersion = c.opts.OperatorVersion
	next.Graph = r.graphSummary()
	setConditions(next, owner.GetGeneration(), r)
	next.WaitingFor = nil
	if !r.allReady() {
		next.WaitingFor = r.waitingFor(old.WaitingFor, time.Now())
	}
	defer func() {
		c.emitNodeEvents(ctx, owner, r)
		c.emitConditionEvents(ctx, owner, old, next)
	}()

	// The cached owner may not show this process's last status write yet: then its status
	// says nothing of what the API server holds, and a write that looks unneeded may be the
	// one that replaces a status the cache has not caught up with (a NotReady written a moment
	// ago, while next is Ready again). Compare with what was last written instead; the
	// owner's status-only update passes no watch predicate, so no later reconcile would.
	behind := c.cacheBehind(owner.GetUID(), next)
	if !behind && !c.rm.IsReporter() && equality.Semantic.DeepEqual(old, next) {
		return nil // kdag's block is all kdag writes, and it is unchanged
	}
	if live == nil {
		if live, _, err = currentStatus(current); err != nil {
			return errors.Wrapf(err, "%s %s: read status", c.ownerGVK.Kind, client.ObjectKeyFromObject(owner))
		}
	}
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(next)
	if err != nil {
		return errors.Wrap(err, "convert status")
	}
	own, err := c.reportStatus(ctx, owner, r)
	if err != nil {
		return err
	}
	for k, v := range own {
		if _, kdags := content[k]; !kdags && !slices.Contains(kdagStatusFields, k) {
			content[k] = v
		}
	}
	if !behind && !statusChanged(live, content, own != nil) {
		return nil
	}
	written := &writtenStatus{kdag: withoutLastReconcile(next), content: runtime.DeepCopyJSON(content)}
	// LastReconcile changes on every reconcile (its timings): it goes only with another change,
	// never causing a write by itself, and is computed only then.
	if content["lastReconcile"], err = runtime.DefaultUnstructuredConverter.ToUnstructured(r.reconcileSummary(ctx)); err != nil {
		return errors.Wrap(err, "convert status")
	}
	if written.resourceVersion, err = c.applyStatus(ctx, owner, content); err != nil {
		c.written.Delete(owner.GetUID())
		return err
	}
	c.written.Store(owner.GetUID(), written)
	// The watch event of this write may have reached the cache before the response came:
	// then no later cache event drops the record (forgetWrittenOnceCached), so look now.
	c.forgetWrittenOnceCached(c.cachedOwner(ctx, owner))
	return nil
}

// cachedOwner returns owner as the cache holds it now, shared with the cache (read it, never
// change it), or owner itself when the cache does not hold it (gone, or another object of that
// name: another UID).
func (c *Reconciler) cachedOwner(ctx context.Context, owner client.Object) client.Object {
	fresh := c.rm.NewOwner()
	if c.client.Get(ctx, client.ObjectKeyFromObject(owner), fresh, client.UnsafeDisableDeepCopy) != nil || fresh.GetUID() != owner.GetUID() {
		return owner
	}
	return fresh
}

// forgetWrittenOnceCached drops this process's record of its last status write for owner (as the
// cache holds it) once the cache holds that write or a later version: from then on the cache is
// what a reconcile compares with (aheadOfCache is false), and the record, a copy of the
// owner's status, would only hold memory for as long as the process runs. A record whose
// resourceVersion cannot be compared (resourceversion.CompareResourceVersion) stays, for
// cacheBehind. The owner informer's add and update handlers call it (Register), and so does the
// status write itself, for a watch event that came before the write's response.
func (c *Reconciler) forgetWrittenOnceCached(owner metav1.Object) {
	if v, ok := c.written.Load(owner.GetUID()); ok {
		c.aheadOfCache(owner, v.(*writtenStatus))
	}
}

// writtenStatus is the status this process last wrote for an owner.
type writtenStatus struct {
	// kdag is kdag's block, lastReconcile left out (withoutLastReconcile).
	kdag *kdagv1alpha1.Status
	// content is the status written, lastReconcile left out: kdag's block and a
	// StatusReporter's fields.
	content map[string]any
	// resourceVersion is the owner's resourceVersion after the write; "" when the response
	// did not say (the owner was gone).
	resourceVersion string
}

// statusBase returns what writeStatus compares a new status with: owner as the cache holds it
// now (not the reconcile's snapshot, which may predate a write whose record is gone since), and,
// while that cached owner is older than this process's last status write for it, that write
// (aheadOfCache); nil otherwise. The record is looked up before the cache is read: a record
// dropped in between was dropped because the cache held the write (forgetWrittenOnceCached),
// which the read then sees. When the cache does not hold the owner (gone, or another one of that
// name), the snapshot stands.
func (c *Reconciler) statusBase(ctx context.Context, owner client.Object) (client.Object, *writtenStatus) {
	v, written := c.written.Load(owner.GetUID())
	current := c.cachedOwner(ctx, owner)
	if !written {
		return current, nil
	}
	if w := v.(*writtenStatus); c.aheadOfCache(current, w) {
		return current, w
	}
	return current, nil
}

// aheadOfCache reports whether w, this process's last status write for owner, is later than
// owner as cached: owner's resourceVersion is lower than the write's. False when the cache holds
// the write or a later version, and then w is dropped (forgetWrittenOnceCached); false too when
// either resourceVersion is not a comparable one (KEP-5504, resourceversion.CompareResourceVersion:
// an API server that does not promise the order): then the cache is trusted, as before the
// write, and w stays for cacheBehind.
func (c *Reconciler) aheadOfCache(owner metav1.Object, w *writtenStatus) bool {
	cmp, err := resourceversion.CompareResourceVersion(owner.GetResourceVersion(), w.resourceVersion)
	if err != nil {
		return false
	}
	if cmp >= 0 {
		c.written.CompareAndDelete(owner.GetUID(), w)
		return false
	}
	return true
}

// cacheBehind reports whether this process last wrote a kdag status block for the owner uid
// other than next: the cached owner then may not show that write yet, and only a write makes
// sure the API server holds next. False when it wrote none (a fresh process trusts its cache).
func (c *Reconciler) cacheBehind(uid types.UID, next *kdagv1alpha1.Status) bool {
	v, ok := c.written.Load(uid)
	return ok && !equality.Semantic.DeepEqual(v.(*writtenStatus).kdag, withoutLastReconcile(next))
}

// withoutLastReconcile returns a copy of st without its lastReconcile (the timings of the
// reconcile that wrote it), as the API server stores it: through JSON, so that its times have
// the precision of the stored ones (seconds) and a status computed from the cached owner
// compares equal to the one written.
func withoutLastReconcile(st *kdagv1alpha1.Status) *kdagv1alpha1.Status {
	out := st.DeepCopy()
	out.LastReconcile = nil
	if b, err := json.Marshal(out); err == nil {
		stored := &kdagv1alpha1.Status{}
		if json.Unmarshal(b, stored) == nil {
			return stored
		}
	}
	return out
}

// reportStatus lets a StatusReporter set the owner's own status fields on a copy of the owner
// and returns that copy's status (kdag's block is set by the caller): nil without a
// StatusReporter.
func (c *Reconciler) reportStatus(ctx context.Context, owner client.Object, r *outcome) (map[string]any, error) {
	rep := Report{Ready: r.allReady(), nodes: make([]nodeReport, len(r.nodes)), scheme: c.scheme, namespace: owner.GetNamespace()}
	for i := range r.nodes {
		n := &r.nodes[i]
		rep.nodes[i] = nodeReport{id: n.spec.id, state: n.state, object: n.live}
	}
	reported, ok := owner.DeepCopyObject().(client.Object)
	if !ok {
		return nil, errors.Errorf("%T is not a client.Object", owner)
	}
	if has, err := c.rm.ReportStatus(ctx, reported, rep); !has || err != nil {
		return nil, errors.Wrapf(err, "%s %s: report status", c.ownerGVK.Kind, client.ObjectKeyFromObject(owner))
	}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(reported)
	if err != nil {
		return nil, errors.Wrapf(err, "%s %s: convert the reported status", c.ownerGVK.Kind, client.ObjectKeyFromObject(owner))
	}
	st, _, _ := unstructured.NestedMap(u, "status")
	return st, nil
}

// statusChanged reports whether any field of content differs from old, the owner's live status,
// or a field kdag owns is gone from content. whole says content is the owner's whole status (a
// StatusReporter's copy of it): then any field gone from content is a change, so that a field
// the reporter cleared is removed from the live status.
func statusChanged(old, content map[string]any, whole bool) bool {
	for k, v := range content {
		if !equality.Semantic.DeepEqual(old[k], v) {
			return true
		}
	}
	gone := kdagStatusFields
	if whole {
		gone = slices.Collect(maps.Keys(old))
	}
	for _, k := range gone {
		if _, had := old[k]; had {
			if _, has := content[k]; !has {
				return true
			}
		}
	}
	return false
}

// kdagStatusOf returns the kdagv1alpha1.Status inside a typed owner's status (by the
// convention of an inline, embedded field: Status struct{ kdagv1alpha1.Status `json:",inline"` }),
// or nil when owner does not follow it (an unstructured owner, another layout).
func kdagStatusOf(owner client.Object) *kdagv1alpha1.Status {
	v := reflect.ValueOf(owner)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return nil
	}
	st := v.Elem().FieldByName("Status")
	if st.Kind() != reflect.Struct {
		return nil
	}
	f, ok := st.Type().FieldByName("Status")
	if !ok || !f.Anonymous || f.Type != reflect.TypeFor[kdagv1alpha1.Status]() || len(f.Index) != 1 {
		return nil
	}
	return st.Field(f.Index[0]).Addr().Interface().(*kdagv1alpha1.Status)
}

// readStatus returns the kdag status of owner, typed (kdagStatusOf) or read from its status
// field; nil when it cannot be read.
func readStatus(owner client.Object) *kdagv1alpha1.Status {
	if st := kdagStatusOf(owner); st != nil {
		return st
	}
	_, st, err := currentStatus(owner)
	if err != nil {
		return nil
	}
	return st
}

// statusListsApplied reports whether owner's last status lists the node id as applied (Ready or
// Waiting in status.graph.nodes): its object existed when the status was written
// (apply.Node.Existed). False when the status does not list the graph's nodes (a graph of more
// than MaxGraphNodes, an owner never reconciled) or cannot be read.
func statusListsApplied(owner client.Object, id graph.NodeID) bool {
	st := readStatus(owner)
	if st == nil || st.Graph == nil {
		return false
	}
	for _, n := range st.Graph.Nodes {
		if n.Group == id.Group && n.Kind == id.Kind && n.Namespace == id.Namespace && n.Name == id.Name {
			return n.State == kdagv1alpha1.NodeReady || n.State == kdagv1alpha1.NodeWaiting
		}
	}
	return false
}

// kdagStatusFields are the status fields kdag owns; a field that disappears is a change.
var kdagStatusFields = []string{"observedGeneration", "conditions", "operatorVersion", "graph", "waitingFor", "lastReconcile"}

// currentStatus returns the live status of any owner type: as content (nil without a status) and
// as kdag's block.
func currentStatus(owner client.Object) (map[string]any, *kdagv1alpha1.Status, error) {
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(owner)
	if err != nil {
		return nil, nil, err
	}
	st := &kdagv1alpha1.Status{}
	raw, ok := u["status"].(map[string]any) // u is a fresh conversion: no copy needed
	if !ok {
		return nil, st, nil
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, st); err != nil {
		return nil, nil, err
	}
	return raw, st, nil
}

func (c *Reconciler) applyStatus(ctx context.Context, owner client.Object, content map[string]any) (string, error) {
	u := &unstructured.Unstructured{Object: map[string]any{"status": content}}
	u.SetGroupVersionKind(c.ownerGVK)
	u.SetNamespace(owner.GetNamespace())
	u.SetName(owner.GetName())
	err := c.client.Status().Apply(ctx, client.ApplyConfigurationFromUnstructured(u),
		client.FieldOwner(c.opts.FieldManager), client.ForceOwnership)
	if err != nil {
		return "", errors.Wrapf(client.IgnoreNotFound(err), "%s %s: write status", c.ownerGVK.Kind, client.ObjectKeyFromObject(owner))
	}
	return u.GetResourceVersion(), nil // the response, decoded into u
}

// setConditions sets Ready, Reconciling and Stalled following kstatus: Ready=True alone when
// everything is ready; Reconciling=True while nodes wait or errors are retried; Stalled=True
// when only a change of the owner helps. Conditions that do not hold are removed, and
// meta.SetStatusCondition keeps lastTransitionTime when a condition's status does not change.
func setConditions(st *kdagv1alpha1.Status, generation int64, r *outcome) {
	set := func(typ string, status metav1.ConditionStatus, reason, msg string) {
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{
			Type: typ, Status: status, Reason: reason, Message: truncate(msg, 1024), ObservedGeneration: generation,
		})
	}
	switch {
	case r.terminal != nil:
		msg := r.terminal.Error()
		set(kdagv1alpha1.ConditionReady, metav1.ConditionFalse, r.reason, msg)
		set(kdagv1alpha1.ConditionStalled, metav1.ConditionTrue, r.reason, msg)
		meta.RemoveStatusCondition(&st.Conditions, kdagv1alpha1.ConditionReconciling)
	case r.transient != nil:
		msg := r.failureError().Error()
		set(kdagv1alpha1.ConditionReady, metav1.ConditionFalse, r.reason, msg)
		set(kdagv1alpha1.ConditionReconciling, metav1.ConditionTrue, r.reason, "retrying: "+msg)
		meta.RemoveStatusCondition(&st.Conditions, kdagv1alpha1.ConditionStalled)
	case r.conflict != nil:
		msg := r.conflict.Error()
		set(kdagv1alpha1.ConditionReady, metav1.ConditionFalse, kdagv1alpha1.ReasonDriftConflict, msg)
		set(kdagv1alpha1.ConditionReconciling, metav1.ConditionTrue, kdagv1alpha1.ReasonDriftConflict, msg)
		meta.RemoveStatusCondition(&st.Conditions, kdagv1alpha1.ConditionStalled)
	case r.ready < len(r.nodes) || len(r.prune.terminating) > 0:
		msg := r.waitingMessage()
		set(kdagv1alpha1.ConditionReady, metav1.ConditionFalse, kdagv1alpha1.ReasonWaiting, msg)
		set(kdagv1alpha1.ConditionReconciling, metav1.ConditionTrue, kdagv1alpha1.ReasonWaiting, msg)
		meta.RemoveStatusCondition(&st.Conditions, kdagv1alpha1.ConditionStalled)
	default:
		set(kdagv1alpha1.ConditionReady, metav1.ConditionTrue, kdagv1alpha1.ReasonReady, fmt.Sprintf("%d nodes ready", len(r.nodes)))
		meta.RemoveStatusCondition(&st.Conditions, kdagv1alpha1.ConditionReconciling)
		meta.RemoveStatusCondition(&st.Conditions, kdagv1alpha1.ConditionStalled)
	}
	// Drifted is about the nodes this reconcile processed; a graph that did not run
	// leaves it as it was. Absent on owners that never reported drift, so that it costs them no
	// status write.
	switch msg := r.driftMessage(); {
	case r.nodes == nil:
	case msg != "":
		set(kdagv1alpha1.ConditionDrifted, metav1.ConditionTrue, kdagv1alpha1.ReasonDriftReported, msg)
	case meta.FindStatusCondition(st.Conditions, kdagv1alpha1.ConditionDrifted) != nil:
		set(kdagv1alpha1.ConditionDrifted, metav1.ConditionFalse, kdagv1alpha1.ReasonNoDrift, "no drift reported")
	}
}

// driftMessage lists the objects whose drift was reported, not repaired (drift policy report),
// in graph order, as "Kind namespace/name: field, field", separated by "; ": field paths only,
// never values. "" when there are none.
func (r *outcome) driftMessage() string {
	var parts []string
	for i := range r.nodes {
		if n := &r.nodes[i]; n.action == apply.Reported && len(n.drifted) > 0 {
			parts = append(parts, n.spec.id.String()+": "+truncate(strings.Join(n.drifted, ", "), 256))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return "changed by another writer, left as they are (kdag.dev/drift: report): " + strings.Join(parts, "; ")
}

// waitingMessage names the nodes that wait for readiness (not the blocked ones behind them), each
// with what it waits for when its readiness check said so.
func (r *outcome) waitingMessage() string {
	var names []string
	for i := range r.nodes {
		if n := &r.nodes[i]; n.state == kdagv1alpha1.NodeWaiting {
			name := n.spec.id.String()
			if n.detail != "" {
				name += " (" + truncate(n.detail, 256) + ")"
			}
			names = append(names, name)
		}
	}
	for _, t := range r.prune.terminating {
		name := t.id.String() + " (left the graph, being deleted"
		if len(t.finalizers) > 0 {
			name += "; held by finalizer " + truncate(strings.Join(t.finalizers, ", "), 256)
		}
		names = append(names, name+")")
	}
	if len(names) == 0 {
		return "reconcile did not finish"
	}
	return "waiting for " + strings.Join(names, ", ")
}

// graphSummary counts nodes by state and lists the ones not ready, failed first, capped.
func (r *outcome) graphSummary() *kdagv1alpha1.GraphSummary {
	if len(r.nodes) == 0 {
		return nil
	}
	g := &kdagv1alpha1.GraphSummary{
		Total: int32(len(r.nodes)), Ready: int32(r.ready), Waiting: int32(r.waiting),
		Failed: int32(r.failed), Blocked: int32(r.blocked), Canceled: int32(r.canceled),
	}
	for _, want := range []kdagv1alpha1.NodeState{kdagv1alpha1.NodeFailed, kdagv1alpha1.NodeWaiting, kdagv1alpha1.NodeBlocked, kdagv1alpha1.NodeCanceled} {
		for i := range r.nodes {
			n := &r.nodes[i]
			if n.state != want || len(g.NotReady) >= kdagv1alpha1.MaxNotReady {
				continue
			}
			msg := n.message
			if n.err != nil {
				msg = n.err.Error()
			}
			g.NotReady = append(g.NotReady, kdagv1alpha1.NodeStatus{
				Kind: n.spec.id.Kind, Namespace: n.spec.id.Namespace, Name: n.spec.id.Name,
				State: want, Message: truncate(msg, 256),
			})
		}
	}
	if len(r.nodes) > kdagv1alpha1.MaxGraphNodes {
		g.Truncated = true
	} else {
		g.Nodes = r.graphNodes()
	}
	return g
}

// graphNodes lists every node with its state and its blockers' indices (NodeIndices' list
// format, each index once, in the order first declared), in graph order. It returns nil if a
// node has no spec (the graph could not be run), as indices would be wrong.
func (r *outcome) graphNodes() []kdagv1alpha1.GraphNode {
	nodes := make([]kdagv1alpha1.GraphNode, len(r.nodes))
	var blockers, inferred []int32 // reused from node to node
	seen := make([]bool, len(r.nodes))
	for i := range r.nodes {
		s := r.nodes[i].spec
		if s == nil {
			return nil
		}
		blockers, inferred = blockers[:0], inferred[:0]
		for k, b := range s.blockers {
			// A blocker named twice (DependsOn and After of one node) is listed once, so that
			// the string stays within the CRD's length whatever the operator declares.
			if b.index < 0 || b.index >= len(seen) || seen[b.index] {
				continue
			}
			seen[b.index] = true
			blockers = append(blockers, int32(b.index))
			if s.inferredBlocker(k) {
				inferred = append(inferred, int32(b.index))
			}
		}
		for _, b := range blockers { // unmark only what this node marked
			seen[b] = false
		}
		nodes[i] = kdagv1alpha1.GraphNode{
			Group: s.id.Group, Kind: s.id.Kind, Namespace: s.id.Namespace, Name: s.id.Name,
			State:    r.nodes[i].state,
			Blockers: kdagv1alpha1.FormatNodeIndices(blockers), Inferred: kdagv1alpha1.FormatNodeIndices(inferred),
		}
	}
	return nodes
}

// emitNodeEvents records what changed in the cluster. Created, updated and pruned objects get one
// event per reason and reconcile, naming them all (so a first deploy of ten objects costs the API
// server one event, not ten); a repaired drift, an adoption and a held repair get one event per
// object, as each carries its own details. Skipped nodes emit nothing, so an unchanged owner
// emits nothing.
func (c *Reconciler) emitNodeEvents(ctx context.Context, owner client.Object, r *outcome) {
	var created, updated []graph.NodeID
	for i := range r.nodes {
		n := &r.nodes[i]
		switch n.action {
		case apply.Created:
			if n.live != nil { // the write went through
				created = append(created, n.spec.id)
			}
		case apply.Applied:
			if len(n.drifted) > 0 {
				c.event(ctx, owner, corev1.EventTypeNormal, "DriftRepaired", "Reverted changes by another writer to %s: %s",
					n.spec.id, truncate(strings.Join(n.drifted, ", "), 512))
			} else if n.live != nil {
				updated = append(updated, n.spec.id)
			}
		case apply.Adopted:
			if n.live != nil { // the write went through
				c.event(ctx, owner, corev1.EventTypeNormal, "Adopted", "Adopted existing %s", n.spec.id)
			}
		case apply.Recreating:
			if n.state != kdagv1alpha1.NodeFailed { // the delete went through
				c.event(ctx, owner, corev1.EventTypeNormal, "Recreating", "Deleted %s to create it again: immutable %s changed",
					n.spec.id, truncate(strings.Join(n.drifted, ", "), 512))
			}
		case apply.Held:
			var conflict *apply.DriftConflictError
			if errors.As(n.err, &conflict) && conflict.Started {
				c.event(ctx, owner, corev1.EventTypeWarning, kdagv1alpha1.ReasonDriftConflict, "%s (next repair attempt in %s)",
					conflict.Error(), conflict.RetryAfter)
			}
		}
	}
	c.objectsEvent(ctx, owner, "Created", "Created", "", created)
	c.objectsEvent(ctx, owner, "Updated", "Updated", "", updated)
	c.objectsEvent(ctx, owner, "Pruned", "Deleted", ": no longer part of the graph", r.prune.pruned)
	// One Orphaned event per annotation that kept objects, naming it.
	var byAnnotation []string
	kept := map[string][]graph.NodeID{}
	for i, id := range r.prune.orphaned {
		by := r.prune.keptBy[i]
		if _, seen := kept[by]; !seen {
			byAnnotation = append(byAnnotation, by)
		}
		kept[by] = append(kept[by], id)
	}
	for _, by := range byAnnotation {
		c.objectsEvent(ctx, owner, "Orphaned", "Kept", ": no longer part of the graph, released, not deleted (annotated "+by+")", kept[by])
	}
}

// maxEventObjects bounds the objects an event's note names; the rest are counted.
const maxEventObjects = 10

// objectsEvent records one Normal event with reason for ids, if any: "<verb> <id><suffix>" for
// one object, "<verb> <n> objects<suffix>: <id>, <id>, … and <k> more" for several.
func (c *Reconciler) objectsEvent(ctx context.Context, owner client.Object, reason, verb, suffix string, ids []graph.NodeID) {
	switch len(ids) {
	case 0:
		return
	case 1:
		c.event(ctx, owner, corev1.EventTypeNormal, reason, "%s %s%s", verb, ids[0], suffix)
		return
	}
	names := make([]string, 0, min(len(ids), maxEventObjects))
	for _, id := range ids[:min(len(ids), maxEventObjects)] {
		names = append(names, id.String())
	}
	list := strings.Join(names, ", ")
	if more := len(ids) - len(names); more > 0 {
		list += fmt.Sprintf(" and %d more", more)
	}
	c.event(ctx, owner, corev1.EventTypeNormal, reason, "%s %d objects%s: %s", verb, len(ids), suffix, truncate(list, 768))
}

// emitConditionEvents records transitions of Ready and Stalled, new retried failures, and a new
// list of reported drift (Drifted).
func (c *Reconciler) emitConditionEvents(ctx context.Context, owner client.Object, old, next *kdagv1alpha1.Status) {
	wasReady, isReady := meta.IsStatusConditionTrue(old.Conditions, kdagv1alpha1.ConditionReady), meta.IsStatusConditionTrue(next.Conditions, kdagv1alpha1.ConditionReady)
	switch {
	case isReady && !wasReady:
		c.event(ctx, owner, corev1.EventTypeNormal, "Ready", "All nodes are ready")
	case wasReady && !isReady:
		cond := meta.FindStatusCondition(next.Conditions, kdagv1alpha1.ConditionReady)
		c.event(ctx, owner, corev1.EventTypeWarning, "NotReady", "%s", cond.Message)
	}
	oldStalled := meta.FindStatusCondition(old.Conditions, kdagv1alpha1.ConditionStalled)
	newStalled := meta.FindStatusCondition(next.Conditions, kdagv1alpha1.ConditionStalled)
	if newStalled != nil && (oldStalled == nil || oldStalled.Message != newStalled.Message) {
		c.event(ctx, owner, corev1.EventTypeWarning, newStalled.Reason, "%s", newStalled.Message)
	}
	oldDrifted := meta.FindStatusCondition(old.Conditions, kdagv1alpha1.ConditionDrifted)
	newDrifted := meta.FindStatusCondition(next.Conditions, kdagv1alpha1.ConditionDrifted)
	if newDrifted != nil && newDrifted.Status == metav1.ConditionTrue &&
		(oldDrifted == nil || oldDrifted.Status != metav1.ConditionTrue || oldDrifted.Message != newDrifted.Message) {
		c.event(ctx, owner, corev1.EventTypeWarning, kdagv1alpha1.ReasonDriftReported, "%s", newDrifted.Message)
	}
	oldFailing := meta.FindStatusCondition(old.Conditions, kdagv1alpha1.ConditionReconciling)
	newFailing := meta.FindStatusCondition(next.Conditions, kdagv1alpha1.ConditionReconciling)
	if newFailing != nil && retriedFailure(newFailing.Reason) &&
		(oldFailing == nil || oldFailing.Reason != newFailing.Reason || oldFailing.Message != newFailing.Message) {
		c.event(ctx, owner, corev1.EventTypeWarning, newFailing.Reason, "%s", newFailing.Message)
	}
}

// retriedFailure reports whether reason is the Reconciling reason of a failure that is retried
// with backoff: each new one gets a Warning event with its reason.
func retriedFailure(reason string) bool {
	switch reason {
	case kdagv1alpha1.ReasonNodeFailed, kdagv1alpha1.ReasonPruneFailed, kdagv1alpha1.ReasonValidationFailed, kdagv1alpha1.ReasonBuildFailed:
		return true
	}
	return false
}

// statusWriteFailed reports a failed status write in a Warning event: the status cannot carry
// its own failure, and without the event a retried write is visible in logs only. A write cut
// short because the process is stopping is not reported: the next process writes the status.
func (c *Reconciler) statusWriteFailed(ctx context.Context, owner client.Object, err error) {
	if ctx.Err() != nil {
		return
	}
	c.event(ctx, owner, corev1.EventTypeWarning, kdagv1alpha1.ReasonStatusWriteFailed, "%s", truncate(err.Error(), 1024))
}

// event records an event about owner, unless owner's namespace is being deleted (the API server
// would refuse it, and the refusal is only noise in the log).
//
// The note ends with the trace ID of ctx's span, when there is one, so that an event leads to
// its reconcile's trace; the note is cut to the Events API's 1 kB before it.
func (c *Reconciler) event(ctx context.Context, owner client.Object, typ, reason, format string, args ...any) {
	c.eventRelated(ctx, owner, nil, typ, reason, format, args...)
}

// eventRelated is event with related as the event's related object (events.k8s.io/v1): the
// recorder folds events of the same owner, type and reason into one series that keeps the first
// note, unless their related objects differ, so an event about one object of several (an
// object orphaned in a teardown) names that object as related to keep its own note.
func (c *Reconciler) eventRelated(ctx context.Context, owner client.Object, related runtime.Object, typ, reason, format string, args ...any) {
	if c.namespaceTerminating(owner.GetNamespace()) {
		return
	}
	note, suffix := fmt.Sprintf(format, args...), ""
	if sc := trace.SpanContextFromContext(ctx); sc.HasTraceID() {
		suffix = " (trace " + sc.TraceID().String() + ")"
	}
	c.recorder.Eventf(owner, related, typ, reason, "Reconcile", "%s%s", truncate(note, maxEventNote-len(suffix)), suffix)
}

// maxEventNote is the longest note the Events API (events.k8s.io/v1) accepts, in bytes.
const maxEventNote = 1024

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
}
