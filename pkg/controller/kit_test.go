package controller_test

import (
	"context"
	"crypto/rand"
	"errors"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/controller"
	"github.com/kdag-dev/kdag/pkg/controllertest"
	"github.com/kdag-dev/kdag/pkg/testing/envtest"
	"github.com/kdag-dev/kdag/pkg/testing/faults"
	"github.com/kdag-dev/kdag/pkg/testing/leak"
	"github.com/kdag-dev/kdag/pkg/testing/poll"
	"github.com/kdag-dev/kdag/pkg/testing/requests"
	"github.com/kdag-dev/kdag/pkg/testing/testapi"
)

// The package's tests run on kdag's test kit (controllertest), as an operator author's do: a
// harness per test, on the API server the package's TestMain started. The helpers below only
// name the kit's calls after the Widget a test works on.

var (
	// env is the package's API server, started by TestMain.
	env *envtest.Environment
	// scheme holds client-go's types and the test Widget.
	scheme = controller.SharedScheme
	// api is env for harnesses.
	api = sync.OnceValue(func() *controllertest.APIServer { return controllertest.RunningAPIServer(env) })
)

func TestMain(m *testing.M) {
	if os.Getenv(scaleHelperEnv) != "" {
		os.Exit(runScaleHelper()) // this process is BenchmarkScale's manager or raw writer
	}
	os.Exit(leak.Check(func() int {
		return envtest.Main(m, &env, envtest.Options{CRDs: testapi.CRDs(), Scheme: scheme})
	}))
}

// skipNameValidation lets tests register controllers of one name in several managers.
func skipNameValidation() config.Controller {
	return config.Controller{SkipNameValidation: ptr.To(true)}
}

// waitTimeout bounds the waits of the package's tests.
const waitTimeout = controllertest.Timeout

// fixture is a harness of one Widget component, its reconciles the test's (Options.Stepped)
// unless the fixture was started registered.
type fixture struct {
	*controllertest.Harness
	t  testing.TB
	ns string        // the harness's namespace
	cl client.Client // the harness's uncached client, for setup and assertions
	// calls are the requests of the harness's manager, and the faults scripted into them.
	calls calls
	// name is the component's name: the kdag controller label of its objects.
	name string
	// fieldManager is the component's server-side apply field manager.
	fieldManager string
}

// fixtureConfig varies a fixture: the queue reconciles (register), the cache holds more
// namespaces, or its informers resync every syncPeriod.
type fixtureConfig struct {
	register   bool
	namespaces []string
	syncPeriod time.Duration
	wraps      []func(http.RoundTripper) http.RoundTripper
	config     *rest.Config
}

// newFixture starts a stepped harness of rm: reconciles happen when the test calls reconcile.
func newFixture(t testing.TB, rm controller.ResourceManager[*testapi.Widget], opts ...controller.Options) *fixture {
	t.Helper()
	return startFixture(t, fixtureConfig{}, rm, opts...)
}

// newRegisteredFixture starts a harness of rm whose watches reconcile owners by themselves.
func newRegisteredFixture(t testing.TB, rm controller.ResourceManager[*testapi.Widget], opts ...controller.Options) *fixture {
	t.Helper()
	return startFixture(t, fixtureConfig{register: true}, rm, opts...)
}

func startFixture(t testing.TB, fc fixtureConfig, rm controller.ResourceManager[*testapi.Widget], opts ...controller.Options) *fixture {
	t.Helper()
	comp := controller.For("widgets", rm, opts...)
	h := controllertest.StartWith(t, api(), controllertest.Options{
		Stepped: !fc.register, Namespaces: fc.namespaces, SyncPeriod: fc.syncPeriod, Wraps: fc.wraps, Config: fc.config,
	}, comp)
	f := &fixture{Harness: h, t: t, ns: h.Namespace, cl: h.Client, calls: calls{h: h, Script: h.Faults},
		name: comp.Name(), fieldManager: comp.FieldManager()}
	f.waitReferencesStarted()
	return f
}

// waitReferencesStarted waits until the reconciler's references runnable has made its one
// uncached list at manager start (controller.ReferencesStarted), so that no test counts it.
func (f *fixture) waitReferencesStarted() {
	f.t.Helper()
	poll.True(f.t, "the references runnable asked whether namespaces can be watched", waitTimeout, func(context.Context) bool {
		return controller.ReferencesStarted(f.reconciler())
	})
}

// calls are the requests a harness's manager made (Harness.Requests) and the faults a test
// scripts into them (faults.Script: FailNext, FailNextWith, FailNextWithStatus, AfterNext,
// Clear). Events are written asynchronously by the recorder's broadcaster, so they are kept
// apart from the writes a reconcile makes itself. A write the server refused with 409 Conflict
// changed nothing: it is counted as refused, not as a write.
type calls struct {
	h *controllertest.Harness
	*faults.Script
}

