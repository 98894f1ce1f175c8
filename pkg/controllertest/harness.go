package controllertest

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/pkg/errors"
	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/controller"
	"github.com/kdag-dev/kdag/pkg/metrics"
	"github.com/kdag-dev/kdag/pkg/testing/faults"
	"github.com/kdag-dev/kdag/pkg/testing/poll"
	"github.com/kdag-dev/kdag/pkg/testing/requests"
	"github.com/kdag-dev/kdag/pkg/testing/workload"
)

// Timeout bounds every wait of a Harness (WaitReady, MarkReady's wait for the object, Eventually).
const Timeout = 30 * time.Second

// Harness runs components under a real controller-runtime manager against an APIServer, in a
// namespace of their own, as the operator's main would: cached reads scoped to the namespace and
// to kdag's objects (controller.CacheOptions), the start-up RBAC check, watches, events. envtest
// runs no built-in controllers, so a test marks workloads ready itself (MarkReady) and collects
// garbage itself (CollectGarbage).
type Harness struct {
	// Namespace is the harness's namespace, deleted when the test ends; Create puts objects
	// without a namespace there.
	Namespace string
	// Client reads and writes the API server directly (no cache), as a cluster admin.
	Client client.Client
	// Faults injects scripted faults into the requests of the harness's managers: the next
	// PATCH of an object fails, say (Faults.FailNext).
	Faults *faults.Script

	t          testing.TB
	scheme     *runtime.Scheme
	config     *rest.Config
	components []controller.Component
	// fresh, when set, makes each manager's components (a restarted process's) for a shard;
	// components are then the first ones, for the kinds and names only.
	fresh func(shard string) []controller.Component
	// shards are the shards of the managers a crash exploration runs, one manager each; nil:
	// one manager, of the components' own shard.
	shards []string
	// layer, with shards, makes each manager its shard's.
	layer    *ShardLayer
	requests *requests.Recorder
	// log is where the harness's managers log; a failing test shows its tail.
	log *ManagerLog

	// opts are StartWith's.
	opts Options
	// current is the manager StartWith (or Restart) started; nil for ExploreCrashes' harnesses.
	current *managerRun
	// reconcilers hold each component's reconciler in the running manager, by owner kind.
	reconcilers map[schema.GroupVersionKind]reconcile.Reconciler
	// dropped counts the requests a stepped harness's queues handed its components.
	dropped atomic.Int64

	mu      sync.Mutex
	deleted map[types.UID]bool // objects deleted with Delete
}

// Start starts a manager running components (controller.For) in a new namespace of api and
// returns once its cache has synced: StartWith with the zero Options.
func Start(t testing.TB, api *APIServer, components ...controller.Component) *Harness {
	t.Helper()
	return StartWith(t, api, Options{}, components...)
}

// Options vary the harness StartWith starts. The zero value is Start's.
type Options struct {
	// Stepped makes the test decide when reconciles happen, to assert what one reconcile
	// writes, returns or leaves in the status. The manager runs as Start's does (the scoped
	// cache, the start-up RBAC check, watches, events), but its controllers drop every request
	// their queues hand them (watch events, requeues): a component reconciles only when the test
	// calls Harness.Reconcile. Create, Update and MarkReady then also wait until the manager's
	// cache holds what they wrote, as the watch event that would have started a reconcile would.
	Stepped bool
	// Namespaces are more namespaces the manager's cache holds, beside the harness's own: where
	// a graph puts objects in another namespace.
	Namespaces []string
	// SyncPeriod, when set, is the cache's resync period: how often its informers deliver
	// every cached object again as an update. Default: controller-runtime's.
	SyncPeriod time.Duration
	// Config, when set, is how the harness's managers reach the API server instead of the
	// APIServer's own config (through a latency proxy, say).
	Config *rest.Config
	// Wraps wrap the transport of the harness's managers, after the scripted faults and the
	// recorder, the last outermost (a latency proxy, say).
	Wraps []func(http.RoundTripper) http.RoundTripper
}

