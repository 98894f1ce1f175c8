package controller

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/testing/envtest"
	"github.com/kdag-dev/kdag/pkg/testing/faults"
	"github.com/kdag-dev/kdag/pkg/testing/leak"
	"github.com/kdag-dev/kdag/pkg/testing/poll"
	"github.com/kdag-dev/kdag/pkg/testing/requests"
	"github.com/kdag-dev/kdag/pkg/testing/running"
	"github.com/kdag-dev/kdag/pkg/testing/testapi"
	"github.com/kdag-dev/kdag/pkg/testing/workload"
)

var (
	env    *envtest.Environment
	scheme = runtime.NewScheme()
)

func TestMain(m *testing.M) {
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(testapi.AddToScheme(scheme))
	if os.Getenv(scaleHelperEnv) != "" {
		os.Exit(runScaleHelper()) // this process is BenchmarkScale's manager or raw writer
	}
	os.Exit(leak.Check(func() int {
		return envtest.Main(m, &env, envtest.Options{CRDs: testapi.CRDs(), Scheme: scheme})
	}))
}

// calls records the HTTP requests a manager makes (requests.Recorder) and injects the faults a
// test scripts into them (faults.Script: FailNext, FailNextWith, FailNextWithStatus, AfterNext,
// Clear). Watches and the informers' initial lists are not counted once the test resets the
// recorder. Events are written asynchronously by the recorder's broadcaster, so they are kept
// apart from the writes a reconcile makes itself. A write the server refused with 409 Conflict
// changed nothing: it is counted as refused, not as a write.
type calls struct {
	requests.Recorder
	faults.Script
}

// wrap records the requests of next, the scripted faults injected first.
func (c *calls) wrap(next http.RoundTripper) http.RoundTripper {
	return c.Recorder.Wrap(c.Script.Wrap(next))
}

// split sorts the requests recorded since the last reset, each as "VERB path", watches left out:
// writes the server refused with 409, events, reads (GET), and the other writes.
func (c *calls) split() (writes, reads, events, refused []string) {
	for _, r := range c.Requests() {
		switch {
		case r.Watch:
		case r.Refused():
			refused = append(refused, r.String())
		case r.Event():
			events = append(events, r.String())
		case !r.Write():
			reads = append(reads, r.String())
		default:
			writes = append(writes, r.String())
		}
	}
	return writes, reads, events, refused
}

func (c *calls) snapshot() (writes, reads []string) {
	writes, reads, _, _ = c.split()
	return writes, reads
}

// fixture is a started manager with one kdag reconciler that is not registered for watches:
// tests call Reconcile themselves, so they decide when reconciles happen.
type fixture struct {
	t     testing.TB
	ns    string
	mgr   ctrl.Manager
	c     *reconciler
	calls *calls
	cl    client.Client // uncached, for test setup and assertions
	rm    ResourceManager[*testapi.Widget]
	opts  []Options
}

func newFixture(t testing.TB, rm ResourceManager[*testapi.Widget], opts ...Options) *fixture {
	t.Helper()
	return startFixture(t, fixtureConfig{}, rm, opts...)
}

// newRegisteredFixture is newFixture with the reconciler registered with the manager (New): its
// watches reconcile owners by themselves, and tests wait for the effect rather than call
// Reconcile.
func newRegisteredFixture(t testing.TB, rm ResourceManager[*testapi.Widget], opts ...Options) *fixture {
	t.Helper()
	return startFixture(t, fixtureConfig{register: true}, rm, opts...)
}

// fixtureConfig varies a fixture: register the reconciler with the manager, cache these
// namespaces too (other than the fixture's own), and reach the API server with config instead
// of env.Config (through a latency proxy, say).
type fixtureConfig struct {
	register   bool
	namespaces []string
	config     *rest.Config
	// syncPeriod, when set, is the cache's SyncPeriod: how often its informers deliver every
	// cached object again as an update.
	syncPeriod time.Duration
}

