package controller

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"time"

	"github.com/kdag-dev/kdag/pkg/apply"
	"github.com/kdag-dev/kdag/pkg/graph"
	"github.com/kdag-dev/kdag/pkg/resources"

	"github.com/pkg/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// Node is the handle Graph.Add returns, to name the node as a blocker of others.
type Node struct {
	id    graph.NodeID
	index int // position in the builder; -1 for a node whose Add failed
}

// ID returns the node's identifier.
func (n Node) ID() graph.NodeID { return n.id }

// NodeOption configures a node in Graph.Add or Graph.Reference: DependsOn, After,
// CreateOnly, Adopt, Keep, Finished, ProtectsData, RequireKeys, ReadyWhen,
// NoInferredDependencies, OnDrift, IgnoreFields, BeforeDelete.
type NodeOption interface {
	applyToNode(*nodeSpec)
}

// nodeOptionFunc is a NodeOption that is a function.
type nodeOptionFunc func(*nodeSpec)

func (f nodeOptionFunc) applyToNode(s *nodeSpec) { f(s) }

// DependsOn makes the node wait until every given node is applied and ready, their content
// feeding its dependencies hash. The given nodes must come from earlier Add calls of the same
// Graph, which keeps the graph acyclic. A reference the node's object holds (a pod template
// mounting a ConfigMap of the graph) needs none: the Graph infers it (see
// NoInferredDependencies); a declared DependsOn or After for the same node wins.
func DependsOn(blockers ...Node) NodeOption {
	return nodeOptionFunc(func(s *nodeSpec) { s.blockers = append(s.blockers, blockers...) })
}

// After makes the node wait until every given node is applied and ready, like DependsOn, but
// only for order: the blockers' content does not feed the node's dependencies hash, so their
// changes (or their absence, for a Finished blocker) never roll the node's pods. For a blocker
// whose content the node does not consume: a migration Job the server waits for. A blocker given
// to both DependsOn and After counts as DependsOn.
func After(blockers ...Node) NodeOption {
	return nodeOptionFunc(func(s *nodeSpec) {
		s.blockers = append(s.blockers, blockers...)
		s.after = append(s.after, blockers...)
	})
}

// Finished says the node's work is done, as the owner records it (a migration Job whose success
// the owner's status holds): kdag never creates its object again. While the object exists it is
// handled as usual (kept, not pruned, its readiness checked); once it is gone (a TTL, a clean-up)
// the node is Ready without a write and without content. Give its dependents After edges to it.
func Finished() NodeOption { return nodeOptionFunc(func(s *nodeSpec) { s.finished = true }) }

// ProtectsData says that the node's object opens data held by data (a generated database
// password, for the database on a volume claim). Use it with CreateOnly. kdag creates the object
// only while data does not exist: should the object be gone while data exists, a new one would
// not open the data, so kdag generates none and the node fails, terminal (the owner is Stalled
// with reason DataKeyMissing, naming both), until the object is restored or data deleted. Only
// data's kind, namespace (default: the owner's) and name count; kdag reads its metadata from a
// watch of that kind (RBAC list and watch), never its content. Order the node before whatever
// creates data (data's node After this one), so that a first deploy creates the key first.
func ProtectsData(data client.Object) NodeOption {
	return nodeOptionFunc(func(s *nodeSpec) { s.protects = data })
}

// CreateOnly creates the object once and never writes it again (generated passwords and keys).
// Its live content still feeds its dependents' checksums.
func CreateOnly() NodeOption { return nodeOptionFunc(func(s *nodeSpec) { s.createOnly = true }) }

// Adopt lets the node take over an existing object that kdag did not create. Without it such an
// object is never written and the node fails with an adoption conflict.
func Adopt() NodeOption { return nodeOptionFunc(func(s *nodeSpec) { s.adopt = true }) }

// RequireKeys names the keys that the dependents of a Graph.Reference to a Secret or a
// ConfigMap read. Until the object holds every one of them (in data, binaryData or stringData)
// the node waits, and the owner's status names the object and the missing keys; and only these
// keys feed the dependents' dependencies hash, so a change of another key rolls no pod. Without
// it every key counts and none is required. It applies to Reference nodes of those kinds only:
// elsewhere it is a build error.
func RequireKeys(keys ...string) NodeOption {
	return nodeOptionFunc(func(s *nodeSpec) { s.requireKeys = append(s.requireKeys, keys...) })
}

