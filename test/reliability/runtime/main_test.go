// Package runtime_test checks what the kdag Controller does when its runtime fails it: the API
// server fails requests, the operator process dies in the middle of a reconcile, the leader
// dies. Issue 7, reliability items 1-3:
//
//   - TestAPIFaults_OwnersConvergeAndEveryFailureIsReported (faults_test.go): with 10% of the
//     manager's requests failing (500, 503, 429, 409, timeouts, resets, half of those after the
//     server did the work), 100 owners converge to Ready; every failed reconcile is visible in
//     the owner's Reconciling condition or a Warning event; no panic, no rewritten generated
//     secret; once the faults stop nothing is Stalled.
//   - TestRestart_MidReconcile_NothingRedoneNothingLost (restart_test.go): the manager dies
//     during a large reconcile; a new one converges every owner without deleting, recreating or
//     rewriting anything the first one made, and generated secrets keep their bytes.
//   - TestLeaderElection_FollowerTakesOverAfterLeaderDies (leader_test.go): of two managers
//     with leader election, only the leader reconciles; it dies mid-work without releasing
//     the Lease; the other takes the Lease over and finishes.
//
// Why envtest and the Widget owner, not the reference operator on the local kwok cluster: the
// properties are about the Controller's handling of API failures, process death and leader
// election, which a real kube-apiserver and etcd exercise fully. A Widget's graph (ConfigMaps,
// a generated create-only Secret, a Service) becomes Ready on envtest without any other
// controller, so a hundred owners reconcile in seconds on two cores, where a hundred Gitea apps
// (StatefulSets, Deployments and Jobs driven by kube-controller-manager and kwok) would take
// minutes. The reference operator's own restart behaviour is covered by test/e2e/gitea.
//
// One API server for the package (envtest.Main), a namespace per test; every manager is stopped
// before its test ends, and TestMain checks with goleak that nothing the tests started is still
// running. Run it with `make test-reliability`.
package runtime_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"net/http"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/controller"
	"github.com/kdag-dev/kdag/pkg/metrics"
	"github.com/kdag-dev/kdag/pkg/testing/envtest"
	"github.com/kdag-dev/kdag/pkg/testing/faults"
	"github.com/kdag-dev/kdag/pkg/testing/leak"
	"github.com/kdag-dev/kdag/pkg/testing/testapi"
)

// controllerName is the name of the Controller in every manager: a restarted or standby
// operator runs the same controller with the same field manager.
const controllerName = "widget"

// leaseName is the leader election Lease of managers with leader election on.
const leaseName = "kdag-reliability"

var (
	env    *envtest.Environment
	scheme = runtime.NewScheme()
)

func TestMain(m *testing.M) {
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(testapi.AddToScheme(scheme))
	// Each manager logs into its own recorder; controller-runtime's global logger is for what
	// runs outside a manager.
	ctrl.SetLogger(logr.Discard())
	os.Exit(leak.Check(func() int {
		return envtest.Main(m, &env, envtest.Options{CRDs: testapi.CRDs(), Scheme: scheme})
	}))
}

// appRM is the ResourceManager of the tests: for a Widget w,
//
//	ConfigMap w-config (spec.data)  ─┐
//	Secret w-credentials (generated, ├─> ConfigMap w-app (carries their content hash)
//	  create-only)                  ─┘
//	Service w
//	per spec.components entry c: Secret w-c-key (generated, create-only) ─> ConfigMap w-c
//
// Every node is Ready on envtest as soon as it is applied. Passwords are new random values on
// every call, as a generator's would be: only CreateOnly keeps them stable.
type appRM struct {
	// onBuild, when set, is called at the start of every AddResources.
	onBuild func(owner *testapi.Widget)
}

func (appRM) OwnedTypes() []client.Object {
	return []client.Object{&corev1.ConfigMap{}, &corev1.Secret{}, &corev1.Service{}}
}