func startFixture(t testing.TB, fc fixtureConfig, rm ResourceManager[*testapi.Widget], opts ...Options) *fixture {
	t.Helper()
	f := &fixture{t: t, ns: env.Namespace(t), calls: &calls{}, cl: env.Client, rm: rm, opts: opts}
	namespaces := map[string]cache.Config{f.ns: {}}
	for _, ns := range fc.namespaces {
		namespaces[ns] = cache.Config{}
	}
	cfg := rest.CopyConfig(env.Config)
	if fc.config != nil {
		cfg = rest.CopyConfig(fc.config)
	}
	cfg.Wrap(f.calls.wrap)
	var syncPeriod *time.Duration
	if fc.syncPeriod > 0 {
		syncPeriod = ptr.To(fc.syncPeriod)
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:         scheme,
		Metrics:        metricsserver.Options{BindAddress: "0"},
		MapperProvider: MapperProvider, // as CacheOptions' doc asks of a cache limited to namespaces
		Cache: cache.Options{
			DefaultNamespaces: namespaces,
			ByObject:          CacheOptions(scheme, For("widgets", funcRM{})).ByObject,
			SyncPeriod:        syncPeriod,
		},
		Controller: ctrlConfigSkipNameValidation(),
	})
	if err != nil {
		t.Fatalf("new manager: %v", err)
	}
	f.mgr = mgr
	if fc.register {
		f.c, err = registerFor(mgr, "widget-"+f.ns, rm, opts...)
	} else {
		f.c, err = newController(mgr, "widget-"+f.ns, mustAdapt(t, rm), opts...)
	}
	if err != nil {
		t.Fatalf("new controller: %v", err)
	}
	running.Manager(t, mgr)
	if !mgr.GetCache().WaitForCacheSync(t.Context()) {
		t.Fatal("cache did not sync")
	}
	f.waitReferencesStarted()
	return f
}

// waitReferencesStarted waits until the reconciler's references runnable has made, at manager
// start, the one uncached list that tells whether namespaces can be watched: a reconcile that
// raced it would make that list itself, inside the window a test counts requests in.
func (f *fixture) waitReferencesStarted() {
	f.t.Helper()
	poll.True(f.t, "the references runnable asked whether namespaces can be watched", waitTimeout, func(context.Context) bool {
		f.c.refs.mu.Lock()
		defer f.c.refs.mu.Unlock()
		return f.c.refs.namespacesDecided
	})
}

// restart replaces the reconciler with a new one of the same name, as a restarted operator
// process would have: it remembers nothing of earlier reconciles.
func (f *fixture) restart() {
	f.t.Helper()
	c, err := newController(f.mgr, f.c.name, mustAdapt(f.t, f.rm), f.opts...)
	if err != nil {
		f.t.Fatalf("new controller: %v", err)
	}
	f.c = c
	f.waitReferencesStarted()
}

// widget creates a Widget in the fixture's namespace and waits until the manager's cache holds
// it, as the watch event that triggers a real reconcile would.
func (f *fixture) widget(name string, spec testapi.WidgetSpec) *testapi.Widget {
	f.t.Helper()
	w := &testapi.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name}, Spec: spec}
	if err := f.cl.Create(context.Background(), w); err != nil {
		f.t.Fatalf("create widget: %v", err)
	}
	f.waitCachedVersion(&testapi.Widget{}, name, w.ResourceVersion)
	return w
}

// reconcile runs one reconcile of the named widget.
func (f *fixture) reconcile(name string) error {
	_, err := f.c.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Namespace: f.ns, Name: name}})
	return err
}

// settle reconciles until a reconcile makes no write and the cache has caught up with it, so
// that what follows starts from the steady state. It fails the test after 20 s. It returns
// every write the reconciles made.
func (f *fixture) settle(name string) []string {
	f.t.Helper()
	var all []string
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 20*time.Second, true, func(context.Context) (bool, error) {
		f.calls.Reset()
		_ = f.reconcile(name)
		writes, _ := f.calls.snapshot()
		all = append(all, writes...)
		return len(writes) == 0, nil
	})
	if err != nil {
		writes, _ := f.calls.snapshot()
		f.t.Fatalf("owner %s did not settle; last writes: %s", name, strings.Join(writes, ", "))
	}
	return all
}

// get reads obj from the API server (not the cache).
func (f *fixture) get(obj client.Object, name string) client.Object {
	f.t.Helper()
	if err := f.cl.Get(context.Background(), client.ObjectKey{Namespace: f.ns, Name: name}, obj); err != nil {
		f.t.Fatalf("get %T %s: %v", obj, name, err)
	}
	return obj
}

// waitTimeout bounds the fixture's waits (poll.True) for the cache or the API server.
const waitTimeout = 20 * time.Second

// widgetRM is the test ResourceManager: a ConfigMap from spec.data, a generated Secret
// (create-only), a Service, and a Deployment that depends on both; spec.components switches on
// extra ConfigMaps named "extra-<component>".
type widgetRM struct {
	readyDeployment bool         // override the Deployment's readiness (envtest runs no controllers)
	afterDeploy     bool         // add a ConfigMap "<name>-after-deploy" that depends on the Deployment
	configOpts      []NodeOption // extra options of the "<name>-config" node
}

func (widgetRM) OwnedTypes() []client.Object {
	return []client.Object{&corev1.ConfigMap{}, &corev1.Secret{}, &corev1.Service{}, &appsv1.Deployment{}}
}