// Keep is the node's deletion policy "keep" (Helm's helm.sh/resource-policy: keep, Flux's
// prune disabled): when the node leaves the graph or the owner is deleted, kdag orphans the
// object instead of deleting it: it removes its labels and annotates it with
// kdagv1alpha1.AnnotationAdopt, naming the owner, so that an owner of the same kind and name created later
// adopts it again (a retained volume claim comes back with its data). For data that must outlive
// its owner. The object gets no owner reference (the garbage collector would delete it with the
// owner, or before it, under foreground deletion): kdag's labels and field manager track it, and
// the owner holds kdag's finalizer so that kdag can orphan it. The object carries
// kdagv1alpha1.AnnotationResourcePolicy, which is what prune and teardown read; a user may set that
// annotation (or its alias kdag.dev/keep: "true") on any object kdag applies to the same effect:
// on the next reconcile kdag drops the object's owner reference (after putting the owner's
// finalizer in place), and orphans the object instead of deleting it on prune and teardown,
// with a Normal event Orphaned naming the object and the annotation.
func Keep() NodeOption { return nodeOptionFunc(func(s *nodeSpec) { s.keep = true }) }

// Recreate lets kdag delete and re-create the node's object when the API server refuses an update
// because it changes an immutable field (a StatefulSet's volumeClaimTemplates, a Job's template,
// a Service's clusterIP), as Flux's force, kapp's fallback-on-replace
// and Helm's --force do. The object is deleted with propagation (Orphan keeps a StatefulSet's pods
// and claims running while it is gone; Background deletes its dependents) and only if it is still
// the version kdag read; the node waits until it is gone and creates it on a later reconcile; the
// owner gets a Recreating event naming the fields. Without Recreate such an update fails: the
// owner is Stalled with a message naming the fields and this option. A CreateOnly node is never
// updated, so Recreate does not apply to it (a build error).
func Recreate(propagation metav1.DeletionPropagation) NodeOption {
	return nodeOptionFunc(func(s *nodeSpec) { s.recreate = &propagation })
}

// The drift policies of OnDrift.
const (
	// DriftRepair reverts other writers' changes to fields kdag set on the node's object (the
	// default).
	DriftRepair = apply.DriftRepair
	// DriftReport leaves such changes and reports them: the owner's Drifted condition, a Warning
	// event, the kdag_drift_reports_total metric.
	DriftReport = apply.DriftReport
)

// OnDrift sets the node's drift policy: what kdag does when another writer changes fields kdag set
// on the node's object while the desired object is unchanged. DriftRepair (the default) reverts
// them; DriftReport detects them exactly as DriftRepair does but writes nothing: the owner gets
// the condition Drifted=True listing the object and the drifted field paths (never values), a
// Warning event DriftReported when that list changes, and kdag_drift_reports_total counts it. The
// object's readiness is still judged on the live object (kstatus, or ReadyWhen), so a drifted
// object counts as Ready when it is ready as it is. Report concerns existing objects only: a
// missing object is created, and a change of the desired object (the author's) is applied, as a
// whole, which also reverts the drift present then.
//
// The owner's annotation kdag.dev/drift ("repair" or "report"), when set, wins over OnDrift on
// every node of that owner.
func OnDrift(p apply.DriftPolicy) NodeOption {
	return nodeOptionFunc(func(s *nodeSpec) { s.drift = p })
}

// IgnoreFields names fields of the node's object that kdag sets when it creates the object and
// then leaves to others: a Deployment's "spec.replicas" once an autoscaler owns it.
// The fields are sent on the create, left out of every later apply (kdag's field manager releases
// them: it first hands the ones it holds to the field manager "<field manager>-released" with
// their live values, so that leaving them out does not reset them), and never count as drift:
// another writer's change of them is neither reverted nor reported. Paths are written as kdag
// names drifted fields, with or without the leading dot: "spec.replicas",
// `metadata.annotations["example.com/x"]`; a list element cannot be named (a build error).
func IgnoreFields(paths ...string) NodeOption {
	return nodeOptionFunc(func(s *nodeSpec) { s.ignorePaths = append(s.ignorePaths, paths...) })
}