func (rm appRM) AddResources(_ context.Context, w *testapi.Widget, b *controller.Graph) error {
	if rm.onBuild != nil {
		rm.onBuild(w)
	}
	cfg := b.Add(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: w.Name + "-config"}, Data: w.Spec.Data})
	creds := b.Add(&corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: w.Name + "-credentials"},
		StringData: map[string]string{"password": rand.Text()},
	}, controller.CreateOnly())
	b.Add(&corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: w.Name},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": w.Name},
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80}},
		},
	})
	b.Add(&corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: w.Name + "-app"},
		Data:       map[string]string{"config": w.Name + "-config", "credentials": w.Name + "-credentials"},
	}, controller.DependsOn(cfg, creds))
	for _, c := range w.Spec.Components {
		key := b.Add(&corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: w.Name + "-" + c + "-key"},
			StringData: map[string]string{"key": rand.Text()},
		}, controller.CreateOnly())
		b.Add(&corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: w.Name + "-" + c},
			Data:       map[string]string{"component": c},
		}, controller.DependsOn(key))
	}
	return nil
}

// nodesPerOwner is how many objects appRM makes for an owner with n components.
func nodesPerOwner(components int) int { return 4 + 2*components }

// managerOptions configure newManager and startManager.
type managerOptions struct {
	ns string
	// wraps wrap the manager's transport, innermost first. Default: none.
	wraps []wrapFunc
	// log records the manager's log. Default: discarded.
	log *logRecorder
	// rm is the ResourceManager. Default: appRM{}.
	rm controller.ResourceManager[*testapi.Widget]
	// maxConcurrent is MaxConcurrentReconciles. Default: 1.
	maxConcurrent int
	// maxParallelNodes is MaxParallelNodes. Default: the Controller's.
	maxParallelNodes int
	// leaderElection turns leader election on, with a Lease in ns, short timings and no release
	// on cancel, so that stopping the manager is a crash as far as the Lease is concerned.
	leaderElection bool
	// allowStartError accepts an error from mgr.Start ("leader election lost" after a crash).
	allowStartError bool
}

// wrapFunc wraps an http.RoundTripper, as rest.Config.Wrap takes it.
type wrapFunc = func(http.RoundTripper) http.RoundTripper

// wraps lists fs, innermost first.
func wraps(fs ...wrapFunc) []wrapFunc { return fs }

// accessReviewsPlain sends the start-up RBAC check's SelfSubjectAccessReviews (controller.Setup)
// through plain and every other request through faulty: the faults of these tests are injected
// into what the manager does once started.
type accessReviewsPlain struct{ plain, faulty http.RoundTripper }

func (a accessReviewsPlain) RoundTrip(req *http.Request) (*http.Response, error) {
	if strings.HasSuffix(req.URL.Path, "/selfsubjectaccessreviews") {
		return a.plain.RoundTrip(req)
	}
	return a.faulty.RoundTrip(req)
}

// runningManager is a manager of a test, stopped when the test ends at the latest.
type runningManager struct {
	mgr             ctrl.Manager
	registry        *prometheus.Registry // kdag_ metrics of this manager
	allowStartError bool
	cancel          context.CancelFunc
	done            chan struct{}
	once            sync.Once
}

// startManager starts a manager whose cache sees namespace o.ns only (kdag's objects there, by
// label) with the Controller "widget" over o.rm. The manager is stopped when the test ends, if
// not before.
func startManager(t *testing.T, o managerOptions) *runningManager {
	t.Helper()
	m := newManager(t, o)
	m.start(t)
	return m
}

