package plan

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/pkg/errors"
	yamlv3 "go.yaml.in/yaml/v3"
	"golang.org/x/sync/errgroup"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/apply"
	"github.com/kdag-dev/kdag/pkg/controller"
	"github.com/kdag-dev/kdag/pkg/graph"
	"github.com/kdag-dev/kdag/pkg/tracing"
)

// The live plan says what applying an owner would do to each object with apply.Action, the
// action the reconcile reports when it does it; its text, YAML and JSON give each action the
// word of a plan (actionWords):
//
//   - Create (apply.Created): the object does not exist; the reconcile creates it.
//   - Update (apply.Applied): the object is the owner's and the API server's dry run of kdag's
//     apply changes it (Change.Diff says how).
//   - Unchanged (apply.Skipped): the dry run changes nothing, or the node is create-only or
//     finished and holds its labels.
//   - Recreate (apply.Recreating): the API server refuses the apply because it changes an
//     immutable field (named in Change.Reason); kdag cannot update the object: it must be
//     deleted and created again.
//   - Refused (apply.Refused): an object of that name exists, is not the owner's
//     (apply.Engine.Owns) and may not be adopted; the reconcile fails on it and never writes it.
//   - Prune (apply.Pruned): an object that carries the owner's labels and is its own, but that
//     the graph no longer holds; the reconcile deletes it.
//   - Keep (apply.Orphaned): like Prune, but kept (kdag.dev/resource-policy: keep, apply.Kept):
//     orphaned, not deleted.
var actionWords = map[apply.Action]string{
	apply.Created: "Create", apply.Applied: "Update", apply.Skipped: "Unchanged", apply.Recreating: "Recreate",
	apply.Refused: "Refused", apply.Pruned: "Prune", apply.Orphaned: "Keep",
}

// actionWord is a's word in a plan (actionWords), or a itself for an action no plan reports.
func actionWord(a apply.Action) string {
	if w, ok := actionWords[a]; ok {
		return w
	}
	return string(a)
}

// changing reports whether the cluster differs from the plan for the object: anything but
// apply.Skipped (a Refused object differs too, and the reconcile would fail on it).
func changing(a apply.Action) bool { return a != apply.Skipped }

// Change is what applying an owner would do to one object.
type Change struct {
	// Action is what the reconcile would do; written as the plan's word for it (actionWords).
	Action    apply.Action `json:"action" yaml:"action"`
	Kind      string       `json:"kind" yaml:"kind"`
	Namespace string       `json:"namespace,omitempty" yaml:"namespace,omitempty"`
	Name      string       `json:"name" yaml:"name"`
	// Reason says why: an adoption, the immutable field of a Recreate, the AdoptionError of a
	// Refused, the keep policy of a Keep, a reference the reconcile would wait for.
	Reason string `json:"reason,omitempty" yaml:"reason,omitempty"`
	// Fields are, for an Update, the paths of the fields the write changes ("spec.replicas",
	// "data.token": a Secret's key, never its value), sorted; for a Recreate, the immutable
	// fields it changes.
	Fields []string `json:"fields,omitempty" yaml:"fields,omitempty"`
	// Diff is, for an Update, the unified diff of the object as YAML, live then as the dry run
	// returned it, without managedFields, resourceVersion, generation, uid, creationTimestamp and
	// status, every Secret value replaced by a placeholder.
	Diff string `json:"diff,omitempty" yaml:"diff,omitempty"`
	// Error is the API server's refusal of the dry run for another reason than an immutable
	// field (its validation, or a claim whose StorageClass does not allow it to grow): the
	// reconcile would fail on this object.
	Error string `json:"error,omitempty" yaml:"error,omitempty"`
}

// title is "Kind namespace/name" (or "Kind name" for a cluster-scoped object).
func (c Change) title() string {
	if c.Namespace == "" {
		return c.Kind + " " + c.Name
	}
	return c.Kind + " " + c.Namespace + "/" + c.Name
}

