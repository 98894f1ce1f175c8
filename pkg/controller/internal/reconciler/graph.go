package reconciler

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"time"

	"github.com/pkg/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/kdag-dev/kdag/pkg/apply"
	"github.com/kdag-dev/kdag/pkg/graph"
	"github.com/kdag-dev/kdag/pkg/resources"
)

// Node is the handle Builder.Add returns, to name the node as a blocker of others
// (controller.Node wraps it).
type Node struct {
	id    graph.NodeID
	index int // position in the builder; -1 for a node whose Add failed
}

// ID returns the node's identifier.
func (n Node) ID() graph.NodeID { return n.id }

// Option sets one node option on a node as Builder.Add declares it. The constructors below are
// controller's node options (controller.DependsOn and the rest), which document them.
type Option func(*nodeSpec)

// DependsOn is controller.DependsOn: wait for blockers, their content feeding the node's
// dependencies hash.
func DependsOn(blockers ...Node) Option {
	return func(s *nodeSpec) { s.blockers = append(s.blockers, blockers...) }
}

// After is controller.After: wait for blockers, for order only.
func After(blockers ...Node) Option {
	return func(s *nodeSpec) {
		s.blockers = append(s.blockers, blockers...)
		s.after = append(s.after, blockers...)
	}
}

// Finished is controller.Finished: never create the object again.
func Finished() Option { return func(s *nodeSpec) { s.finished = true } }

// ProtectsData is controller.ProtectsData: the object opens data held by data.
func ProtectsData(data client.Object) Option { return func(s *nodeSpec) { s.protects = data } }

// CreateOnly is controller.CreateOnly: create once, never write again.
func CreateOnly() Option { return func(s *nodeSpec) { s.createOnly = true } }

// Adopt is controller.Adopt: take over an existing object kdag did not create.
func Adopt() Option { return func(s *nodeSpec) { s.adopt = true } }

// RequireKeys is controller.RequireKeys: the keys a referenced Secret or ConfigMap must hold.
func RequireKeys(keys ...string) Option {
	return func(s *nodeSpec) { s.requireKeys = append(s.requireKeys, keys...) }
}

// Keep is controller.Keep: orphan the object instead of deleting it.
func Keep() Option { return func(s *nodeSpec) { s.keep = true } }

// Recreate is controller.Recreate: delete and create again when an immutable field changes.
func Recreate(propagation metav1.DeletionPropagation) Option {
	return func(s *nodeSpec) { s.recreate = &propagation }
}

// OnDrift is controller.OnDrift: the node's drift policy.
func OnDrift(p apply.DriftPolicy) Option { return func(s *nodeSpec) { s.drift = p } }

// IgnoreFields is controller.IgnoreFields: fields set on create, then left to others.
func IgnoreFields(paths ...string) Option {
	return func(s *nodeSpec) { s.ignorePaths = append(s.ignorePaths, paths...) }
}

// ReadyWhen is controller.ReadyWhen: the node's own readiness rule.
func ReadyWhen(fn resources.ReadyFunc) Option { return func(s *nodeSpec) { s.readyWhen = fn } }

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

// Builder records the nodes of one owner's graph during AddResources (controller.Graph wraps
// it). It is not safe for concurrent use. Mistakes (an object without a name, a type not in the
// scheme, the same object twice, an unknown blocker) do not panic: Add returns an invalid Node and
// the reconcile fails with every mistake listed, marking the owner Stalled.
type Builder struct {
	owner  client.Object
	scheme *runtime.Scheme
	mapper meta.RESTMapper
	owned  map[schema.GroupKind]bool

	nodes []*nodeSpec
	index map[graph.NodeID]int
	errs  []error
}

func newBuilder(owner client.Object, scheme *runtime.Scheme, mapper meta.RESTMapper, owned map[schema.GroupKind]bool) *Builder {
	return &Builder{owner: owner, scheme: scheme, mapper: mapper, owned: owned, index: map[graph.NodeID]int{}}
}

// Add adds obj as a node (controller.Graph.Add).
func (b *Builder) Add(obj client.Object, opts ...Option) Node {
	return b.add("Add", obj, false, opts)
}

// Reference adds a node for an object the owner needs but kdag does not manage
// (controller.Graph.Reference).
func (b *Builder) Reference(obj client.Object, opts ...Option) Node {
	return b.add("Reference", obj, true, opts)
}

func (b *Builder) add(verb string, obj client.Object, reference bool, opts []Option) Node {
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
		opt(s)
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
func (b *Builder) defaultNamespace(obj client.Object, gvk schema.GroupVersionKind) error {
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

// buildGraph builds owner's graph: it calls m's AddResources with a new Builder and returns
// it, the error AddResources returned (wrapped: a reconcile.TerminalError stays one), or a
// *GraphError listing the mistakes AddResources made through the Graph. It is the one place a
// graph is built, for reconcile, teardown and plan, so each infers the same edges from the
// nodes' references (inferDependencies). owned nil leaves out the owned-type check.
func buildGraph(ctx context.Context, m Manager, owner client.Object, scheme *runtime.Scheme, mapper meta.RESTMapper,
	owned map[schema.GroupKind]bool) (*Builder, error) {
	b := newBuilder(owner, scheme, mapper, owned)
	if err := m.AddResources(ctx, owner, b); err != nil {
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

func (b *Builder) fail(err error) Node {
	b.errs = append(b.errs, err)
	return Node{index: -1}
}

// err returns every mistake made during AddResources, or nil.
func (b *Builder) err() error {
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