// ReadyWhen replaces the kstatus readiness rule for the node.
func ReadyWhen(fn resources.ReadyFunc) NodeOption {
	return nodeOptionFunc(func(s *nodeSpec) { s.readyWhen = fn })
}

// nodeSpec is one node as AddResources declared it.
type nodeSpec struct {
	id         graph.NodeID
	gvk        schema.GroupVersionKind
	obj        client.Object
	blockers   []Node
	after      []Node // the blockers given with After: order only, no content
	finished   bool   // Finished: never created again
	protects   client.Object
	createOnly bool
	adopt      bool
	keep       bool // Keep: orphaned, never deleted
	reference  bool // Graph.Reference: never written, ready once it exists
	noInfer    bool // NoInferredDependencies: no edge inferred from its references
	// inferred: how many of the last blockers were inferred from references, not declared.
	inferred int
	// requireKeys: the keys of a referenced Secret or ConfigMap its dependents read (RequireKeys),
	// sorted and without duplicates.
	requireKeys []string
	readyWhen   resources.ReadyFunc
	// recreate: the deletion propagation of Recreate, nil without it.
	recreate *metav1.DeletionPropagation
	// drift: OnDrift, "" for the default (repair); the owner's kdag.dev/drift wins.
	drift apply.DriftPolicy
	// ignorePaths: IgnoreFields as given; ignore: parsed by the Graph.
	ignorePaths []string
	ignore      []apply.FieldPath
	// beforeDelete: the timeout of BeforeDelete, nil without it (hook.go).
	beforeDelete *time.Duration
}

// Graph records the nodes of one owner's graph during AddResources. It is not safe for
// concurrent use. Mistakes (an object without a name, a type not in the scheme, the same object
// twice, an unknown blocker) do not panic: Add returns an invalid Node and the reconcile fails
// with every mistake listed, marking the owner Stalled.
type Graph struct {
	owner  client.Object
	scheme *runtime.Scheme
	mapper meta.RESTMapper
	owned  map[schema.GroupKind]bool

	nodes []*nodeSpec
	index map[graph.NodeID]int
	errs  []error
}

func newBuilder(owner client.Object, scheme *runtime.Scheme, mapper meta.RESTMapper, owned map[schema.GroupKind]bool) *Graph {
	return &Graph{owner: owner, scheme: scheme, mapper: mapper, owned: owned, index: map[graph.NodeID]int{}}
}

// Add adds obj as a node. obj is the desired state; the Graph keeps it and the reconciler
// applies a mutated copy. An empty namespace of a namespaced object becomes the owner's.
func (b *Graph) Add(obj client.Object, opts ...NodeOption) Node {
	return b.add("Add", obj, false, opts)
}

// Reference adds a node for an object the owner needs but kdag does not manage, such as a
// Secret that the user creates and the owner's spec names. Only obj's type, namespace and name
// count, and the only option that applies is RequireKeys. kdag never writes, adopts, prunes or
// deletes it, and its type need not be an owned type (the manager needs RBAC get, list and watch
// on it).
//
// The node is checked on every reconcile, from a cache of the referenced objects' metadata, and
// a change of the object reconciles its owners again. The node is ready once the object exists
// and holds the keys RequireKeys names. Until then it waits: its dependents do not run, and the
// owner is Reconciling with "waiting for Secret ns/db (it does not exist yet: create it)" or
// "(it has no keys password, user: add them)". Its content (the required keys, or all of a
// Secret's or ConfigMap's data, or another kind's spec) feeds its dependents' dependencies
// hash like an owned object's, so rotating a referenced password rolls the pods that read it.
// The content is read from the API server only when the object's resourceVersion moved since
// kdag last read it, and only its hash is kept.
//
// Referencing the same object again returns the same node, requiring the keys of both calls.
func (b *Graph) Reference(obj client.Object, opts ...NodeOption) Node {
	return b.add("Reference", obj, true, opts)
}