// StartWith starts a manager running components (controller.For) in a new namespace of api, as
// opts say, and returns once its cache has synced. The manager stops when the test ends (or at
// Restart); a manager error fails t. Each harness records its own metrics, so tests do not share
// counters.
func StartWith(t testing.TB, api *APIServer, opts Options, components ...controller.Component) *Harness {
	t.Helper()
	h := newHarness(t, api, components)
	h.opts = opts
	if opts.Config != nil {
		h.config = opts.Config
	}
	h.run()
	return h
}

// run starts the harness's manager, its current one, stopped when the test ends.
func (h *Harness) run() {
	h.t.Helper()
	m, err := h.startManager(h.t.Context(), "", h.opts.Wraps...)
	if err != nil {
		h.t.Fatalf("controllertest: %v", err)
	}
	h.current = m
	h.t.Cleanup(func() {
		if err := m.stop(); err != nil {
			h.t.Errorf("controllertest: manager: %v", err)
		}
	})
}

// Manager returns the harness's running manager (the one Restart started last): its client
// reads the cache the reconcilers read. It fails t on a harness with no manager of its own
// (ExploreCrashes runs several).
func (h *Harness) Manager() ctrl.Manager {
	h.t.Helper()
	if h.current == nil {
		h.t.Fatal("controllertest: the harness has no manager of its own")
	}
	return h.current.Manager.Manager
}

// Restart stops the harness's manager and starts a fresh one with the same components, as a
// restarted operator process would: a new cache and queue, reconcilers that remember nothing of
// earlier reconciles. It returns once the new cache has synced; an error of the old manager
// fails t.
func (h *Harness) Restart() {
	h.t.Helper()
	if h.current == nil {
		h.t.Fatal("controllertest: Restart: the harness has no manager of its own")
	}
	if err := h.current.stop(); err != nil {
		h.t.Errorf("controllertest: manager: %v", err)
	}
	h.run()
}

// StopManager stops the harness's manager, as an operator process that is shutting down stops
// (its runnables first, then its controllers), waits until it has stopped and returns its error.
// The harness's reconcilers stay callable (Reconcile), with caches that no longer follow the
// API server; Restart starts a fresh manager.
func (h *Harness) StopManager() error {
	h.t.Helper()
	if h.current == nil {
		h.t.Fatal("controllertest: StopManager: the harness has no manager of its own")
	}
	return h.current.stop()
}

// newHarness returns a harness for components in a new namespace of api, with no manager yet.
func newHarness(t testing.TB, api *APIServer, components []controller.Component) *Harness {
	t.Helper()
	env := api.Env(t)
	return &Harness{
		Namespace: env.Namespace(t), Client: env.Client, t: t, scheme: env.Scheme, config: env.Config,
		components: components, requests: &requests.Recorder{}, deleted: map[types.UID]bool{},
		reconcilers: map[schema.GroupVersionKind]reconcile.Reconciler{},
		Faults:      &faults.Script{}, log: NewManagerLog(t),
	}
}

// managerRun is one manager of a harness, started by startManager.
type managerRun struct {
	*Manager
	// registry holds the manager's kdag metrics.
	registry *prometheus.Registry
}

// stop cancels the manager, waits until Start has returned and returns its error. It is safe to
// call more than once.
func (m *managerRun) stop() error { return m.Stop() }

