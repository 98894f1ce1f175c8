package controller_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/controller"
	"github.com/kdag-dev/kdag/pkg/testing/faults"
	"github.com/kdag-dev/kdag/pkg/testing/poll"
	"github.com/kdag-dev/kdag/pkg/testing/testapi"
)

// TestStatus_NotWrittenAgainWhileTheCacheCatchesUp: a reconcile that meets a cached owner older
// than the status the last reconcile wrote (its watch event not delivered yet) writes that same
// status no second time, while a status that did change since is still written; once the
// cache holds the writes, the owner is unchanged and costs no write. The flake it comes from:
// pkg/controllertest's TestStepped_ReconcilesOnlyWhenAsked, whose third reconcile wrote the
// status again when it ran before the second's write reached the cache.
func TestStatus_NotWrittenAgainWhileTheCacheCatchesUp(t *testing.T) {
	gate := newWatchGate("widgets")
	f := startFixture(t, fixtureConfig{wraps: []func(http.RoundTripper) http.RoundTripper{gate.wrap}}, widgetRM{})
	t.Cleanup(gate.release) // before the manager stops: its informers read to the end
	f.widget("app", testapi.WidgetSpec{MaxReplicas: 3})
	f.settle("app")
	if ready := condition(f.status("app"), kdagv1alpha1.ConditionReady); ready == nil || ready.Status != metav1.ConditionFalse {
		t.Fatalf("Ready %+v while the Deployment is not available, want False", ready)
	}
	f.waitCachedVersion(&testapi.Widget{}, "app", f.get(&testapi.Widget{}, "app").GetResourceVersion())

	gate.hold()
	cachedRV := f.cachedVersion("app")
	step := func(what string, wantStatusWrite bool, wantReady metav1.ConditionStatus) {
		t.Helper()
		f.calls.Reset()
		if err := f.reconcile("app"); err != nil {
			t.Fatalf("%s: reconcile: %v", what, err)
		}
		if writes := f.objectWrites(); wantStatusWrite != containsWrite(writes, "/widgets/app/status") ||
			(!wantStatusWrite && len(writes) != 0) {
			t.Errorf("%s: the reconcile wrote %q; want the Widget's status written: %v, and nothing else", what, writes, wantStatusWrite)
		}
		if ready := condition(f.status("app"), kdagv1alpha1.ConditionReady); ready == nil || ready.Status != wantReady {
			t.Errorf("%s: Ready %+v, want %s", what, ready, wantReady)
		}
	}
	held := func() {
		t.Helper()
		if got := f.cachedVersion("app"); got != cachedRV {
			t.Fatalf("the cache's Widget moved from resourceVersion %s to %s while its watch was held: the test tests nothing", cachedRV, got)
		}
	}

	f.markDeploymentAvailable("app")
	step("the Deployment available", true, metav1.ConditionTrue)
	held()
	step("nothing to do, the cache behind the status write", false, metav1.ConditionTrue)

	// A change since the write is written, the cache behind or not: the Deployment's new
	// generation is not observed yet (a foreign field, which kdag leaves alone).
	d := f.foreignUpdate(&appsv1.Deployment{}, "app", func(o client.Object) { o.(*appsv1.Deployment).Spec.MinReadySeconds = 5 })
	f.waitCachedVersion(&appsv1.Deployment{}, "app", d.GetResourceVersion())
	step("the Deployment rolling out again, the cache behind the status write", true, metav1.ConditionFalse)
	held()

	if n := controller.WrittenStatuses(f.Reconciler(&testapi.Widget{})); n != 1 {
		t.Errorf("the reconciler holds %d records of status writes while the cache is behind the Widget's, want 1", n)
	}

	gate.release()
	f.waitCachedVersion(&testapi.Widget{}, "app", f.get(&testapi.Widget{}, "app").GetResourceVersion())
	// The record of the last write goes once the cache holds the write: a settled owner's
	// status is not kept twice for as long as the process runs (BenchmarkScale's peak RSS).
	poll.True(t, "the record of the Widget's status write dropped once the cache holds it", waitTimeout, func(context.Context) bool {
		return controller.WrittenStatuses(f.Reconciler(&testapi.Widget{})) == 0
	})
	step("nothing to do, the cache caught up", false, metav1.ConditionFalse)
}

