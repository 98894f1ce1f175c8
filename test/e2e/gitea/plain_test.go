package gitea

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crcontroller "sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	giteav1alpha1 "github.com/kdag-dev/kdag/apis/gitea/v1alpha1"
	"github.com/kdag-dev/kdag/controllers/gitea"
	"github.com/kdag-dev/kdag/controllers/giteaserver"
	"github.com/kdag-dev/kdag/controllers/postgresql"
	"github.com/kdag-dev/kdag/controllers/valkey"
	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/controller"
	"github.com/kdag-dev/kdag/pkg/plan"
	"github.com/kdag-dev/kdag/pkg/resources"
	"github.com/kdag-dev/kdag/pkg/testing/poll"
)

// plainReconciler is the baseline of issue 16 item 1: the reference operator written the plain
// controller-runtime way, without kdag's engine. There is one per owner kind (Gitea, PostgreSQL,
// Valkey, GiteaServer), registered with builder.ControllerManagedBy(mgr).For(kind).Owns(...) and
// one reconcile at a time (setupPlain). A reconcile takes the owner's objects from the
// component's own AddResources (plan.NewPlan, which pkg/plan uses too: the same objects and
// the same order as kdag's graph) and walks them in that topological order, one at a time:
//
//   - an owned object gets controllerutil.CreateOrUpdate: Get from the cache, then Create, or
//     Update when a top-level field (spec, data, ...) the object was built with differs from the
//     live one (equality.Semantic.DeepDerivative, so fields the API server defaulted do not count),
//     with the object's labels and a controller owner reference. A create-only object (generated
//     passwords and keys, the migration Job) is written only when it does not exist;
//   - a referenced object (the database's Secret) is read and must hold the keys the graph
//     requires;
//   - then, if the object is not ready, the reconcile returns: the next watch event of an owned
//     object reconciles the owner again (a referenced object, which the owner does not own, is
//     looked at again after plainRequeue). Ready is kstatus (resources.Ready, Jobs complete), and
//     for a child owner of this operator its Ready condition for its generation
//     (resources.CustomResourceReady), as the Gitea component's ReadyWhen says.
//
// A create that races the cache (the object exists, the cache has not seen it yet) fails with
// AlreadyExists, and a status update from a stale owner with a conflict: both are retried with
// controller-runtime's backoff, as in any such operator.
//
// Once every object is ready, it writes the owner's status: observedGeneration and Ready=True,
// which is what the e2e helpers (readyFor) and a parent's ConditionReady read, so a Gitea is Ready
// when its PostgreSQL, Valkey and GiteaServer are, each once its own objects are. It writes status
// only to say Ready or to take it back: no progress reports, so no round trip is spent on them.
//
// It is not kdag: no server-side apply, hashes that roll pods, drift checks, events, tracing,
// graph summary, pruning, adoption, deletion policies (Keep, ProtectsData: everything gets an
// owner reference), finalizers, Finished or ReadyWhen nodes beyond the child owners' (so a
// migration across versions, which needs status.migration, is not handled), status fields of the
// owners' own (URL, version) or Stalled conditions. It is enough to create the sample and bring it
// to Ready, which is what BenchmarkSample_TimeToReady measures.
type plainReconciler[T client.Object] struct {
	client client.Client
	scheme *runtime.Scheme
	rm     controller.ResourceManager[T]
	status func(T) *kdagv1alpha1.Status
	stats  *plainStats
}

// plainStats is what the plain reconcilers did, for TestPlainReconciler_SampleReady.
type plainStats struct {
	writes atomic.Int64 // creates, updates and status updates that succeeded
	// reconciled maps "*Type namespace/name" of each owner to the resourceVersion its last
	// ended reconcile read.
	reconciled sync.Map
}

// plainRequeue is how soon a reconcile waiting for an object its owner does not own (a
// referenced Secret, which no watch of the owner's maps back to it) looks again.
const plainRequeue = time.Second

// setupPlain registers the four plain reconcilers with mgr.
func setupPlain(mgr ctrl.Manager, stats *plainStats) error {
	return errors.Join(
		addPlain(mgr, "gitea", gitea.ResourceManager{}, func(o *giteav1alpha1.Gitea) *kdagv1alpha1.Status { return &o.Status.Status }, stats),
		addPlain(mgr, "postgresql", postgresql.ResourceManager{}, func(o *giteav1alpha1.PostgreSQL) *kdagv1alpha1.Status { return &o.Status.Status }, stats),
		addPlain(mgr, "valkey", valkey.ResourceManager{}, func(o *giteav1alpha1.Valkey) *kdagv1alpha1.Status { return &o.Status.Status }, stats),
		addPlain(mgr, "giteaserver", giteaserver.ResourceManager{}, func(o *giteav1alpha1.GiteaServer) *kdagv1alpha1.Status { return &o.Status.Status }, stats),
	)
}