// startManager starts a manager for the harness's components (new ones of shard from fresh, when
// set), its requests passed through the harness's scripted faults (Faults), recorded (Writes)
// and then passed through wraps (outermost last), logging to the harness's log, and returns once
// its cache has synced. ctx bounds the start-up RBAC check and the wait for the cache, not the
// manager, which runs until stop. It returns an error when the manager cannot be made, the
// components cannot be set up, or the cache does not sync; the manager is stopped then.
func (h *Harness) startManager(ctx context.Context, shard string, wraps ...func(http.RoundTripper) http.RoundTripper) (*managerRun, error) {
	components := h.components
	if h.fresh != nil {
		components = h.fresh(shard)
	}
	cacheOpts := controller.CacheOptions(h.scheme, components...)
	cacheOpts.DefaultNamespaces = map[string]cache.Config{h.Namespace: {}}
	for _, ns := range h.opts.Namespaces {
		cacheOpts.DefaultNamespaces[ns] = cache.Config{}
	}
	if h.opts.SyncPeriod > 0 {
		cacheOpts.SyncPeriod = &h.opts.SyncPeriod
	}
	if h.layer != nil {
		var err error
		if cacheOpts, err = h.layer.SelectCache(cacheOpts, shard); err != nil {
			return nil, errors.Wrapf(err, "the cache of shard %q", shard)
		}
	}
	mopts := ManagerOptions{
		Wraps: append([]func(http.RoundTripper) http.RoundTripper{h.Faults.Wrap, h.requests.Wrap}, wraps...),
		Log:   h.log,
	}
	mgr, err := newManager(h.config, h.scheme, cacheOpts, mopts)
	if err != nil {
		return nil, errors.Wrapf(err, "namespace %s", h.Namespace)
	}
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg)
	if err != nil {
		return nil, errors.Wrap(err, "metrics")
	}
	opts := []controller.Options{{Metrics: m, WatchNamespaces: append([]string{h.Namespace}, h.opts.Namespaces...),
		Wrappers: []controller.ReconcilerWrapper{h.keep}}}
	if h.layer != nil {
		opts = append(opts, h.layer.ControllerOptions(mgr, shard))
	}
	if err := controller.Setup(ctx, mgr, components, opts...); err != nil {
		return nil, errors.Wrapf(err, "set up components in namespace %s", h.Namespace)
	}
	run := &managerRun{Manager: runManager(mgr, h.log), registry: reg}
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		err := run.stop()
		return nil, errors.Errorf("the cache of the manager for namespace %s did not sync (start: %v)", h.Namespace, err)
	}
	return run, nil
}

// Named returns a new *T named name, with no namespace (the harness's), to select an object by
// name for Get, WaitExists, MarkReady, WaitReady or a Case: Named[appsv1.Deployment]("web").
func Named[T any, PT interface {
	*T
	client.Object
}](name string) PT {
	obj := PT(new(T))
	obj.SetName(name)
	return obj
}

// Create creates obj, in the harness's namespace when obj has none, fails t on error, and
// returns obj as the API server stored it.
func (h *Harness) Create(obj client.Object) client.Object {
	h.t.Helper()
	if obj.GetNamespace() == "" {
		obj.SetNamespace(h.Namespace)
	}
	if err := h.Client.Create(context.Background(), obj); err != nil {
		h.t.Fatalf("controllertest: create %s: %v", h.describe(obj), err)
	}
	h.waitCached(obj)
	return obj
}

// Get reads obj (selected by its name, and namespace or the harness's) from the API server into
// obj and reports whether it exists; any error other than NotFound fails t.
func (h *Harness) Get(obj client.Object) bool {
	h.t.Helper()
	if obj.GetNamespace() == "" {
		obj.SetNamespace(h.Namespace)
	}
	err := h.Client.Get(context.Background(), client.ObjectKeyFromObject(obj), obj)
	if apierrors.IsNotFound(err) {
		return false
	}
	if err != nil {
		h.t.Fatalf("controllertest: get %s: %v", h.describe(obj), err)
	}
	return true
}

// Eventually polls cond every 100 ms (poll.Interval) until it returns true, and fails t with
// what when it has not within Timeout, or at once with cond's error when it returns one.
func (h *Harness) Eventually(what string, cond func(ctx context.Context) (bool, error)) {
	h.t.Helper()
	var condErr error
	poll.Until(h.t, "controllertest: "+what, Timeout, func(ctx context.Context) string {
		ok, err := cond(ctx)
		switch {
		case err != nil:
			condErr = err
			return ""
		case !ok:
			return "not yet"
		}
		return ""
	})
	if condErr != nil {
		h.t.Fatalf("controllertest: %s: %v", what, condErr)
	}
}

// WaitReady waits until owner's kdag Ready condition is True for its current generation, then
// reads owner back: WaitCondition(owner, kdagv1alpha1.ConditionReady, metav1.ConditionTrue).
func (h *Harness) WaitReady(owner client.Object) {
	h.t.Helper()
	h.WaitCondition(owner, kdagv1alpha1.ConditionReady, metav1.ConditionTrue)
}