// changeWire is a Change as the plan writes it: the action as the plan's word.
type changeWire struct {
	Action    string   `json:"action" yaml:"action"`
	Kind      string   `json:"kind" yaml:"kind"`
	Namespace string   `json:"namespace,omitempty" yaml:"namespace,omitempty"`
	Name      string   `json:"name" yaml:"name"`
	Reason    string   `json:"reason,omitempty" yaml:"reason,omitempty"`
	Fields    []string `json:"fields,omitempty" yaml:"fields,omitempty"`
	Diff      string   `json:"diff,omitempty" yaml:"diff,omitempty"`
	Error     string   `json:"error,omitempty" yaml:"error,omitempty"`
}

// MarshalJSON writes c with its action as the plan's word ("Create"), not apply's ("created").
func (c Change) MarshalJSON() ([]byte, error) { return json.Marshal(c.wire()) }

// MarshalYAML is MarshalJSON's YAML counterpart.
func (c Change) MarshalYAML() (any, error) { return c.wire(), nil }

func (c Change) wire() changeWire {
	return changeWire{Action: actionWord(c.Action), Kind: c.Kind, Namespace: c.Namespace, Name: c.Name,
		Reason: c.Reason, Fields: c.Fields, Diff: c.Diff, Error: c.Error}
}

// OwnerChanges are the changes of one owner's objects.
//
// In YAML and JSON the owner comes first, then its changes: each owner's objects are under its
// name.
type OwnerChanges struct {
	// Owner is "Kind namespace/name".
	Owner string `json:"owner" yaml:"owner"`
	// Exists says whether the owner is on the cluster. When it is not, its objects are planned
	// as children of a new owner: every absent one is created and nothing is pruned.
	Exists bool `json:"exists" yaml:"exists"`
	// Error is the API server's refusal of the owner's own spec (DryRunOwner: the update or
	// create that applying the file makes, as a server-side dry run), its message as the server
	// gave it. Its objects and child owners are then not planned: Changes is empty.
	Error string `json:"error,omitempty" yaml:"error,omitempty"`
	// Changes are the graph's nodes in plan order (Graph.Reference nodes, never written, left
	// out), then the objects a reconcile would prune or orphan, sorted.
	Changes []Change `json:"changes" yaml:"changes"`
}

// placeholderUID is the UID typed gives an owner the cluster does not hold.
const placeholderUID = "00000000-0000-0000-0000-000000000000"

// Resolve returns owner, read from a file, as the cluster would have it once applied:
// the owner of its kind, namespace and name on the cluster (read through r) with every top-level
// field but apiVersion, kind, metadata and status replaced by owner's, defaulted with its CRD
// schema; or owner itself when the cluster does not hold it. It returns r's errors other than
// NotFound and a conversion error naming the owner.
func (p *Planner) Resolve(ctx context.Context, r client.Reader, owner client.Object) (client.Object, error) {
	gvk, err := apiutil.GVKForObject(owner, p.scheme)
	if err != nil {
		return nil, errors.WithStack(err)
	}
	live := &unstructured.Unstructured{}
	live.SetGroupVersionKind(gvk)
	switch err := r.Get(ctx, client.ObjectKeyFromObject(owner), live); {
	case apierrors.IsNotFound(err):
		return owner, nil
	case err != nil:
		return nil, errors.Wrapf(err, "read %s", title(gvk, owner))
	}
	raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(owner)
	if err != nil {
		return nil, errors.Wrapf(err, "convert %s", title(gvk, owner))
	}
	return p.typed(overlay(live, raw))
}

// overlay returns a copy of live whose top-level fields but apiVersion, kind, metadata and status
// are spec's.
func overlay(live *unstructured.Unstructured, spec map[string]any) *unstructured.Unstructured {
	out := live.DeepCopy()
	kept := []string{"apiVersion", "kind", "metadata", "status"}
	for k := range out.Object {
		if !slices.Contains(kept, k) {
			delete(out.Object, k)
		}
	}
	for k, v := range spec {
		if !slices.Contains(kept, k) {
			out.Object[k] = runtime.DeepCopyJSONValue(v)
		}
	}
	return out
}