// newManager is startManager without the start.
func newManager(t *testing.T, o managerOptions) *runningManager {
	t.Helper()
	cfg := rest.CopyConfig(env.Config)
	// Client-side rate limiting would make these tests about the limiter.
	cfg.QPS, cfg.Burst = 500, 1000
	if len(o.wraps) > 0 {
		cfg.Wrap(func(plain http.RoundTripper) http.RoundTripper {
			faulty := plain
			for _, w := range o.wraps {
				faulty = w(faulty)
			}
			return accessReviewsPlain{plain: plain, faulty: faulty}
		})
	}
	logger := logr.Discard()
	if o.log != nil {
		logger = o.log.logger()
	}
	opts := ctrl.Options{
		Scheme:  scheme,
		Logger:  logger,
		Metrics: metricsserver.Options{BindAddress: "0"},
		Cache: cache.Options{
			DefaultNamespaces: map[string]cache.Config{o.ns: {}},
			ByObject:          controller.CacheOptions(scheme, controller.For(controllerName, appRM{})).ByObject,
		},
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	}
	if o.leaderElection {
		opts.LeaderElection = true
		opts.LeaderElectionID = leaseName
		opts.LeaderElectionNamespace = o.ns
		opts.LeaseDuration = ptr.To(2 * time.Second)
		opts.RenewDeadline = ptr.To(1500 * time.Millisecond)
		opts.RetryPeriod = ptr.To(300 * time.Millisecond)
		opts.LeaderElectionReleaseOnCancel = false
	}
	mgr, err := ctrl.NewManager(cfg, opts)
	if err != nil {
		t.Fatalf("new manager: %v", err)
	}
	rm := o.rm
	if rm == nil {
		rm = appRM{}
	}
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	copts := []controller.Options{{MaxConcurrentReconciles: max(o.maxConcurrent, 1)}, {Metrics: m}}
	if o.maxParallelNodes > 0 {
		copts = append(copts, controller.Options{MaxParallelNodes: o.maxParallelNodes})
	}
	comp := controller.For(controllerName, rm, copts...)
	if err := controller.Setup(t.Context(), mgr, []controller.Component{comp}); err != nil {
		t.Fatalf("set the controller up: %v", err)
	}
	return &runningManager{mgr: mgr, registry: reg, allowStartError: o.allowStartError, done: make(chan struct{})}
}

// start starts the manager in a goroutine; the test's cleanup stops it.
func (r *runningManager) start(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() {
		defer close(r.done)
		if err := r.mgr.Start(ctx); err != nil && !r.allowStartError {
			t.Errorf("manager: %v", err)
		}
	}()
	t.Cleanup(r.stop)
}

// stop cancels the manager and waits until every runnable has returned.
func (r *runningManager) stop() {
	r.once.Do(func() {
		r.cancel()
		<-r.done
	})
}

// elected reports whether the manager holds the leader Lease (or runs without election).
func (r *runningManager) elected() bool {
	select {
	case <-r.mgr.Elected():
		return true
	default:
		return false
	}
}