// WaitCondition waits until owner's condition of type typ has status for owner's current
// generation (condition observedGeneration equal to metadata.generation), reads owner back and
// returns the condition. It fails t after Timeout with the owner's Ready and Stalled conditions,
// which name the node that holds it back.
func (h *Harness) WaitCondition(owner client.Object, typ string, status metav1.ConditionStatus) metav1.Condition {
	h.t.Helper()
	gvk := h.ownerGVK(owner)
	var found metav1.Condition
	what := fmt.Sprintf("controllertest: %s has %s=%s", h.describe(owner), typ, status)
	poll.Until(h.t, what, Timeout, func(ctx context.Context) string {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(gvk)
		if err := h.Client.Get(ctx, client.ObjectKeyFromObject(owner), u); err != nil {
			return err.Error()
		}
		conds := conditionsOf(u)
		c := meta.FindStatusCondition(conds, typ)
		if c == nil || c.Status != status || c.ObservedGeneration != u.GetGeneration() {
			return describeConditions(conds)
		}
		found = *c
		return ""
	})
	h.Get(owner)
	return found
}

// ownerGVK returns owner's kind from the harness's scheme (failing t when it is not there) and
// puts owner in the harness's namespace when it names none.
func (h *Harness) ownerGVK(owner client.Object) schema.GroupVersionKind {
	h.t.Helper()
	gvk, err := apiutil.GVKForObject(owner, h.scheme)
	if err != nil {
		h.t.Fatalf("controllertest: %T is not in the scheme: %v", owner, err)
	}
	if owner.GetNamespace() == "" {
		owner.SetNamespace(h.Namespace)
	}
	return gvk
}

// WaitApplied waits until kdag has applied owner's current generation: the owner's
// status.observedGeneration equals its metadata.generation and the graph of that reconcile
// has no failed, blocked or canceled node (every node was applied; some may still be waiting
// to become ready). Then it reads owner back. Wait for it after changing an owner's spec and
// before marking its new workloads ready (MarkReady): a workload marked ready before kdag
// applied the change would be marked for the old spec. It fails t after Timeout with the
// owner's Ready and Stalled conditions.
func (h *Harness) WaitApplied(owner client.Object) {
	h.t.Helper()
	gvk := h.ownerGVK(owner)
	what := fmt.Sprintf("controllertest: kdag applied %s", h.describe(owner))
	poll.Until(h.t, what, Timeout, func(ctx context.Context) string {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(gvk)
		if err := h.Client.Get(ctx, client.ObjectKeyFromObject(owner), u); err != nil {
			return err.Error()
		}
		return notApplied(u)
	})
	h.Get(owner)
}

// notApplied says why u's status does not show its generation applied, or "" when it does.
func notApplied(u *unstructured.Unstructured) string {
	observed, _, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration")
	if observed != u.GetGeneration() {
		return fmt.Sprintf("status.observedGeneration %d, generation %d; %s", observed, u.GetGeneration(), describeConditions(conditionsOf(u)))
	}
	graph, found, _ := unstructured.NestedMap(u.Object, "status", "graph")
	if !found {
		return "no status.graph yet; " + describeConditions(conditionsOf(u))
	}
	var summary kdagv1alpha1.GraphSummary
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(graph, &summary); err != nil {
		return "status.graph: " + err.Error()
	}
	if n := summary.Failed + summary.Blocked + summary.Canceled; n > 0 {
		return fmt.Sprintf("%d of %d nodes not applied (failed %d, blocked %d, canceled %d); %s",
			n, summary.Total, summary.Failed, summary.Blocked, summary.Canceled, describeConditions(conditionsOf(u)))
	}
	return ""
}

// WaitExists waits until obj (selected by name, and namespace or the harness's) exists, reads
// it into obj, and fails t after Timeout.
func (h *Harness) WaitExists(obj client.Object) {
	h.t.Helper()
	if obj.GetNamespace() == "" {
		obj.SetNamespace(h.Namespace)
	}
	h.Eventually(h.describe(obj)+" exists", func(context.Context) (bool, error) { return h.Get(obj), nil })
}