// TestStatus_NotWrittenAgainWhenTheCacheCatchesUpMidReconcile: a reconcile reads its owner from
// a cache that has not shown the last status write yet; before it compares statuses, the cache
// catches up and the record of that write is dropped. The reconcile compares with the cache as it
// is then, not with its older snapshot, and writes nothing. (Comparing with the snapshot wrote
// the same status again: BenchmarkReconcileTracing's no-op saw it, 3 runs of 9.)
func TestStatus_NotWrittenAgainWhenTheCacheCatchesUpMidReconcile(t *testing.T) {
	gate := newWatchGate("widgets")
	rm := pausingRM{pause: &atomic.Bool{}, reached: make(chan struct{}), resume: make(chan struct{})}
	f := startFixture(t, fixtureConfig{wraps: []func(http.RoundTripper) http.RoundTripper{gate.wrap}}, rm)
	t.Cleanup(gate.release)
	f.widget("app", testapi.WidgetSpec{MaxReplicas: 3})
	f.settle("app")
	f.waitCachedVersion(&testapi.Widget{}, "app", f.get(&testapi.Widget{}, "app").GetResourceVersion())
	rec := f.Reconciler(&testapi.Widget{})

	gate.hold()
	f.markDeploymentAvailable("app")
	if err := f.reconcile("app"); err != nil {
		t.Fatal(err)
	}
	if n := controller.WrittenStatuses(rec); n != 1 {
		t.Fatalf("the reconciler holds %d records of status writes after writing Ready with the watch held, want 1", n)
	}

	rm.pause.Store(true)
	done := make(chan error, 1)
	go func() { done <- f.reconcile("app") }()
	<-rm.reached // the reconcile has read the Widget from the cache, before the status write
	rm.pause.Store(false)
	gate.release()
	f.waitCachedVersion(&testapi.Widget{}, "app", f.get(&testapi.Widget{}, "app").GetResourceVersion())
	poll.True(t, "the record of the status write dropped once the cache holds it", waitTimeout, func(context.Context) bool {
		return controller.WrittenStatuses(rec) == 0
	})
	f.calls.Reset()
	close(rm.resume)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if writes := f.objectWrites(); len(writes) != 0 {
		t.Errorf("the reconcile that read the Widget before the cache caught up wrote %q, want nothing: the status is unchanged", writes)
	}
}

// pausingRM is widgetRM whose AddResources, while pause is set, tells reached and waits for
// resume: a reconcile stops there, after it read its owner from the cache.
type pausingRM struct {
	widgetRM
	pause           *atomic.Bool
	reached, resume chan struct{}
}

func (rm pausingRM) AddResources(ctx context.Context, w *testapi.Widget, b *controller.Graph) error {
	if rm.pause.Load() {
		rm.reached <- struct{}{}
		<-rm.resume
	}
	return rm.widgetRM.AddResources(ctx, w, b)
}

// cachedVersion returns the resourceVersion of the Widget name in the manager's cache.
func (f *fixture) cachedVersion(name string) string {
	f.t.Helper()
	w := &testapi.Widget{}
	if err := f.cached(w, name); err != nil {
		f.t.Fatalf("Widget %s in the cache: %v", name, err)
	}
	return w.ResourceVersion
}

// containsWrite reports whether writes holds a write ("VERB path") whose path ends in path.
func containsWrite(writes []string, path string) bool {
	for _, w := range writes {
		if strings.HasSuffix(w, path) {
			return true
		}
	}
	return false
}

// watchGate holds the watch events of one resource: while held, what a watch of it reads is
// handed to the client only once the gate is released, so the client's cache stays at what it
// held before, as a slow watch would.
type watchGate struct {
	resource string
	mu       sync.Mutex
	open     chan struct{} // closed while events pass
}

func newWatchGate(resource string) *watchGate {
	g := &watchGate{resource: resource, open: make(chan struct{})}
	close(g.open)
	return g
}

// hold stops the events from now on; release lets them and the held ones through.
func (g *watchGate) hold() {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.open:
		g.open = make(chan struct{})
	default:
	}
}

func (g *watchGate) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.open:
	default:
		close(g.open)
	}
}

func (g *watchGate) opened() <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.open
}

// wrap is a rest.Config's WrapTransport: it gates the bodies of the resource's watches.
func (g *watchGate) wrap(next http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		resp, err := next.RoundTrip(req)
		if err == nil && faults.IsWatch(req) && strings.HasSuffix(req.URL.Path, "/"+g.resource) {
			resp.Body = &gatedBody{ReadCloser: resp.Body, gate: g, closed: make(chan struct{})}
		}
		return resp, err
	})
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// gatedBody hands what it read to its reader only while its gate is open. It waits after the
// read, not before: a read that began while the gate was open returns what arrives after hold
// only once the gate opens again.
type gatedBody struct {
	io.ReadCloser
	gate      *watchGate
	closeOnce sync.Once
	closed    chan struct{}
}

func (b *gatedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	select {
	case <-b.gate.opened():
		return n, err
	case <-b.closed:
		return 0, io.ErrClosedPipe
	}
}

func (b *gatedBody) Close() error {
	b.closeOnce.Do(func() { close(b.closed) })
	return b.ReadCloser.Close()
}