// nodePanics returns the kdag_node_panics_total of the manager, summed over controllers.
func (r *runningManager) nodePanics(t *testing.T) float64 {
	t.Helper()
	families, err := r.registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, f := range families {
		if f.GetName() == metrics.Namespace+"_node_panics_total" {
			for _, m := range f.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

// createWidgets creates n Widgets named <prefix>-000... in ns with spec and returns their names.
func createWidgets(t *testing.T, ns, prefix string, n int, spec testapi.WidgetSpec) []string {
	t.Helper()
	names := make([]string, n)
	for i := range n {
		names[i] = fmt.Sprintf("%s-%03d", prefix, i)
		w := &testapi.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: names[i]}, Spec: *spec.DeepCopy()}
		if err := env.Client.Create(t.Context(), w); err != nil {
			t.Fatalf("create Widget %s: %v", names[i], err)
		}
	}
	return names
}

// notReady returns, for every Widget in ns, why it is not Ready for its current generation
// (Ready=True, Stalled absent, observedGeneration current), or nil when all of them are. It
// fails the test unless there are exactly want Widgets.
func notReady(ctx context.Context, ns string, want int) ([]string, error) {
	list := &testapi.WidgetList{}
	if err := env.Client.List(ctx, list, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	if len(list.Items) != want {
		return nil, fmt.Errorf("%d Widgets in %s, want %d", len(list.Items), ns, want)
	}
	var out []string
	for _, w := range list.Items {
		if why := whyNotReady(&w); why != "" {
			out = append(out, w.Name+": "+why)
		}
	}
	sort.Strings(out)
	return out, nil
}

// whyNotReady returns "" when w is Ready for its generation and not Stalled, or why not.
func whyNotReady(w *testapi.Widget) string {
	st := w.Status.Status
	ready := meta.FindStatusCondition(st.Conditions, kdagv1alpha1.ConditionReady)
	switch {
	case st.ObservedGeneration != w.Generation:
		return fmt.Sprintf("observedGeneration %d, generation %d", st.ObservedGeneration, w.Generation)
	case meta.IsStatusConditionTrue(st.Conditions, kdagv1alpha1.ConditionStalled):
		return "Stalled: " + meta.FindStatusCondition(st.Conditions, kdagv1alpha1.ConditionStalled).Message
	case ready == nil || ready.Status != metav1.ConditionTrue:
		return fmt.Sprintf("Ready condition %+v", ready)
	}
	return ""
}

// waitAllReady waits until every one of the want Widgets in ns is Ready for its generation and
// returns how long that took. It fails the test after timeout, listing the owners not Ready.
func waitAllReady(t *testing.T, ns string, want int, timeout time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	var last []string
	var lastErr error
	err := wait.PollUntilContextTimeout(t.Context(), 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		nr, err := notReady(ctx, ns, want)
		if ctx.Err() == nil {
			last, lastErr = nr, err
		}
		return err == nil && len(nr) == 0, nil
	})
	if err != nil {
		if len(last) > 5 {
			last = append(last[:5], fmt.Sprintf("... and %d more", len(last)-5))
		}
		t.Fatalf("Widgets in %s not all Ready within %s (error %v): %s", ns, timeout, lastErr, strings.Join(last, "; "))
	}
	return time.Since(start)
}

// recorder watches the objects of one list type in a namespace from the test's own client (no
// faults) and keeps every event, from before the first object exists until the test ends.
type recorder struct {
	mu     sync.Mutex
	events []watch.Event
}

// record starts a recorder of list's type in ns. The watch is re-opened from the last seen
// resourceVersion if the API server ends it; the recorder stops when the test ends.
func record(t *testing.T, ns string, list client.ObjectList) *recorder {
	t.Helper()
	wc, err := client.NewWithWatch(env.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	// The first watch starts now, so that no change made after record returns is missed.
	w, err := wc.Watch(ctx, list, client.InNamespace(ns))
	if err != nil {
		cancel()
		t.Fatalf("watch %T: %v", list, err)
	}
	r := &recorder{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		rv := ""
		for {
			for ev := range w.ResultChan() {
				if obj, ok := ev.Object.(client.Object); ok && ev.Type != watch.Error && ev.Type != watch.Bookmark {
					rv = obj.GetResourceVersion()
					r.mu.Lock()
					r.events = append(r.events, watch.Event{Type: ev.Type, Object: obj.DeepCopyObject()})
					r.mu.Unlock()
				}
			}
			w.Stop()
			for {
				if ctx.Err() != nil {
					return
				}
				w, err = wc.Watch(ctx, list, client.InNamespace(ns), &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: rv}})
				if err == nil {
					break
				}
				select {
				case <-ctx.Done():
					return
				case <-time.After(100 * time.Millisecond):
				}
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return r
}

// snapshot returns the events recorded so far.
func (r *recorder) snapshot() []watch.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]watch.Event(nil), r.events...)
}

// logRecorder keeps what a manager logs about failed reconciles and panics.
type logRecorder struct {
	mu       sync.Mutex
	failures []failure // kdag's "reconcile failed" lines
	panics   []string  // any line or error that mentions a panic
}

// failure is one failed reconcile as the Controller logs it.
type failure struct {
	owner string // namespace/name
	err   string
}

func (l *logRecorder) logger() logr.Logger { return logr.New(&logSink{rec: l}) }

func (l *logRecorder) add(msg string, err error, kv []any) {
	values := map[string]any{}
	for i := 0; i+1 < len(kv); i += 2 {
		if k, ok := kv[i].(string); ok {
			values[k] = kv[i+1]
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	text := msg
	if err != nil {
		text += ": " + err.Error()
	}
	if strings.Contains(strings.ToLower(text), "panic") {
		l.panics = append(l.panics, text)
	}
	if msg == "reconcile failed" {
		owner, _ := values["owner"].(string)
		e, _ := values["error"].(string)
		l.failures = append(l.failures, failure{owner: owner, err: e})
	}
}

func (l *logRecorder) snapshot() (failures []failure, panics []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]failure(nil), l.failures...), append([]string(nil), l.panics...)
}

// logSink is a logr.LogSink into a logRecorder. It keeps V(0) lines and errors only.
type logSink struct {
	rec *logRecorder
	kv  []any
}

func (s *logSink) Init(logr.RuntimeInfo)  {}
func (s *logSink) Enabled(level int) bool { return level == 0 }
func (s *logSink) Info(_ int, msg string, kv ...any) {
	s.rec.add(msg, nil, append(append([]any(nil), s.kv...), kv...))
}