// Update reads obj (selected by name, and namespace or the harness's) from the API server, calls
// change, which edits obj, and writes obj back, again from a fresh read when another writer
// changed it meanwhile (a conflict), with opts (client.FieldOwner("kubectl-edit"), to write as
// a person would); obj holds what the API server stored. Any other error fails t.
//
//	h.Update(site, func() { site.Spec.Replicas = ptr.To[int32](2) })
func (h *Harness) Update(obj client.Object, change func(), opts ...client.UpdateOption) {
	h.t.Helper()
	if obj.GetNamespace() == "" {
		obj.SetNamespace(h.Namespace)
	}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := h.Client.Get(context.Background(), client.ObjectKeyFromObject(obj), obj); err != nil {
			return err
		}
		change()
		return h.Client.Update(context.Background(), obj, opts...)
	})
	if err != nil {
		h.t.Fatalf("controllertest: update %s: %v", h.describe(obj), err)
	}
	h.waitCached(obj)
}

// Delete deletes obj (selected by name, and namespace or the harness's) with background
// propagation and returns at once: finalizers may hold it (WaitGone). An object already gone is
// no error; any other error fails t. The crash explorer (ExploreCrashes) counts an object deleted
// this way as the scenario's deletion, never as one a manager made.
func (h *Harness) Delete(obj client.Object) {
	h.t.Helper()
	if !h.Get(obj) {
		return
	}
	h.mu.Lock()
	h.deleted[obj.GetUID()] = true
	h.mu.Unlock()
	err := h.Client.Delete(context.Background(), obj, client.PropagationPolicy(metav1.DeletePropagationBackground))
	if err != nil && !apierrors.IsNotFound(err) {
		h.t.Fatalf("controllertest: delete %s: %v", h.describe(obj), err)
	}
}

// deletedByTest reports whether the object of uid was deleted with Delete.
func (h *Harness) deletedByTest(uid types.UID) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.deleted[uid]
}

// WaitGone waits until obj (selected by name, and namespace or the harness's) does not exist:
// its finalizers, kdag's among them, released. It fails t after Timeout.
func (h *Harness) WaitGone(obj client.Object) {
	h.t.Helper()
	if obj.GetNamespace() == "" {
		obj.SetNamespace(h.Namespace)
	}
	h.Eventually(h.describe(obj)+" is gone", func(context.Context) (bool, error) {
		return !h.Get(obj.DeepCopyObject().(client.Object)), nil
	})
}

// MarkReady waits until obj (a Deployment, StatefulSet, Job or PersistentVolumeClaim, selected
// by name) exists, then writes the status its built-in controller would write once the rollout is
// available, the Job has succeeded or the claim is bound, for the object's current generation;
// envtest runs no such controller. Call it again after the object's spec changes. Any other type
// fails t.
func (h *Harness) MarkReady(obj client.Object) {
	h.t.Helper()
	if err := workload.SetReady(obj.DeepCopyObject().(client.Object), metav1.Now()); err != nil {
		h.t.Fatalf("controllertest: MarkReady: %v", err) // before waiting for what it cannot mark
	}
	h.WaitExists(obj)
	if err := workload.MarkReady(context.Background(), h.Client, obj); err != nil {
		h.t.Fatalf("controllertest: mark %s ready: %v", h.describe(obj), err)
	}
	h.waitCached(obj)
}

// Writes returns the writes the harness's manager made since it started or since the last
// ResetWrites, in order, each as "VERB resource/name" or "VERB resource/name/subresource" (for
// example "PATCH configmaps/demo-config", "PUT valkeys/demo/status"). Events and the start-up
// RBAC check's access reviews are left out: they change no object.
func (h *Harness) Writes() []string {
	var writes []string
	for _, r := range h.requests.Requests() {
		if r.Code < http.StatusOK || r.Code >= http.StatusMultipleChoices {
			continue // not done
		}
		if line, ok := writeLine(r.Method, r.Path); ok {
			writes = append(writes, line)
		}
	}
	return writes
}

// Requests returns every request the harness's managers sent since they started or since the
// last ResetWrites, in order, with the API server's answer (watches, reads, events included).
func (h *Harness) Requests() []requests.Request { return h.requests.Requests() }

// ResetWrites forgets the requests recorded so far (Writes, Reads, Requests).
func (h *Harness) ResetWrites() { h.requests.Reset() }

func (h *Harness) describe(obj client.Object) string {
	kind := "object"
	if gvk, err := apiutil.GVKForObject(obj, h.scheme); err == nil {
		kind = gvk.Kind
	}
	return kind + " " + obj.GetNamespace() + "/" + obj.GetName()
}