// Reset forgets the requests recorded so far.
func (c calls) Reset() { c.h.ResetWrites() }

// Requests returns the requests recorded since the last reset.
func (c calls) Requests() []requests.Request { return c.h.Requests() }

// split sorts the requests recorded since the last reset, each as "VERB path", watches left out:
// writes the server refused with 409, events, reads (GET), and the other writes.
func (c calls) split() (writes, reads, events, refused []string) {
	for _, r := range c.h.Requests() {
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

// snapshot returns the writes and reads split sorts out.
func (c calls) snapshot() (writes, reads []string) {
	writes, reads, _, _ = c.split()
	return writes, reads
}

// events lists the events in the harness's namespace with reason (Harness.Events).
func (f *fixture) events(reason string) []eventsv1.Event { return f.Events(reason) }

// widget creates the Widget name with spec.
func (f *fixture) widget(name string, spec testapi.WidgetSpec) *testapi.Widget {
	f.t.Helper()
	return f.Create(&testapi.Widget{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}).(*testapi.Widget)
}

// reconcile runs one reconcile of the Widget name.
func (f *fixture) reconcile(name string) error {
	_, err := f.reconcileResult(name)
	return err
}

// reconcileResult runs one reconcile of the Widget name and returns its result.
func (f *fixture) reconcileResult(name string) (reconcile.Result, error) {
	f.t.Helper()
	return f.Reconcile(context.Background(), controllertest.Named[testapi.Widget](name))
}

// settle reconciles the Widget name until a reconcile makes no write, so that what follows
// starts from the steady state, and returns every write the reconciles made. It fails the test
// after 20 s.
func (f *fixture) settle(name string) []string {
	f.t.Helper()
	var all, last []string
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 20*time.Second, true, func(context.Context) (bool, error) {
		f.calls.Reset()
		_ = f.reconcile(name)
		last, _ = f.calls.snapshot()
		all = append(all, last...)
		return len(last) == 0, nil
	})
	if err != nil {
		f.t.Fatalf("owner %s did not settle; last writes: %s", name, strings.Join(last, ", "))
	}
	return all
}

// get reads the object name into obj from the API server (not the cache) and returns obj.
func (f *fixture) get(obj client.Object, name string) client.Object {
	f.t.Helper()
	obj.SetName(name)
	if !f.Get(obj) {
		f.t.Fatalf("%T %s not found", obj, name)
	}
	return obj
}

// notFound reports whether the API server has no object name of obj's type.
func (f *fixture) notFound(obj client.Object, name string) bool {
	f.t.Helper()
	obj.SetName(name)
	return !f.Get(obj)
}

// status reads the Widget name's status from the API server.
func (f *fixture) status(name string) kdagv1alpha1.Status {
	f.t.Helper()
	return f.get(&testapi.Widget{}, name).(*testapi.Widget).Status.Status
}

// update changes the object name of obj's type with mutate (Harness.Update, with opts) and
// returns it as the API server stored it.
func (f *fixture) update(obj client.Object, name string, mutate func(client.Object), opts ...client.UpdateOption) client.Object {
	f.t.Helper()
	obj.SetName(name)
	f.Update(obj, func() { mutate(obj) }, opts...)
	return obj
}

// foreignUpdate is update by field manager "kubectl-edit", as a person editing the object.
func (f *fixture) foreignUpdate(obj client.Object, name string, mutate func(client.Object)) client.Object {
	f.t.Helper()
	return f.update(obj, name, mutate, client.FieldOwner("kubectl-edit"))
}

// updateWidget changes the Widget name's spec and returns it.
func (f *fixture) updateWidget(name string, mutate func(*testapi.Widget)) *testapi.Widget {
	f.t.Helper()
	return f.update(&testapi.Widget{}, name, func(o client.Object) { mutate(o.(*testapi.Widget)) }).(*testapi.Widget)
}

// restart restarts the harness's manager (Harness.Restart), as a restarted operator process.
func (f *fixture) restart() {
	f.t.Helper()
	f.Restart()
	f.waitReferencesStarted()
}

// reconciler is the component's kdag reconciler (Harness.Reconciler), for the hooks of
// export_test.go that look inside it.
func (f *fixture) reconciler() reconcile.Reconciler {
	return f.Reconciler(controllertest.Named[testapi.Widget]("owner"))
}

// mgr is the harness's running manager.
func (f *fixture) mgr() ctrl.Manager { return f.Manager() }

// markReady marks the object name of obj's type ready (Harness.MarkReady).
func (f *fixture) markReady(obj client.Object, name string) {
	f.t.Helper()
	obj.SetName(name)
	f.MarkReady(obj)
}

// markDeploymentAvailable marks the Deployment name's rollout available.
func (f *fixture) markDeploymentAvailable(name string) { f.markReady(&appsv1.Deployment{}, name) }

// waitEvent waits for an event of type typ with reason about the Widget owner.
func (f *fixture) waitEvent(owner, typ, reason string) eventsv1.Event {
	f.t.Helper()
	return f.WaitEvent(controllertest.Named[testapi.Widget](owner), typ, reason)
}

// objectWrites returns the writes of the owner's objects since the last reset, each as "VERB
// path": every write but those of its revisions (ControllerRevisions, which the revision tests
// count).
func (f *fixture) objectWrites() []string {
	w, _ := f.calls.snapshot()
	return slices.DeleteFunc(w, func(s string) bool { return strings.Contains(s, "/controllerrevisions") })
}

// cached reads the object name into obj from the manager's cache, which the reconciler reads.
func (f *fixture) cached(obj client.Object, name string) error {
	f.t.Helper()
	obj.SetName(name)
	if !f.Cached(obj) {
		return apierrors.NewNotFound(schema.GroupResource{}, name)
	}
	return nil
}

// waitCached polls the cache until cond holds for the cached object name, read into obj.
func (f *fixture) waitCached(obj client.Object, name, what string, cond func() bool) {
	f.t.Helper()
	poll.True(f.t, what, waitTimeout, func(context.Context) bool { return f.cached(obj, name) == nil && cond() })
}

// waitCachedVersion waits until the cache holds the object name of obj's type at resourceVersion
// rv or later (Harness.WaitCached).
func (f *fixture) waitCachedVersion(obj client.Object, name, rv string) {
	f.t.Helper()
	obj.SetName(name)
	obj.SetResourceVersion(rv)
	f.WaitCached(obj)
}

// condition returns the condition of type typ, or nil.
func condition(st kdagv1alpha1.Status, typ string) *metav1.Condition {
	return meta.FindStatusCondition(st.Conditions, typ)
}

// isTrue reports whether st's condition typ is True.
func isTrue(st kdagv1alpha1.Status, typ string) bool {
	c := condition(st, typ)
	return c != nil && c.Status == metav1.ConditionTrue
}

// isTerminalErr reports whether err is a reconcile.TerminalError.
func isTerminalErr(err error) bool { return errors.Is(err, reconcile.TerminalError(nil)) }

// widgetRM is the test ResourceManager: a ConfigMap from spec.data, a generated Secret
// (create-only), a Service, and a Deployment that depends on both; spec.components switches on
// extra ConfigMaps named "extra-<component>".
type widgetRM struct {
	readyDeployment bool                    // override the Deployment's readiness (envtest runs no controllers)
	afterDeploy     bool                    // add a ConfigMap "<name>-after-deploy" that depends on the Deployment
	configOpts      []controller.NodeOption // extra options of the "<name>-config" node
}

func (widgetRM) OwnedTypes() []client.Object {
	return []client.Object{&corev1.ConfigMap{}, &corev1.Secret{}, &corev1.Service{}, &appsv1.Deployment{}}
}

func (rm widgetRM) AddResources(_ context.Context, w *testapi.Widget, b *controller.Graph) error {
	labels := map[string]string{"app": w.Name}
	cm := b.Add(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: w.Name + "-config"}, Data: w.Spec.Data}, rm.configOpts...)
	secret := b.Add(&corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: w.Name + "-secret"},
		// A new random value on every call, as a password generator would: only CreateOnly
		// keeps it from being rewritten on every reconcile.
		StringData: map[string]string{"password": rand.Text()},
	}, controller.CreateOnly())
	b.Add(&corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: w.Name},
		Spec: corev1.ServiceSpec{
			Selector: labels,
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80}},
		},
	})
	opts := []controller.NodeOption{controller.DependsOn(cm, secret)}
	if rm.readyDeployment {
		opts = append(opts, controller.ReadyWhen(func(client.Object) (bool, error) { return true, nil }))
	}
	deploy := b.Add(webDeployment(w, 1), opts...)
	if rm.afterDeploy {
		b.Add(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: w.Name + "-after-deploy"}}, controller.DependsOn(deploy))
	}
	for _, comp := range w.Spec.Components {
		b.Add(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "extra-" + comp}})
	}
	return nil
}

// funcRM is a ResourceManager over Widgets whose graph is the add function; it owns ConfigMaps,
// Secrets, Services, Deployments and the types in owned.
type funcRM struct {
	add   func(w *testapi.Widget, b *controller.Graph) error
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

func (rm funcRM) AddResources(_ context.Context, owner *testapi.Widget, b *controller.Graph) error {
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