// ReadOwner reads the owner gvk namespace/name from the cluster through r, typed and defaulted.
// It returns an error naming it when the cluster does not hold it or no component reconciles its
// kind.
func (p *Planner) ReadOwner(ctx context.Context, r client.Reader, gvk schema.GroupVersionKind, key client.ObjectKey) (client.Object, error) {
	name := gvk.Kind + " " + key.String()
	if !p.reconciled(gvk.GroupKind()) {
		return nil, errors.Errorf("%s: no component reconciles %s", name, gvk.GroupKind())
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	if err := r.Get(ctx, key, u); err != nil {
		return nil, errors.Wrapf(err, "read %s", name)
	}
	return p.typed(u)
}

// Changes plans owners against a cluster: for each owner and each child owner its graph holds (the
// child on the cluster, its spec replaced by the one the graph applies), each node's object is
// built as the apply engine would get it (Plan.Render), read from the cluster and
// classified, the writes tried as server-side dry runs (client.DryRunAll, the component's field
// manager, ForceOwnership as the engine applies), at most parallel at once (0: 8). Owners come
// from ReadOwner or Resolve: one whose UID is the placeholder Decode gives is new. c must be able
// to read every owned type; it is never asked to write but with DryRunAll.
//
// It returns the changes per owner, in Walk's order, or the first error of a plan, a read, a dry
// run the API server did not answer (RBAC, a missing CRD) or a conversion, naming the object.
// A dry run the API server's validation refuses is no error here: it is the change's Error.
func (p *Planner) Changes(ctx context.Context, c client.Client, owners []client.Object, parallel int) ([]OwnerChanges, error) {
	if parallel <= 0 {
		parallel = 8
	}
	var out []OwnerChanges
	queue := slices.Clone(owners)
	for len(queue) > 0 {
		owner := queue[0]
		queue = queue[1:]
		oc, children, err := p.ownerChanges(ctx, c, owner, parallel)
		if err != nil {
			return nil, err
		}
		out = append(out, oc)
		queue = append(queue, children...)
	}
	return out, nil
}

// liveRun is the live plan of one owner.
type liveRun struct {
	client   client.Client
	engine   *apply.Engine
	owner    apply.Owner
	manager  string
	parallel int
}

// ownerChanges plans one owner against the cluster and returns its changes and child owners.
func (p *Planner) ownerChanges(ctx context.Context, c client.Client, owner client.Object, parallel int) (OwnerChanges, []client.Object, error) {
	gvk, err := apiutil.GVKForObject(owner, p.scheme)
	if err != nil {
		return OwnerChanges{}, nil, errors.WithStack(err)
	}
	name := title(gvk, owner)
	comp, ok := p.components[gvk.GroupKind()]
	if !ok {
		return OwnerChanges{}, nil, errors.Errorf("%s: no component reconciles %s", name, gvk.GroupKind())
	}
	plan, err := comp.Plan(ctx, owner, p.scheme, c.RESTMapper())
	if err != nil {
		return OwnerChanges{}, nil, errors.Wrap(err, name)
	}
	engine, err := apply.New(c, c, nil, apply.Options{FieldManager: comp.FieldManager()})
	if err != nil {
		return OwnerChanges{}, nil, errors.Wrap(err, name)
	}
	run := &liveRun{client: c, engine: engine, manager: comp.FieldManager(), parallel: parallel,
		owner: apply.Owner{Object: owner, Kind: gvk.Kind, Controller: comp.Name()}}
	live, err := run.read(ctx, plan.Nodes)
	if err != nil {
		return OwnerChanges{}, nil, errors.Wrap(err, name)
	}
	rendered, err := plan.Render(run.owner, p.scheme, func(id graph.NodeID) *unstructured.Unstructured { return live[id] })
	if err != nil {
		return OwnerChanges{}, nil, errors.Wrap(err, name)
	}
	oc := OwnerChanges{Owner: name, Exists: owner.GetUID() != placeholderUID}
	changes := make([]*Change, len(rendered))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(parallel)
	for i, n := range rendered {
		if n.Reference {
			continue
		}
		g.Go(func() error {
			ch, err := run.change(gctx, n, live[n.ID])
			changes[i] = ch
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return OwnerChanges{}, nil, errors.Wrap(err, name)
	}
	for _, ch := range changes {
		if ch != nil {
			oc.Changes = append(oc.Changes, *ch)
		}
	}
	if oc.Exists {
		pruned, err := run.prune(ctx, p.scheme, comp, plan)
		if err != nil {
			return OwnerChanges{}, nil, errors.Wrap(err, name)
		}
		oc.Changes = append(oc.Changes, pruned...)
	}
	var children []client.Object
	for _, n := range plan.Nodes {
		if !p.reconciled(schema.GroupKind{Group: n.ID.Group, Kind: n.ID.Kind}) {
			continue
		}
		child, err := p.childOwner(n, live[n.ID])
		if err != nil {
			return OwnerChanges{}, nil, errors.Wrap(err, name)
		}
		children = append(children, child)
	}
	return oc, children, nil
}

// childOwner returns the child owner of node n as the reconcile would leave it: live, when the
// cluster holds it, with the spec the graph applies; else the graph's object, defaulted.
func (p *Planner) childOwner(n PlannedNode, live *unstructured.Unstructured) (client.Object, error) {
	raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(n.Object)
	if err != nil {
		return nil, errors.Wrapf(err, "child %s", n.ID)
	}
	u := &unstructured.Unstructured{Object: raw}
	u.SetGroupVersionKind(n.GVK)
	if live != nil {
		u = overlay(live, raw)
	}
	return p.typed(u)
}

// read returns the objects of nodes the cluster holds (absent ones are missing from the map),
// read concurrently.
func (r *liveRun) read(ctx context.Context, nodes []PlannedNode) (map[graph.NodeID]*unstructured.Unstructured, error) {
	var mu sync.Mutex
	live := map[graph.NodeID]*unstructured.Unstructured{}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(r.parallel)
	for _, n := range nodes {
		g.Go(func() error {
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(n.GVK)
			switch err := r.client.Get(gctx, client.ObjectKey{Namespace: n.ID.Namespace, Name: n.ID.Name}, u); {
			case apierrors.IsNotFound(err):
				return nil
			case err != nil:
				return errors.Wrapf(err, "read %s", n.ID)
			}
			mu.Lock()
			live[n.ID] = u
			mu.Unlock()
			return nil
		})
	}
	return live, g.Wait()
}

// change classifies one node whose object the cluster holds as live (nil: absent).
func (r *liveRun) change(ctx context.Context, n RenderedNode, live *unstructured.Unstructured) (*Change, error) {
	ch := &Change{Kind: n.ID.Kind, Namespace: n.ID.Namespace, Name: n.ID.Name, Reason: n.Waiting}
	if n.Waiting != "" {
		ch.Reason = "the reconcile waits: " + n.Waiting
	}
	policy := apply.Policy{CreateOnly: n.CreateOnly, Adopt: n.Adopt}
	if n.BeforeDelete > 0 {
		// A hook: only the owner's teardown creates it, and nothing ever updates it.
		ch.Action = apply.Skipped
		ch.Reason = join(ch.Reason, "BeforeDelete hook: runs only when the owner is deleted")
		return ch, nil
	}
	if live == nil {
		if n.Finished {
			ch.Action = apply.Skipped
			ch.Reason = join(ch.Reason, "finished: not created again")
			return ch, nil
		}
		ch.Action = apply.Created
		desired := n.Desired.DeepCopy()
		desired.SetResourceVersion("1") // as apply.Engine.CreateIfAbsent: only if absent
		return ch, r.dryRun(ch, n.Recreate, n.Desired, nil, func() error { return r.apply(ctx, desired) })
	}
	adopt, err := r.engine.Admits(r.owner, n.Desired, live, policy)
	var refused *apply.AdoptionError
	if errors.As(err, &refused) {
		ch.Action, ch.Reason = apply.Refused, join(refused.Error(), ch.Reason)
		return ch, nil
	}
	if adopt {
		ch.Reason = join("adopted: "+r.owner.AdoptValue(live.GetNamespace()), ch.Reason)
	}
	if n.CreateOnly && (adopt || !apply.HasOwnerLabels(r.owner, live)) {
		// The engine's only write to a create-only object: labels and owner reference merged in.
		return ch, r.diff(ch, n.Desired, live, n.Recreate, func() (*unstructured.Unstructured, error) { return r.takeOwnership(ctx, n.Desired, live) })
	}
	if n.CreateOnly {
		ch.Action = apply.Skipped
		return ch, nil
	}
	desired := n.Desired.DeepCopy()
	if tp, ok := live.GetAnnotations()[tracing.AnnotationTraceParent]; ok {
		// Set by the write that last applied it, and only on a write: never a change by itself.
		ann := desired.GetAnnotations()
		ann[tracing.AnnotationTraceParent] = tp
		desired.SetAnnotations(ann)
	}
	return ch, r.diff(ch, n.Desired, live, n.Recreate, func() (*unstructured.Unstructured, error) {
		return desired, r.apply(ctx, desired)
	})
}

// diff dry-runs write, a write of desired over live, and sets ch's Action and Diff from live and
// the result; recreate is the node's Recreate propagation ("" without the option).
func (r *liveRun) diff(ch *Change, desired, live *unstructured.Unstructured, recreate metav1.DeletionPropagation, write func() (*unstructured.Unstructured, error)) error {
	var after *unstructured.Unstructured
	if err := r.dryRun(ch, recreate, desired, live, func() (err error) { after, err = write(); return err }); err != nil || ch.Action != "" {
		return err
	}
	d, err := yamlDiff(live, after)
	if err != nil {
		return errors.Wrapf(err, "diff %s", ch.title())
	}
	ch.Action, ch.Diff = apply.Applied, d
	if d == "" {
		ch.Action = apply.Skipped
		return nil
	}
	ch.Fields = changedFields(comparable(live), comparable(after))
	return nil
}

// dryRun runs write, a write of desired over live (nil: a create), and sorts out the API server's
// refusals: an immutable field makes ch a Recreate that names the fields desired changes
// (apply.ChangedImmutableFields), another validation error or a claim whose StorageClass does
// not allow it to grow (apply.VolumeExpansionForbidden) ch's Error; a namespace that does not
// exist yet is no error for a create. Other errors are returned.
//
// recreate is the node's Recreate propagation: with it, the Recreate says kdag deletes the object
// (with that propagation) and creates it again; without it, that the reconcile stops there, the
// owner Stalled, until the spec changes back or the author gives the node Recreate.
func (r *liveRun) dryRun(ch *Change, recreate metav1.DeletionPropagation, desired, live *unstructured.Unstructured, write func() error) error {
	err := write()
	if err == nil {
		return nil
	}
	if fields := apply.ChangedImmutableFields(err, desired, live); len(fields) > 0 {
		ch.Action, ch.Fields = apply.Recreating, fields
		what := strings.Join(fields, ", ") + " is immutable: "
		if len(fields) > 1 {
			what = strings.Join(fields, ", ") + " are immutable: "
		}
		if recreate != "" {
			what += "kdag deletes the object (propagation " + string(recreate) + ") and creates it again"
		} else {
			what += "the owner goes Stalled, as the node has no Recreate option; change the spec back, or delete the object yourself to have it created again"
		}
		ch.Reason = join(what, ch.Reason)
		return nil
	}
	if apply.IsInvalid(err) || apply.VolumeExpansionForbidden(err) {
		if ch.Action == "" {
			ch.Action = apply.Applied
		}
		ch.Error = err.Error()
		return nil
	}
	if ch.Action == apply.Created && apierrors.IsNotFound(err) {
		ch.Reason = join("its namespace does not exist yet", ch.Reason)
		return nil
	}
	return errors.Wrapf(err, "dry run %s", ch.title())
}

// apply is the engine's server-side apply (apply.Engine's apply), as a dry run: desired gets the
// API server's response.
func (r *liveRun) apply(ctx context.Context, desired *unstructured.Unstructured) error {
	return r.client.Apply(ctx, client.ApplyConfigurationFromUnstructured(desired),
		client.FieldOwner(r.manager), client.ForceOwnership, client.DryRunAll)
}

// takeOwnership is the engine's takeOwnership as a dry run: desired's labels and owner
// references merged into live with a merge patch. It returns the response.
func (r *liveRun) takeOwnership(ctx context.Context, desired, live *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	owned := r.engine.WithOwnership(desired, live)
	patch := client.MergeFromWithOptions(live, client.MergeFromWithOptimisticLock{})
	return owned, r.client.Patch(ctx, owned, patch, client.FieldOwner(r.manager), client.DryRunAll)
}

// prune finds, as the reconcile's prune does, the objects of the component's owned types that
// carry the owner's UID label, are the owner's (apply.Engine.Owns), are not being deleted and
// are not in the plan: Keep when kept (apply.Kept), Prune otherwise, sorted.
func (r *liveRun) prune(ctx context.Context, scheme *runtime.Scheme, comp controller.Component, plan *Plan) ([]Change, error) {
	inGraph := map[graph.NodeID]bool{}
	for _, n := range plan.Nodes {
		inGraph[n.ID] = true
	}
	seen := map[schema.GroupKind]bool{}
	var out []Change
	for _, t := range comp.OwnedTypes() {
		gvk, err := apiutil.GVKForObject(t, scheme)
		if err != nil {
			return nil, errors.WithStack(err)
		}
		if seen[gvk.GroupKind()] {
			continue
		}
		seen[gvk.GroupKind()] = true
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err := r.client.List(ctx, list, client.MatchingLabels{kdagv1alpha1.LabelOwnerUID: string(r.owner.Object.GetUID())}); err != nil {
			return nil, errors.Wrapf(err, "list %s", gvk.Kind)
		}
		for i := range list.Items {
			obj := &list.Items[i]
			id := graph.NodeID{Group: gvk.Group, Kind: gvk.Kind, Namespace: obj.GetNamespace(), Name: obj.GetName()}
			if inGraph[id] || obj.GetDeletionTimestamp() != nil || !r.engine.Owns(r.owner, obj) {
				continue
			}
			ch := Change{Action: apply.Pruned, Kind: id.Kind, Namespace: id.Namespace, Name: id.Name, Reason: "no longer in the graph: deleted"}
			if apply.Kept(obj) {
				ch.Action, ch.Reason = apply.Orphaned, "no longer in the graph, kept ("+kdagv1alpha1.AnnotationResourcePolicy+": "+
					kdagv1alpha1.ResourcePolicyKeep+"): orphaned, not deleted"
			}
			out = append(out, ch)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].title() < out[j].title() })
	return out, nil
}

// join joins the non-empty parts with "; ".
func join(parts ...string) string {
	var out []string
	for _, p := range parts {
		if p != "" {
			out = append(out, p)
		}
	}
	return strings.Join(out, "; ")
}

// JSON is the live plan's output as one JSON document: the list of OwnerChanges.
const JSON Format = "json"

// liveFormats are the Formats of the live plan, in the order error messages list them.
var liveFormats = []Format{Text, YAML, JSON}

// WriteChanges writes changes to w in format:
//
//   - Text: per owner a line "Kind namespace/name" (with "(not on the cluster)" for a new one),
//     then, for an owner the API server refuses, "  Refused    Kind namespace/name" with the
//     server's error below it; else per object "  Action  Kind namespace/name", its reason and error indented below it, and
//     an Update's diff indented by six spaces; then a blank line;
//   - YAML and JSON: the list of OwnerChanges (owner, exists, error, then changes with the fields
//     action, kind, namespace, name, reason, fields, diff, error), in that order: each owner's
//     changes under its name.
//
// Secret values never appear: the diffs hold placeholders (yamlDiff). It returns an error for
// another format and w's errors.
func WriteChanges(w io.Writer, changes []OwnerChanges, format Format) error {
	if !slices.Contains(liveFormats, format) {
		return errors.Errorf("unknown output %q for --live: use text, yaml or json", string(format))
	}
	if changes == nil {
		changes = []OwnerChanges{}
	}
	var b bytes.Buffer
	switch format {
	case JSON:
		raw, err := json.MarshalIndent(changes, "", "  ")
		if err != nil {
			return errors.WithStack(err)
		}
		b.Write(raw)
		b.WriteString("\n")
	case YAML:
		if err := writeYAML(&b, changes); err != nil {
			return err
		}
	default:
		for _, oc := range changes {
			b.WriteString(oc.Owner)
			if !oc.Exists {
				b.WriteString("  (not on the cluster)")
			}
			b.WriteString("\n")
			if oc.Error != "" {
				fmt.Fprintf(&b, "  %-9s  %s\n      error: %s\n      %s\n", actionWord(apply.Refused), oc.Owner, oc.Error,
					"the API server refuses the owner's spec: its objects are not planned; fix the spec and plan again")
			}
			for _, c := range oc.Changes {
				fmt.Fprintf(&b, "  %-9s  %s\n", actionWord(c.Action), c.title())
				if c.Reason != "" {
					fmt.Fprintf(&b, "      %s\n", c.Reason)
				}
				if c.Error != "" {
					fmt.Fprintf(&b, "      error: %s\n", c.Error)
				}
				for _, line := range strings.SplitAfter(c.Diff, "\n") {
					if line != "" {
						b.WriteString("      " + line)
					}
				}
			}
			b.WriteString("\n")
		}
	}
	_, err := w.Write(b.Bytes())
	return errors.WithStack(err)
}

// writeYAML writes changes as YAML with the fields in the order of their Go types (owner first,
// then its changes), two spaces of indent, multi-line diffs as literal blocks.
func writeYAML(w io.Writer, v any) error {
	enc := yamlv3.NewEncoder(w)
	enc.SetIndent(2)
	if err := enc.Encode(v); err != nil {
		return errors.WithStack(err)
	}
	return errors.WithStack(enc.Close())
}

// ErrChanges is what Run returns for a live plan that found changes and no error: the command
// exits with 1, as kubectl diff does (ExitCode).
var ErrChanges = errors.New("applying would change the cluster")

// ExitCode is the exit status of a plan command that returned err, as kubectl diff's: 0 for nil
// (no change), 1 for ErrChanges, 2 for any other error.
func ExitCode(err error) int {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, ErrChanges):
		return 1
	default:
		return 2
	}
}

// Status returns what Run returns for changes: an error naming the owners and objects the API
// server refuses (an OwnerChanges or a Change with Error), else ErrChanges when an object is not Unchanged (Refused
// included: the cluster differs from the plan), else nil.
func Status(changes []OwnerChanges) error {
	var refused []string
	changed := false
	for _, oc := range changes {
		if oc.Error != "" {
			refused = append(refused, oc.Owner)
		}
		for _, c := range oc.Changes {
			if c.Error != "" {
				refused = append(refused, c.title())
			}
			changed = changed || changing(c.Action)
		}
	}
	switch {
	case len(refused) > 0:
		return errors.Errorf("the API server refuses %s: see the errors above", strings.Join(refused, ", "))
	case changed:
		return ErrChanges
	}
	return nil
}