// conditionsOf returns u's status.conditions (kdag's status block), skipping malformed entries.
func conditionsOf(u *unstructured.Unstructured) []metav1.Condition {
	raw, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	var out []metav1.Condition
	for _, r := range raw {
		m, ok := r.(map[string]any)
		if !ok {
			continue
		}
		var c metav1.Condition
		if runtime.DefaultUnstructuredConverter.FromUnstructured(m, &c) == nil {
			out = append(out, c)
		}
	}
	return out
}

// describeConditions renders the Ready and Stalled conditions for a failure message.
func describeConditions(conds []metav1.Condition) string {
	var parts []string
	for _, typ := range []string{kdagv1alpha1.ConditionReady, kdagv1alpha1.ConditionStalled} {
		if c := meta.FindStatusCondition(conds, typ); c != nil {
			parts = append(parts, c.Type+"="+string(c.Status)+" "+c.Reason+": "+c.Message)
		}
	}
	if len(parts) == 0 {
		return "no Ready condition yet"
	}
	return strings.Join(parts, "; ")
}

// writeLine turns a write request into "VERB resource/name[/subresource]"; reads, events and
// access reviews give false.
func writeLine(method, path string) (string, bool) {
	if method == http.MethodGet || method == http.MethodHead || method == http.MethodOptions {
		return "", false
	}
	parts := strings.Split(strings.Trim(path, "/"), "/")
	var rest []string
	switch {
	case len(parts) > 2 && parts[0] == "api":
		rest = parts[2:]
	case len(parts) > 3 && parts[0] == "apis":
		rest = parts[3:]
	default:
		return "", false
	}
	if len(rest) > 2 && rest[0] == "namespaces" {
		rest = rest[2:]
	}
	if len(rest) == 0 {
		return "", false
	}
	switch rest[0] {
	case "events", "selfsubjectaccessreviews", "subjectaccessreviews", "tokenreviews":
		return "", false
	}
	return method + " " + strings.Join(rest, "/"), true
}

// Case is one table-driven scenario of a component on the real API server, in reconciler.io's
// spirit: given these live objects, when the owner is created, expect this condition and these
// writes. RunCases runs each in a harness of its own.
type Case struct {
	// Name names the subtest.
	Name string
	// Live objects are created before the owner, in the harness's namespace when they have none.
	Live []client.Object
	// Owner is created after Live, in the harness's namespace when it has none.
	Owner client.Object
	// Ready are objects (Deployment, StatefulSet, Job, PersistentVolumeClaim; selected by name)
	// marked ready in turn, each once it exists, as their controllers would (MarkReady).
	Ready []client.Object
	// Want is the condition of the owner the case waits for (WaitCondition): Type and Status are
	// required; Reason, when set, must match too.
	Want metav1.Condition
	// Writes, when not nil, are the distinct writes the manager made once Want holds
	// (Harness.Writes, sorted, without repeats); nil: not checked.
	Writes []string
}

// RunCases runs each case as a subtest with a harness of its own (Start with components): it
// creates the case's live objects and owner, marks its workloads ready, waits for its condition
// and compares the writes. Objects are deep-copied first: cases may share them.
func RunCases(t *testing.T, api *APIServer, cases []Case, components ...controller.Component) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) {
			h := Start(t, api, components...)
			for _, obj := range tc.Live {
				h.Create(obj.DeepCopyObject().(client.Object))
			}
			owner := tc.Owner.DeepCopyObject().(client.Object)
			h.Create(owner)
			for _, obj := range tc.Ready {
				h.MarkReady(obj.DeepCopyObject().(client.Object))
			}
			got := h.WaitCondition(owner, tc.Want.Type, tc.Want.Status)
			if tc.Want.Reason != "" && got.Reason != tc.Want.Reason {
				t.Errorf("%s reason = %s (%s), want %s", tc.Want.Type, got.Reason, got.Message, tc.Want.Reason)
			}
			if tc.Writes == nil {
				return
			}
			writes := h.Writes()
			slices.Sort(writes)
			writes = slices.Compact(writes)
			if diff := cmp.Diff(tc.Writes, writes); diff != "" {
				t.Errorf("writes (-want +got):\n%s", diff)
			}
		})
	}
}