// addPlain registers a plain reconciler of rm's owner kind, watching the kinds rm owns.
func addPlain[T client.Object](mgr ctrl.Manager, name string, rm controller.ResourceManager[T], status func(T) *kdagv1alpha1.Status, stats *plainStats) error {
	r := &plainReconciler[T]{client: mgr.GetClient(), scheme: mgr.GetScheme(), rm: rm, status: status, stats: stats}
	b := builder.ControllerManagedBy(mgr).Named("plain-" + name).For(r.newOwner()).
		WithOptions(crcontroller.Options{MaxConcurrentReconciles: 1})
	for _, obj := range rm.OwnedTypes() {
		b = b.Owns(obj)
	}
	return b.Complete(r)
}

func (r *plainReconciler[T]) newOwner() T {
	return reflect.New(reflect.TypeFor[T]().Elem()).Interface().(T)
}

func (r *plainReconciler[T]) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	owner := r.newOwner()
	if err := r.client.Get(ctx, req.NamespacedName, owner); err != nil || !owner.GetDeletionTimestamp().IsZero() {
		return reconcile.Result{}, client.IgnoreNotFound(err) // owner references delete the rest
	}
	defer r.stats.reconciled.Store(fmt.Sprintf("%T %s", owner, req.NamespacedName), owner.GetResourceVersion())
	if v, ok := r.rm.(controller.Validator[T]); ok {
		if err := v.Validate(ctx, owner); err != nil {
			return reconcile.Result{}, err
		}
	}
	plan, err := plan.NewPlan(ctx, r.rm, owner, r.scheme, nil)
	if err != nil {
		return reconcile.Result{}, err
	}
	for _, n := range plan.Nodes {
		ready, err := r.step(ctx, owner, n)
		if err != nil {
			return reconcile.Result{}, fmt.Errorf("%s: %w", n.ID, err)
		}
		if !ready {
			res := reconcile.Result{}
			if n.Reference {
				res.RequeueAfter = plainRequeue
			}
			return res, r.writeStatus(ctx, owner, false)
		}
	}
	return reconcile.Result{}, r.writeStatus(ctx, owner, true)
}

// step creates or updates the object of node n (reads it, for a reference) and reports whether
// it is ready.
func (r *plainReconciler[T]) step(ctx context.Context, owner T, n plan.PlannedNode) (bool, error) {
	o, err := r.scheme.New(n.GVK)
	if err != nil {
		return false, err
	}
	live := o.(client.Object)
	live.SetNamespace(n.Object.GetNamespace())
	live.SetName(n.Object.GetName())
	if n.Reference {
		if err := r.client.Get(ctx, client.ObjectKeyFromObject(live), live); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		return hasKeys(live, n.RequireKeys), nil
	}
	op, err := controllerutil.CreateOrUpdate(ctx, r.client, live, func() error {
		if n.CreateOnly && live.GetResourceVersion() != "" {
			return nil // created once: generated values are never generated again
		}
		if err := copyContent(n.Object, live); err != nil {
			return err
		}
		live.SetLabels(merged(live.GetLabels(), n.Object.GetLabels()))
		live.SetAnnotations(merged(live.GetAnnotations(), n.Object.GetAnnotations()))
		return controllerutil.SetControllerReference(owner, live, r.scheme)
	})
	if err != nil {
		return false, err
	}
	if op != controllerutil.OperationResultNone {
		r.stats.writes.Add(1)
	}
	return r.ready(live, n.GVK)
}

// ready is the object's readiness: a child owner's Ready condition for its generation, else
// kstatus'.
func (r *plainReconciler[T]) ready(live client.Object, gvk schema.GroupVersionKind) (bool, error) {
	if gvk.Group == giteav1alpha1.GroupVersion.Group {
		ok, err := resources.CustomResourceReady(live)
		var notReady *resources.NotReadyError
		if errors.As(err, &notReady) {
			return false, nil
		}
		return ok, err
	}
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(live)
	if err != nil {
		return false, err
	}
	u := &unstructured.Unstructured{Object: content}
	u.SetGroupVersionKind(gvk)
	res, err := resources.Ready(u)
	if err == nil && res.Status == resources.StatusFailed {
		err = errors.New(res.Message)
	}
	return res.Ready, err
}

// writeStatus writes observedGeneration and Ready=True when the owner is ready; when it is not,
// it takes back a Ready=True of the owner's generation. Otherwise it writes nothing.
func (r *plainReconciler[T]) writeStatus(ctx context.Context, owner T, ready bool) error {
	st := r.status(owner)
	current := meta.FindStatusCondition(st.Conditions, kdagv1alpha1.ConditionReady)
	readyNow := st.ObservedGeneration == owner.GetGeneration() && current != nil && current.Status == metav1.ConditionTrue
	if ready == readyNow {
		return nil
	}
	cond := metav1.Condition{Type: kdagv1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: kdagv1alpha1.ReasonReady,
		Message: "every object is ready", ObservedGeneration: owner.GetGeneration()}
	if !ready {
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, kdagv1alpha1.ReasonWaiting, "waiting for an object"
	}
	st.ObservedGeneration = owner.GetGeneration()
	meta.SetStatusCondition(&st.Conditions, cond)
	if err := r.client.Status().Update(ctx, owner); err != nil {
		return err // a conflict (the cache's owner was stale) is retried with backoff
	}
	r.stats.writes.Add(1)
	return nil
}