func (b *Graph) add(verb string, obj client.Object, reference bool, opts []NodeOption) Node {
	if obj == nil || isNilPointer(obj) {
		return b.fail(errors.Errorf("%s: nil object", verb))
	}
	gvk, err := apiutil.GVKForObject(obj, b.scheme)
	if err != nil {
		return b.fail(errors.Wrapf(err, "%s %T %s: type not in the scheme", verb, obj, obj.GetName()))
	}
	if obj.GetName() == "" {
		return b.fail(errors.Errorf("%s %s: object has no name", verb, gvk.Kind))
	}
	if !reference && b.owned != nil && !b.owned[gvk.GroupKind()] {
		return b.fail(errors.Errorf("Add %s %s: %s is not an owned type of this controller; declare it in OwnedTypes or WithOwnedTypes",
			gvk.Kind, obj.GetName(), gvk.GroupKind()))
	}
	if err := b.defaultNamespace(obj, gvk); err != nil {
		return b.fail(err)
	}
	s := &nodeSpec{
		id:        graph.NodeID{Group: gvk.Group, Kind: gvk.Kind, Namespace: obj.GetNamespace(), Name: obj.GetName()},
		gvk:       gvk,
		obj:       obj,
		reference: reference,
	}
	for _, opt := range opts {
		opt.applyToNode(s)
	}
	if err := checkOptions(verb, s); err != nil {
		return b.fail(err)
	}
	slices.Sort(s.requireKeys)
	s.requireKeys = slices.Compact(s.requireKeys)
	if i, dup := b.index[s.id]; dup {
		if prev := b.nodes[i]; reference && prev.reference {
			prev.requireKeys = slices.Compact(slices.Sorted(slices.Values(append(prev.requireKeys, s.requireKeys...))))
			return Node{id: prev.id, index: i}
		}
		return b.fail(errors.Errorf("%s %s: added twice", verb, s.id))
	}
	for _, blocker := range s.blockers {
		if blocker.index < 0 || blocker.index >= len(b.nodes) || b.nodes[blocker.index].id != blocker.id {
			return b.fail(errors.Errorf("%s %s: blocker %q is unknown (its Add failed, or it comes from another Graph)", verb, s.id, blocker.id))
		}
		if err := checkHookBlocker(verb, s, b.nodes[blocker.index]); err != nil {
			return b.fail(err)
		}
	}
	b.index[s.id] = len(b.nodes)
	b.nodes = append(b.nodes, s)
	return Node{id: s.id, index: len(b.nodes) - 1}
}

// orderOnly reports whether blocker b is an After edge of s and not a DependsOn one too.
func (s *nodeSpec) orderOnly(b Node) bool {
	if !slices.Contains(s.after, b) {
		return false
	}
	n := 0
	for _, x := range s.blockers {
		if x == b {
			n++
		}
	}
	return n == 1
}

