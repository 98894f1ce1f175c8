package controller

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kdag-dev/kdag/pkg/apply"
	"github.com/kdag-dev/kdag/pkg/controller/internal/reconciler"
	"github.com/kdag-dev/kdag/pkg/graph"
	"github.com/kdag-dev/kdag/pkg/resources"
)

// Node is the handle Graph.Add returns, to name the node as a blocker of others.
type Node struct{ n reconciler.Node }

// ID returns the node's identifier.
func (n Node) ID() graph.NodeID { return n.n.ID() }

// NodeOption configures a node in Graph.Add or Graph.Reference: DependsOn, After,
// CreateOnly, Adopt, Keep, Finished, ProtectsData, RequireKeys, ReadyWhen,
// NoInferredDependencies, OnDrift, IgnoreFields, BeforeDelete.
type NodeOption interface {
	option() reconciler.Option
}

// nodeOption is a NodeOption of the reconciler's.
type nodeOption reconciler.Option

func (o nodeOption) option() reconciler.Option { return reconciler.Option(o) }

// nodes returns the reconciler's handles of ns.
func nodes(ns []Node) []reconciler.Node {
	out := make([]reconciler.Node, len(ns))
	for i, n := range ns {
		out[i] = n.n
	}
	return out
}

// DependsOn makes the node wait until every given node is applied and ready, their content
// feeding its dependencies hash. The given nodes must come from earlier Add calls of the same
// Graph, which keeps the graph acyclic. A reference the node's object holds (a pod template
// mounting a ConfigMap of the graph) needs none: the Graph infers it (see
// NoInferredDependencies); a declared DependsOn or After for the same node wins.
func DependsOn(blockers ...Node) NodeOption {
	return nodeOption(reconciler.DependsOn(nodes(blockers)...))
}

// After makes the node wait until every given node is applied and ready, like DependsOn, but
// only for order: the blockers' content does not feed the node's dependencies hash, so their
// changes (or their absence, for a Finished blocker) never roll the node's pods. For a blocker
// whose content the node does not consume: a migration Job the server waits for. A blocker given
// to both DependsOn and After counts as DependsOn.
func After(blockers ...Node) NodeOption { return nodeOption(reconciler.After(nodes(blockers)...)) }

// Finished says the node's work is done, as the owner records it (a migration Job whose success
// the owner's status holds): kdag never creates its object again. While the object exists it is
// handled as usual (kept, not pruned, its readiness checked); once it is gone (a TTL, a clean-up)
// the node is Ready without a write and without content. Give its dependents After edges to it.
func Finished() NodeOption { return nodeOption(reconciler.Finished()) }

// ProtectsData says that the node's object opens data held by data (a generated database
// password, for the database on a volume claim). Use it with CreateOnly. kdag creates the object
// only while data does not exist: should the object be gone while data exists, a new one would
// not open the data, so kdag generates none and the node fails, terminal (the owner is Stalled
// with reason DataKeyMissing, naming both), until the object is restored or data deleted. Only
// data's kind, namespace (default: the owner's) and name count; kdag reads its metadata from a
// watch of that kind (RBAC list and watch), never its content. Order the node before whatever
// creates data (data's node After this one), so that a first deploy creates the key first.
func ProtectsData(data client.Object) NodeOption { return nodeOption(reconciler.ProtectsData(data)) }

// CreateOnly creates the object once and never writes it again (generated passwords and keys).
// Its live content still feeds its dependents' checksums.
func CreateOnly() NodeOption { return nodeOption(reconciler.CreateOnly()) }

// Adopt lets the node take over an existing object that kdag did not create. Without it such an
// object is never written and the node fails with an adoption conflict.
func Adopt() NodeOption { return nodeOption(reconciler.Adopt()) }

// RequireKeys names the keys that the dependents of a Graph.Reference to a Secret or a
// ConfigMap read. Until the object holds every one of them (in data, binaryData or stringData)
// the node waits, and the owner's status names the object and the missing keys; and only these
// keys feed the dependents' dependencies hash, so a change of another key rolls no pod. Without
// it every key counts and none is required. It applies to Reference nodes of those kinds only:
// elsewhere it is a build error.
func RequireKeys(keys ...string) NodeOption { return nodeOption(reconciler.RequireKeys(keys...)) }

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
func Keep() NodeOption { return nodeOption(reconciler.Keep()) }

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
	return nodeOption(reconciler.Recreate(propagation))
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
func OnDrift(p apply.DriftPolicy) NodeOption { return nodeOption(reconciler.OnDrift(p)) }

// IgnoreFields names fields of the node's object that kdag sets when it creates the object and
// then leaves to others: a Deployment's "spec.replicas" once an autoscaler owns it.
// The fields are sent on the create, left out of every later apply (kdag's field manager releases
// them: it first hands the ones it holds to the field manager "<field manager>-released" with
// their live values, so that leaving them out does not reset them), and never count as drift:
// another writer's change of them is neither reverted nor reported. Paths are written as kdag
// names drifted fields, with or without the leading dot: "spec.replicas",
// `metadata.annotations["example.com/x"]`; a list element cannot be named (a build error).
func IgnoreFields(paths ...string) NodeOption { return nodeOption(reconciler.IgnoreFields(paths...)) }

// ReadyWhen replaces the kstatus readiness rule for the node.
func ReadyWhen(fn resources.ReadyFunc) NodeOption { return nodeOption(reconciler.ReadyWhen(fn)) }

// Graph records the nodes of one owner's graph during AddResources. It is not safe for
// concurrent use. Mistakes (an object without a name, a type not in the scheme, the same object
// twice, an unknown blocker) do not panic: Add returns an invalid Node and the reconcile fails
// with every mistake listed, marking the owner Stalled.
type Graph struct{ b *reconciler.Builder }

// Add adds obj as a node. obj is the desired state; the Graph keeps it and the reconciler
// applies a mutated copy. An empty namespace of a namespaced object becomes the owner's.
func (g *Graph) Add(obj client.Object, opts ...NodeOption) Node {
	return Node{g.b.Add(obj, options(opts)...)}
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
func (g *Graph) Reference(obj client.Object, opts ...NodeOption) Node {
	return Node{g.b.Reference(obj, options(opts)...)}
}

// options returns the reconciler's options of opts; a nil NodeOption is left out.
func options(opts []NodeOption) []reconciler.Option {
	out := make([]reconciler.Option, 0, len(opts))
	for _, o := range opts {
		if o != nil {
			out = append(out, o.option())
		}
	}
	return out
}

// GraphError lists the mistakes AddResources made through the Graph. It is terminal: the
// owner is Stalled until it (or the operator) changes.
type GraphError = reconciler.GraphError