// copyContent sets each top-level field of live but metadata and status (spec; a Secret's data,
// type; ...) to desired's when desired's is not already in live's (DeepDerivative: fields
// desired leaves empty, which the API server may have defaulted, do not count).
func copyContent(desired, live client.Object) error {
	want, err := runtime.DefaultUnstructuredConverter.ToUnstructured(desired)
	if err != nil {
		return err
	}
	have, err := runtime.DefaultUnstructuredConverter.ToUnstructured(live)
	if err != nil {
		return err
	}
	changed := false
	for k, v := range want {
		if k == "metadata" || k == "status" || k == "apiVersion" || k == "kind" {
			continue
		}
		if old, ok := have[k]; !ok || !equality.Semantic.DeepDerivative(v, old) {
			have[k], changed = v, true
		}
	}
	if !changed {
		return nil
	}
	reflect.ValueOf(live).Elem().SetZero()
	return runtime.DefaultUnstructuredConverter.FromUnstructured(have, live)
}

// merged returns have with want's entries set.
func merged(have, want map[string]string) map[string]string {
	if len(want) == 0 {
		return have
	}
	out := maps.Clone(have)
	if out == nil {
		out = map[string]string{}
	}
	maps.Copy(out, want)
	return out
}

// hasKeys reports whether the Secret or ConfigMap obj holds every key.
func hasKeys(obj client.Object, keys []string) bool {
	for _, k := range keys {
		switch o := obj.(type) {
		case *corev1.Secret:
			if _, ok := o.Data[k]; !ok {
				return false
			}
		case *corev1.ConfigMap:
			_, inData := o.Data[k]
			_, inBinary := o.BinaryData[k]
			if !inData && !inBinary {
				return false
			}
		}
	}
	return true
}

// startPlainManager runs the plain reconcilers (setupPlain) in a manager reaching the API server
// with cfg, limited to namespace ns, with a plain cache (kdag's CacheOptions keep only objects
// with kdag's labels, which these do not have). stats may be nil.
func startPlainManager(t testing.TB, cfg *rest.Config, ns string, stats *plainStats) (stop func()) {
	t.Helper()
	if stats == nil {
		stats = &plainStats{}
	}
	stop, _ = runManager(t, cfg, cache.Options{DefaultNamespaces: map[string]cache.Config{ns: {}}}, "plain", func(mgr ctrl.Manager) error {
		return setupPlain(mgr, stats)
	})
	return stop
}

// TestPlainReconciler_SampleReady runs the benchmark's baseline (plainReconciler) once: the
// sample's Gitea and its three children become Ready for their generation. Then every owner is
// reconciled again (an annotation each): nothing is written, so the generated Secrets keep their
// values and no update is spent on fields the API server defaulted.
func TestPlainReconciler_SampleReady(t *testing.T) {
	ns := local.Namespace(t)
	stats := &plainStats{}
	startPlainManager(t, local.Config, ns, stats)
	start := time.Now()
	key := applySample(t, ns, "gitea.yaml")
	waitGiteaReady(t, key, readyTimeout)
	t.Logf("Gitea Ready in %s with %d writes", time.Since(start).Round(100*time.Millisecond), stats.writes.Load())

	g := get(t, ns, key.Name, &giteav1alpha1.Gitea{})
	pg := get(t, ns, "demo-postgresql", &giteav1alpha1.PostgreSQL{})
	vk := get(t, ns, "demo-valkey", &giteav1alpha1.Valkey{})
	server := get(t, ns, "demo", &giteav1alpha1.GiteaServer{})
	for obj, status := range map[client.Object]*kdagv1alpha1.Status{pg: &pg.Status.Status, vk: &vk.Status.Status, server: &server.Status.Status} {
		if why := readyFor(t.Context(), obj, func() *kdagv1alpha1.Status { return status }); why != "" {
			t.Errorf("%T %s not Ready: %s", obj, obj.GetName(), why)
		}
	}

	secrets := map[string]string{} // name: resourceVersion
	for _, name := range []string{"demo-postgresql-credentials", "demo-secrets"} {
		secrets[name] = get(t, ns, name, &corev1.Secret{}).ResourceVersion
	}
	writes := stats.writes.Load()
	for _, o := range []client.Object{g, pg, vk, server} {
		mergePatch(t, o, `{"metadata":{"annotations":{"e2e.kdag.dev/poke":"1"}}}`)
		poll.True(t, fmt.Sprintf("%T %s reconciled after its annotation", o, o.GetName()), 30*time.Second, func(context.Context) bool {
			rv, _ := stats.reconciled.Load(fmt.Sprintf("%T %s", o, client.ObjectKeyFromObject(o)))
			return rv == o.GetResourceVersion()
		})
	}
	if got := stats.writes.Load(); got != writes {
		t.Errorf("%d writes when reconciling settled owners again, want 0", got-writes)
	}
	for name, rv := range secrets {
		if got := get(t, ns, name, &corev1.Secret{}).ResourceVersion; got != rv {
			t.Errorf("Secret %s/%s written again (resourceVersion %s, was %s)", ns, name, got, rv)
		}
	}
}