func (rm widgetRM) AddResources(_ context.Context, owner *testapi.Widget, b *Graph) error {
	w := owner
	labels := map[string]string{"app": w.Name}
	cm := b.Add(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: w.Name + "-config"}, Data: w.Spec.Data}, rm.configOpts...)
	secret := b.Add(&corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: w.Name + "-secret"},
		// A new random value on every call, as a password generator would: only CreateOnly
		// keeps it from being rewritten on every reconcile.
		StringData: map[string]string{"password": rand.Text()},
	}, CreateOnly())
	b.Add(&corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: w.Name},
		Spec: corev1.ServiceSpec{
			Selector: labels,
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80}},
		},
	})
	var opts []NodeOption
	opts = append(opts, DependsOn(cm, secret))
	if rm.readyDeployment {
		opts = append(opts, ReadyWhen(func(client.Object) (bool, error) { return true, nil }))
	}
	deploy := b.Add(webDeployment(w, 1), opts...)
	if rm.afterDeploy {
		b.Add(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: w.Name + "-after-deploy"}}, DependsOn(deploy))
	}
	for _, comp := range w.Spec.Components {
		b.Add(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "extra-" + comp}})
	}
	return nil
}

func ctrlConfigSkipNameValidation() config.Controller {
	return config.Controller{SkipNameValidation: ptr.To(true)}
}

// cached reads obj from the manager's cache, which the reconciler reads from.
func (f *fixture) cached(obj client.Object, name string) error {
	return f.mgr.GetClient().Get(context.Background(), client.ObjectKey{Namespace: f.ns, Name: name}, obj)
}

// waitCached polls the cache until cond holds for the cached obj (cond sees a nil error only).
func (f *fixture) waitCached(obj client.Object, name, what string, cond func() bool) {
	f.t.Helper()
	poll.True(f.t, what, waitTimeout, func(context.Context) bool { return f.cached(obj, name) == nil && cond() })
}

// waitCachedGone polls the cache until it no longer holds obj.
// waitCachedVersion polls the cache until it holds obj at resourceVersion rv or later.
func (f *fixture) waitCachedVersion(obj client.Object, name, rv string) {
	f.t.Helper()
	want, err := strconv.ParseUint(rv, 10, 64)
	if err != nil {
		f.t.Fatalf("resourceVersion %q: %v", rv, err)
	}
	f.waitCached(obj, name, fmt.Sprintf("cache sees %T %s at resourceVersion %s", obj, name, rv), func() bool {
		got, err := strconv.ParseUint(obj.GetResourceVersion(), 10, 64)
		return err == nil && got >= want
	})
}

// update changes obj (read from the API server) with mutate and writes it with a plain Update
// as field manager "kubectl-edit", as a person editing the object would; then it waits until
// the cache holds the change. It returns the updated object.
func (f *fixture) update(obj client.Object, name string, mutate func(client.Object), opts ...client.UpdateOption) client.Object {
	f.t.Helper()
	ctx := context.Background()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := f.cl.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: name}, obj); err != nil {
			return err
		}
		mutate(obj)
		return f.cl.Update(ctx, obj, opts...)
	})
	if err != nil {
		f.t.Fatalf("update %T %s: %v", obj, name, err)
	}
	f.waitCachedVersion(obj.DeepCopyObject().(client.Object), name, obj.GetResourceVersion())
	return obj
}

// foreignUpdate is update by field manager "kubectl-edit".
func (f *fixture) foreignUpdate(obj client.Object, name string, mutate func(client.Object)) client.Object {
	f.t.Helper()
	return f.update(obj, name, mutate, client.FieldOwner("kubectl-edit"))
}

// updateWidget changes the named Widget's spec and waits until the cache holds the change.
func (f *fixture) updateWidget(name string, mutate func(*testapi.Widget)) *testapi.Widget {
	f.t.Helper()
	return f.update(&testapi.Widget{}, name, func(o client.Object) { mutate(o.(*testapi.Widget)) }).(*testapi.Widget)
}

// status reads the named Widget's status from the API server.
func (f *fixture) status(name string) kdagv1alpha1.Status {
	f.t.Helper()
	return f.get(&testapi.Widget{}, name).(*testapi.Widget).Status.Status
}

// notFound reports whether the API server has no obj called name.
func (f *fixture) notFound(obj client.Object, name string) bool {
	f.t.Helper()
	err := f.cl.Get(context.Background(), client.ObjectKey{Namespace: f.ns, Name: name}, obj)
	if err != nil && !apierrors.IsNotFound(err) {
		f.t.Fatalf("get %T %s: %v", obj, name, err)
	}
	return apierrors.IsNotFound(err)
}

