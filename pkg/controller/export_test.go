package controller

// Hooks for the external test package controller_test, where the package's tests run on kdag's
// test kit (pkg/controllertest, which imports this package) and may import package shard.

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/kdag-dev/kdag/pkg/apply"
	"github.com/kdag-dev/kdag/pkg/controller/internal/reconciler"
	"github.com/kdag-dev/kdag/pkg/graph"
	"github.com/kdag-dev/kdag/pkg/testing/testapi"
)

// scheme is the scheme of the package's tests: client-go's types and the test Widget.
var scheme = testapi.NewScheme()

// SharedScheme is the scheme of the package's tests.
var SharedScheme = scheme

// Reconciler is a kdag reconciler as Register returns it.
type Reconciler = reconciler.Reconciler

// ReferenceObjects returns how many objects of kind (a core kind: "Secret") the informers of c's
// referenced objects hold.
func ReferenceObjects(c *Reconciler, kind string) int {
	return c.References().CachedObjects(schema.GroupVersionKind{Version: "v1", Kind: kind})
}

// WrittenStatuses returns how many owners c holds a record of its last status write for: those
// whose write c's cache has not shown yet. r is a Reconciler as a harness returns it
// (Harness.Reconciler); -1 when it is not one.
func WrittenStatuses(r reconcile.Reconciler) int {
	if c, ok := r.(*Reconciler); ok {
		return c.WrittenStatuses()
	}
	return -1
}

// CachedRevisions returns owner's revisions as r lists them from its cache, and whether the list
// is an index lookup; r is a Reconciler as a harness returns it.
func CachedRevisions(ctx context.Context, r reconcile.Reconciler, owner client.Object) ([]appsv1.ControllerRevision, bool, error) {
	return r.(*Reconciler).CachedRevisions(ctx, owner)
}

// Register registers the reconciler named name for rm with mgr and returns it (Setup without the
// RBAC check), for tests that look inside it (ReferenceObjects).
func Register[T client.Object](mgr ctrl.Manager, name string, rm ResourceManager[T], opts ...Options) (*Reconciler, error) {
	return registerFor(mgr, name, rm, opts...)
}

// The span names and attribute keys of a reconcile's trace (observe.go), which SREs query.
const (
	SpanReconcile  = reconciler.SpanReconcile
	SpanBuildGraph = reconciler.SpanBuildGraph
	SpanRunGraph   = reconciler.SpanRunGraph
	SpanNode       = reconciler.SpanNode
	SpanApply      = reconciler.SpanApply
)

var (
	AttrName      = reconciler.AttrName
	AttrAction    = reconciler.AttrAction
	AttrOutcome   = reconciler.AttrOutcome
	AttrBlockedBy = reconciler.AttrBlockedBy
)

// Rechecks and defaults the tests compare with.
const (
	WaitingRecheck          = reconciler.WaitingRecheck
	TeardownRecheck         = reconciler.TeardownRecheck
	DefaultMaxParallelNodes = reconciler.DefaultMaxParallelNodes
	MaxLogVerbosity         = reconciler.MaxLogVerbosity
)

// CapVerbosity is the logger of a reconcile, levels above MaxLogVerbosity dropped.
var CapVerbosity = reconciler.CapVerbosity

// DefaultOptions returns the options a reconciler named name runs with when none are set.
func DefaultOptions(name string) reconciler.Options {
	var o reconciler.Options
	o.Defaults(name)
	return o
}

// Deletions records the owners this process deleted (a parent's prune), shared by the
// reconcilers of one Setup.
type Deletions = reconciler.Deletions

// NewDeletions returns an empty record of deletions.
func NewDeletions() *Deletions { return reconciler.NewDeletions() }

// WithDeletions returns Options whose reconciler shares d.
func WithDeletions(d *Deletions) Options { return Options{deletions: d} }

// RecordDeletion records that this process deleted the object id of uid.
func RecordDeletion(d *Deletions, id graph.NodeID, uid types.UID) { d.Record(id, uid) }

// The internals of r, a kdag reconciler (controllertest's Harness.Reconciler, Register).

// Engine returns r's apply engine.
func Engine(r reconcile.Reconciler) *apply.Engine { return r.(*Reconciler).Engine() }

// SetEngine replaces r's apply engine by e.
func SetEngine(r reconcile.Reconciler, e *apply.Engine) { r.(*Reconciler).SetEngine(e) }

// Clients returns r's client (writes, cached reads) and its uncached reader.
func Clients(r reconcile.Reconciler) (client.Client, client.Reader) { return r.(*Reconciler).Clients() }

// CachedReference returns the object of kind gvk named namespace/name that r's informers of
// referenced objects hold, or nil.
func CachedReference(ctx context.Context, r reconcile.Reconciler, gvk schema.GroupVersionKind, namespace, name string) (metav1.Object, error) {
	return r.(*Reconciler).References().Cached(ctx, gvk, namespace, name)
}

// NamespaceTerminating reports whether r has seen namespace being deleted.
func NamespaceTerminating(ctx context.Context, r reconcile.Reconciler, namespace string) bool {
	return r.(*Reconciler).References().NamespaceTerminating(ctx, namespace)
}

// ReferencesStarted reports whether r's references runnable has made, at manager start, the one
// uncached list that tells whether namespaces can be watched: a reconcile that raced it would
// make that list itself, inside the window a test counts requests in.
func ReferencesStarted(r reconcile.Reconciler) bool {
	return r.(*Reconciler).References().NamespacesDecided()
}