func (s *logSink) Error(err error, msg string, kv ...any) {
	s.rec.add(msg, err, append(append([]any(nil), s.kv...), kv...))
}

func (s *logSink) WithValues(kv ...any) logr.LogSink {
	return &logSink{rec: s.rec, kv: append(append([]any(nil), s.kv...), kv...)}
}
func (s *logSink) WithName(string) logr.LogSink { return s }

// crash kills a manager the way a process dies: at its n-th write of an owned object (counted
// from arm; writes the API server refused do not count), that write and every request after it fail before reaching the API server, and
// the manager's context is canceled. What the manager wrote before stays; nothing after.
type crash struct {
	dead   *faults.Injector // fails every request once enabled
	writes atomic.Int64
	killed chan struct{}
	once   sync.Once

	mu      sync.Mutex
	after   int64 // 0: not armed
	cancel  func()
	refused []string // the owned writes the API server refused, not counted
}

// refusal describes a refused write's answer: its status code or transport error.
func refusal(resp *http.Response, err error) string {
	if err != nil {
		return err.Error()
	}
	return resp.Status
}

// refusals returns the answers of the refused owned writes, for a failure message.
func (c *crash) refusals() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.refused)
}

func newCrash() *crash {
	return &crash{
		dead:   faults.New(faults.Share(1), faults.Kinds(faults.ConnectionReset), faults.StartDisabled()),
		killed: make(chan struct{}),
	}
}

// wraps returns the transport wrappers to give the manager.
func (c *crash) wraps() []wrapFunc {
	return wraps(c.dead.Wrap, func(next http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			if !isOwnedWrite(req) {
				return next.RoundTrip(req)
			}
			c.mu.Lock()
			due := c.after > 0 && c.writes.Add(1) == c.after
			c.mu.Unlock()
			if due {
				c.kill()
			}
			resp, err := next.RoundTrip(req)
			if !due && (err != nil || resp.StatusCode >= 300) {
				// Refused (a conflict, the API server's flow control under load): nothing was
				// written, so it does not count toward the crash point.
				c.mu.Lock()
				c.writes.Add(-1)
				c.refused = append(c.refused, refusal(resp, err))
				c.mu.Unlock()
			}
			return resp, err
		})
	})
}

// arm makes the n-th owned write from now kill the manager through cancel.
func (c *crash) arm(n int64, cancel func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.writes.Store(0)
	c.after, c.cancel = n, cancel
}

func (c *crash) kill() {
	c.once.Do(func() {
		c.dead.Enable()
		c.mu.Lock()
		cancel := c.cancel
		c.mu.Unlock()
		cancel()
		close(c.killed)
	})
}

// wait waits until the manager was killed; it fails the test after timeout.
func (c *crash) wait(t *testing.T, timeout time.Duration) {
	t.Helper()
	select {
	case <-c.killed:
	case <-time.After(timeout):
		t.Fatalf("the manager made fewer than %d writes within %s: not killed", c.after, timeout)
	}
}

// isOwnedWrite reports whether req is the Controller's server-side apply of an owned object
// (not of an owner's status).
func isOwnedWrite(req *http.Request) bool {
	return req.Method == http.MethodPatch && req.URL.Query().Get("fieldManager") == "kdag-"+controllerName &&
		!strings.HasSuffix(req.URL.Path, "/status")
}

// roundTripFunc is an http.RoundTripper from a function.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// children returns kdag's objects in ns (ConfigMaps, Secrets, Services with the controller's
// label), keyed "Kind/name".
func children(t *testing.T, ns string) map[string]client.Object {
	t.Helper()
	out := map[string]client.Object{}
	sel := client.MatchingLabels{kdagv1alpha1.LabelController: controllerName}
	lists := map[string]client.ObjectList{"ConfigMap": &corev1.ConfigMapList{}, "Secret": &corev1.SecretList{}, "Service": &corev1.ServiceList{}}
	for kind, list := range lists {
		if err := env.Client.List(t.Context(), list, client.InNamespace(ns), sel); err != nil {
			t.Fatalf("list %s: %v", kind, err)
		}
		items, err := meta.ExtractList(list)
		if err != nil {
			t.Fatal(err)
		}
		for _, item := range items {
			obj := item.(client.Object)
			out[kind+"/"+obj.GetName()] = obj
		}
	}
	return out
}