// events lists the events (events.k8s.io/v1) in the fixture's namespace with reason.
func (f *fixture) events(reason string) []eventsv1.Event {
	f.t.Helper()
	var list eventsv1.EventList
	if err := f.cl.List(context.Background(), &list, client.InNamespace(f.ns)); err != nil {
		f.t.Fatalf("list events: %v", err)
	}
	var out []eventsv1.Event
	for _, e := range list.Items {
		if e.Reason == reason {
			out = append(out, e)
		}
	}
	return out
}

// waitEvent waits for an event with reason and type about the named Widget and returns it.
func (f *fixture) waitEvent(owner, typ, reason string) eventsv1.Event {
	f.t.Helper()
	var found eventsv1.Event
	poll.True(f.t, fmt.Sprintf("%s event %s on Widget %s", typ, reason, owner), waitTimeout, func(context.Context) bool {
		for _, e := range f.events(reason) {
			if e.Type == typ && e.Regarding.Kind == "Widget" && e.Regarding.Name == owner {
				found = e
				return true
			}
		}
		return false
	})
	return found
}

// objectWrites returns the writes of the owner's objects counted since the last reset: every
// write but those of its revisions (ControllerRevisions, which revision_test.go counts).
func (f *fixture) objectWrites() []string {
	w, _ := f.calls.snapshot()
	return slices.DeleteFunc(w, func(s string) bool { return strings.Contains(s, "/controllerrevisions") })
}

// markReady writes the status the built-in controller would write once obj, the object named
// name in the fixture's namespace, is ready (workload.MarkReady: a Deployment's available
// rollout, a StatefulSet's replicas, a Job's success; envtest runs no controllers) and waits
// until the cache holds it.
func (f *fixture) markReady(obj client.Object, name string) {
	f.t.Helper()
	obj.SetNamespace(f.ns)
	obj.SetName(name)
	if err := workload.MarkReady(context.Background(), f.cl, obj); err != nil {
		f.t.Fatalf("mark %T %s ready: %v", obj, name, err)
	}
	f.waitCachedVersion(obj.DeepCopyObject().(client.Object), name, obj.GetResourceVersion())
}

// markDeploymentAvailable marks the named Deployment's rollout available (markReady).
func (f *fixture) markDeploymentAvailable(name string) { f.markReady(&appsv1.Deployment{}, name) }

// condition returns the condition of type typ, or nil.
func condition(st kdagv1alpha1.Status, typ string) *metav1.Condition {
	return meta.FindStatusCondition(st.Conditions, typ)
}

// isTerminalErr reports whether err is a reconcile.TerminalError.
func isTerminalErr(err error) bool { return errors.Is(err, reconcile.TerminalError(nil)) }

// mustAdapt erases rm's owner type, failing the test if it cannot.
func mustAdapt(t testing.TB, rm ResourceManager[*testapi.Widget]) manager {
	t.Helper()
	m, err := adapt(rm)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// funcRM is a ResourceManager over Widgets whose graph is the add function; it owns ConfigMaps,
// Secrets, Services, Deployments and the types in owned.
type funcRM struct {
	add   func(w *testapi.Widget, b *Graph) error
	owned []client.Object
}

// owning returns rm owning the types of objs too.
func (rm funcRM) owning(objs ...client.Object) funcRM {
	rm.owned = append(append([]client.Object(nil), rm.owned...), objs...)
	return rm
}

func (rm funcRM) OwnedTypes() []client.Object {
	return append([]client.Object{&corev1.ConfigMap{}, &corev1.Secret{}, &corev1.Service{}, &appsv1.Deployment{}}, rm.owned...)
}

func (rm funcRM) AddResources(_ context.Context, owner *testapi.Widget, b *Graph) error {
	return rm.add(owner, b)
}

// webDeployment is the Deployment of the test graphs: w.Name, spec.replicas from the Widget
// (defaultReplicas without), one nginx container reading the ConfigMap "<name>-config".
func webDeployment(w *testapi.Widget, defaultReplicas int32) *appsv1.Deployment {
	d := podDeployment(w.Name, corev1.PodSpec{Containers: []corev1.Container{{
		Name: "web", Image: "nginx:1.27",
		EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: w.Name + "-config"}}}},
	}}})
	d.Spec.Replicas = ptr.To(ptr.Deref(w.Spec.Replicas, defaultReplicas))
	return d
}

// podDeployment is a Deployment named name whose pods, labelled app=name, run pod.
func podDeployment(name string, pod corev1.PodSpec) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}}, Spec: pod},
		},
	}
}