// checkOptions returns an error when an option does not apply to the node: a Reference takes
// RequireKeys only, and only for a Secret or a ConfigMap; RequireKeys applies to nothing else.
func checkOptions(verb string, s *nodeSpec) error {
	if !s.reference {
		if s.drift != "" {
			if err := s.drift.Validate(); err != nil {
				return errors.Wrapf(err, "%s %s: OnDrift", verb, s.id)
			}
		}
		for _, p := range s.ignorePaths {
			fp, err := apply.ParseFieldPath(p)
			if err != nil {
				return errors.Wrapf(err, "%s %s: IgnoreFields", verb, s.id)
			}
			s.ignore = append(s.ignore, fp)
		}
		if len(s.requireKeys) > 0 {
			return errors.Errorf("%s %s: RequireKeys applies to a Reference only", verb, s.id)
		}
		if s.recreate != nil && s.createOnly {
			return errors.Errorf("%s %s: Recreate does not apply to a CreateOnly node (it is never updated)", verb, s.id)
		}
		if s.recreate != nil && !validPropagation(*s.recreate) {
			return errors.Errorf("%s %s: Recreate(%q): the propagation is Orphan, Background or Foreground", verb, s.id, *s.recreate)
		}
		if s.protects != nil && !s.createOnly {
			return errors.Errorf("%s %s: ProtectsData applies to a CreateOnly node only", verb, s.id)
		}
		if s.protects != nil && (isNilPointer(s.protects) || s.protects.GetName() == "") {
			return errors.Errorf("%s %s: ProtectsData needs an object with a name", verb, s.id)
		}
		return checkBeforeDelete(verb, s)
	}
	if len(s.blockers) > 0 || s.createOnly || s.adopt || s.keep || s.finished || s.protects != nil || s.readyWhen != nil || s.noInfer ||
		s.drift != "" || len(s.ignorePaths) > 0 || s.recreate != nil || s.beforeDelete != nil {
		return errors.Errorf("%s %s: a Reference takes no option but RequireKeys (kdag never writes the object)", verb, s.id)
	}
	if len(s.requireKeys) > 0 && !resources.HasDataKeys(s.gvk) {
		return errors.Errorf("%s %s: RequireKeys applies to a Secret or a ConfigMap only", verb, s.id)
	}
	return nil
}

// validPropagation reports whether p is one of the API's deletion propagation policies.
func validPropagation(p metav1.DeletionPropagation) bool {
	return p == metav1.DeletePropagationOrphan || p == metav1.DeletePropagationBackground || p == metav1.DeletePropagationForeground
}

// defaultNamespace gives a namespaced object without a namespace the owner's.
func (b *Graph) defaultNamespace(obj client.Object, gvk schema.GroupVersionKind) error {
	if obj.GetNamespace() != "" {
		return nil
	}
	if b.mapper == nil { // a Plan without a cluster: assume namespaced, the common case
		obj.SetNamespace(b.owner.GetNamespace())
		return nil
	}
	mapping, err := b.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return errors.Wrapf(err, "Add %s %s: find whether it is namespaced", gvk.Kind, obj.GetName())
	}
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		obj.SetNamespace(b.owner.GetNamespace())
	}
	return nil
}

// buildGraph builds owner's graph: it calls m's AddResources with a new Graph and returns the
// Graph, the error AddResources returned (wrapped: a reconcile.TerminalError stays one), or a
// *GraphError listing the mistakes AddResources made through the Graph. It is the one place a
// graph is built, for reconcile, teardown and plan, so each infers the same edges from the
// nodes' references (inferDependencies). owned nil leaves out the owned-type check.
func buildGraph(ctx context.Context, m manager, owner client.Object, scheme *runtime.Scheme, mapper meta.RESTMapper,
	owned map[schema.GroupKind]bool) (*Graph, error) {
	b := newBuilder(owner, scheme, mapper, owned)
	if err := m.addResources(ctx, owner, b); err != nil {
		return nil, errors.Wrap(err, "AddResources")
	}
	if err := b.err(); err != nil {
		return nil, err
	}
	b.inferDependencies()
	return b, nil
}

// isNilPointer reports whether obj is a typed nil pointer (a nil *corev1.ConfigMap in a
// client.Object), which obj == nil does not catch and whose methods would panic.
func isNilPointer(obj client.Object) bool {
	v := reflect.ValueOf(obj)
	return v.Kind() == reflect.Pointer && v.IsNil()
}

func (b *Graph) fail(err error) Node {
	b.errs = append(b.errs, err)
	return Node{index: -1}
}

// err returns every mistake made during AddResources, or nil.
func (b *Graph) err() error {
	if len(b.errs) == 0 {
		return nil
	}
	return &GraphError{Errs: b.errs}
}

// GraphError lists the mistakes AddResources made through the Graph. It is terminal: the
// owner is Stalled until it (or the operator) changes.
type GraphError struct {
	Errs []error
}

func (e *GraphError) Error() string {
	msg := fmt.Sprintf("graph has %d error(s):", len(e.Errs))
	for _, err := range e.Errs {
		msg += " " + err.Error() + ";"
	}
	return msg
}

// Unwrap returns the individual mistakes.
func (e *GraphError) Unwrap() []error { return e.Errs }
