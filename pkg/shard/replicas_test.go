package shard

// Dynamic shards on a real API server: replicas of one operator (managers with their own IDs,
// in one process, sharing one envtest kube-apiserver) share ~30 Widgets, lose one replica and
// gain another, and no Widget is ever reconciled by two replicas at once.

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
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
	"github.com/kdag-dev/kdag/pkg/testing/poll"
	"github.com/kdag-dev/kdag/pkg/testing/running"
	"github.com/kdag-dev/kdag/pkg/testing/testapi"
)

// testLease is the member (and leader election) Lease duration of the replicas under test.
const testLease = 3 * time.Second

// activity records, per replica and per Widget, when the replica worked on the Widget: the start
// and end of each graph build (AddResources), the end of each write of the Widget's ConfigMap and
// status, and the start of its hand-over patch (the new replica may see the new label before
// the old one has its answer). A replica's span on a Widget runs from the first to the last of
// these; the spans of two replicas on one Widget must not overlap.
type activity struct {
	mu    sync.Mutex
	times map[string]map[string][]time.Time // replica → Widget → times
	held  map[string]chan struct{}          // Widget → closed when its graph builds may go on
	// holding receives the name of a held Widget when a replica's graph build of it waits.
	holding chan string
}

// hold makes every graph build of widget wait, from its start, until the returned release is
// called (by the test's end at the latest).
func (a *activity) hold(t *testing.T, widget string) (release func()) {
	a.mu.Lock()
	defer a.mu.Unlock()
	ch := make(chan struct{})
	a.held[widget] = ch
	var once sync.Once
	release = func() { once.Do(func() { close(ch) }) }
	t.Cleanup(release)
	return release
}

// wait waits while widget is held, telling holding that it does.
func (a *activity) wait(widget string) {
	a.mu.Lock()
	ch := a.held[widget]
	a.mu.Unlock()
	if ch == nil {
		return
	}
	select {
	case a.holding <- widget:
	default:
	}
	<-ch
}

func (a *activity) touch(replica, widget string) {
	now := time.Now()
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.times[replica] == nil {
		a.times[replica] = map[string][]time.Time{}
	}
	a.times[replica][widget] = append(a.times[replica][widget], now)
}

// span returns replica's first and last time on widget, and false when it never touched it.
func (a *activity) span(replica, widget string) (first, last time.Time, ok bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	ts := a.times[replica][widget]
	if len(ts) == 0 {
		return first, last, false
	}
	return slices.MinFunc(ts, time.Time.Compare), slices.MaxFunc(ts, time.Time.Compare), true
}

// recordingClient is a manager's client that records the replica's writes of Widgets and
// ConfigMaps in an activity. The assigner's patches (PartialObjectMetadata) are not recorded:
// they are not reconciles.
type recordingClient struct {
	client.Client
	replica string
	act     *activity
}

func (c *recordingClient) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
	err := c.Client.Apply(ctx, obj, opts...)
	if o, ok := obj.(interface{ GetKind() string }); ok && o.GetKind() == "ConfigMap" {
		if n, ok := obj.(interface{ GetName() string }); ok {
			c.act.touch(c.replica, strings.TrimSuffix(n.GetName(), "-config"))
		}
	}
	return err
}

func (c *recordingClient) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	if _, ok := obj.(*testapi.Widget); ok {
		c.act.touch(c.replica, obj.GetName()) // the hand-over: when it is sent
	}
	return c.Client.Patch(ctx, obj, patch, opts...)
}

func (c *recordingClient) Status() client.SubResourceWriter {
	return &recordingStatus{SubResourceWriter: c.Client.Status(), replica: c.replica, act: c.act}
}

type recordingStatus struct {
	client.SubResourceWriter
	replica string
	act     *activity
}

func (s *recordingStatus) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.SubResourceApplyOption) error {
	err := s.SubResourceWriter.Apply(ctx, obj, opts...)
	if n, ok := obj.(interface{ GetName() string }); ok {
		s.act.touch(s.replica, n.GetName())
	}
	return err
}

// widgetRM gives every Widget a ConfigMap "<name>-config", and takes a little while over it, so
// that two replicas reconciling one Widget at once would overlap.
type widgetRM struct {
	replica string
	act     *activity
}

func (widgetRM) OwnedTypes() []client.Object { return []client.Object{&corev1.ConfigMap{}} }

func (rm widgetRM) AddResources(_ context.Context, w *testapi.Widget, b *controller.Graph) error {
	rm.act.touch(rm.replica, w.Name)
	rm.act.wait(w.Name)
	time.Sleep(20 * time.Millisecond)
	b.Add(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: w.Name + "-config"}, Data: map[string]string{"k": "v"}})
	rm.act.touch(rm.replica, w.Name)
	return nil
}

// startReplica starts a replica of ID id in ns, as main does with --shards=auto: its Widget
// controller in shard id on every replica, its member Lease, and the assigner under leader
// election. It returns the function that stops it and waits until it has.
func startReplica(t *testing.T, env *envtest.Environment, ns, id string, act *activity) (stop func()) {
	t.Helper()
	comp := controller.For("widgets", widgetRM{replica: id, act: act}, controller.Options{OperatorVersion: "replica-" + id})
	layer := Options{Shards: "auto", ID: id, Namespace: ns, LeaseDuration: testLease}
	if err := layer.Complete(); err != nil {
		t.Fatal(err)
	}
	cacheOpts, err := SelectCache(controller.CacheOptions(scheme, comp), id)
	if err != nil {
		t.Fatal(err)
	}
	cacheOpts.DefaultNamespaces = map[string]cache.Config{ns: {}}
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme:                        scheme,
		Metrics:                       metricsserver.Options{BindAddress: "0"},
		Cache:                         cacheOpts,
		MapperProvider:                controller.MapperProvider,
		LeaderElection:                true,
		LeaderElectionID:              AssignerLeaderElectionID,
		LeaderElectionNamespace:       ns,
		LeaderElectionReleaseOnCancel: true,
		LeaseDuration:                 ptr.To(testLease),
		RenewDeadline:                 ptr.To(testLease * 2 / 3),
		RetryPeriod:                   ptr.To(testLease / 10),
		Controller:                    config.Controller{SkipNameValidation: ptr.To(true), NeedLeaderElection: ptr.To(false)},
		NewClient: func(cfg *rest.Config, opts client.Options) (client.Client, error) {
			c, err := client.New(cfg, opts)
			return &recordingClient{Client: c, replica: id, act: act}, err
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := metrics.New(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	opts := []controller.Options{layer.ControllerOptions(mgr), {Metrics: reg, WatchNamespaces: []string{ns}}}
	if err := controller.Setup(t.Context(), mgr, []controller.Component{comp}, opts...); err != nil {
		t.Fatal(err)
	}
	if err := Add(mgr, id, []controller.Component{comp}, WithNamespace(ns), WithLeaseDuration(testLease), WithWatchNamespaces(ns)); err != nil {
		t.Fatal(err)
	}
	return running.Manager(t, mgr)
}

// TestReplicas_ShareOwners: three replicas share 30 Widgets, each Widget labelled with the shard
// the Ring of live members gives it and reconciled (Ready, with that replica's status) by that
// replica only; a fourth replica joins and takes 15–35% of the Widgets, through the hand-over;
// one replica stops and its Widgets are relabelled for the others within two Lease durations and
// are Ready again; and throughout, while every Widget is touched (reconciled) again and again,
// no two replicas work on one Widget in overlapping intervals. The split is deterministic (a
// fixed namespace and fixed names): r4 takes 10 Widgets of 30, r1 holds 7 when it stops. No
// Widget returns to a replica that held it before (rendezvous hashing moves owners only to a
// member that joins and only from one that leaves), so each replica has one span per Widget.
func TestReplicas_ShareOwners(t *testing.T) {
	env := api.Env(t)
	// A fixed namespace: owners are hashed by namespace/name, so the split is the same on every
	// run. envtest never finishes deleting a namespace (it runs no namespace controller), so the
	// test empties it instead, and a second run (-count) reuses it.
	ns := "dynamic-shards"
	if err := env.Client.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, obj := range []client.Object{&testapi.Widget{}, &corev1.ConfigMap{}, &coordinationv1.Lease{}} {
			if err := env.Client.DeleteAllOf(context.Background(), obj, client.InNamespace(ns)); err != nil {
				t.Errorf("empty namespace %s of %T: %v", ns, obj, err)
			}
		}
	})
	act := &activity{times: map[string]map[string][]time.Time{}, held: map[string]chan struct{}{}, holding: make(chan string, 1)}
	stops := map[string]func(){}
	for _, id := range []string{"r1", "r2", "r3"} {
		stops[id] = startReplica(t, env, ns, id, act)
	}
	waitMembers(t, env, ns, "r1", "r2", "r3")

	names := make([]string, 30)
	for i := range names {
		names[i] = fmt.Sprintf("w-%02d", i)
		if err := env.Client.Create(t.Context(), &testapi.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: names[i]}}); err != nil {
			t.Fatal(err)
		}
	}
	three := NewRing("r1", "r2", "r3")
	waitReady(t, env, ns, names, three)
	for _, n := range names {
		var by []string
		for _, id := range []string{"r1", "r2", "r3"} {
			if _, _, ok := act.span(id, n); ok {
				by = append(by, id)
			}
		}
		if want := three.Owner(ns + "/" + n); !slices.Equal(by, []string{want}) {
			t.Errorf("Widget %s was reconciled by %v, want by %s only", n, by, want)
		}
	}

	// From here on, every Widget is reconciled again every second or so.
	tickCtx, stopTicking := context.WithCancel(t.Context())
	var ticking sync.WaitGroup
	ticking.Go(func() { touchAll(tickCtx, env.Client, ns, names) })
	defer func() { stopTicking(); ticking.Wait() }()

	// One Widget that moves to r4 is in the middle of a reconcile by its replica when r4 joins,
	// and stays there: r4 must not get it until that reconcile is over.
	four := NewRing("r1", "r2", "r3", "r4")
	var busy string
	for _, n := range names {
		if four.Owner(ns+"/"+n) == "r4" {
			busy = n
			break
		}
	}
	holder := three.Owner(ns + "/" + busy)
	release := act.hold(t, busy)
	defer release() // before the replicas stop: a held reconcile would hold up their stop
	touch(t.Context(), env.Client, ns, busy, "hold")
	select {
	case <-act.holding:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s did not start a reconcile of Widget %s", holder, busy)
	}
	stops["r4"] = startReplica(t, env, ns, "r4", act)
	poll.Until(t, fmt.Sprintf("Widget %s asked to move from %s to r4 (or moved)", busy, holder), 30*time.Second, func(ctx context.Context) string {
		w := &testapi.Widget{}
		if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: busy}, w); err != nil {
			return err.Error()
		}
		if w.Annotations[kdagv1alpha1.AnnotationShardNext] != "r4" && w.Labels[kdagv1alpha1.LabelShard] == holder {
			return fmt.Sprintf("annotations %v", w.Annotations)
		}
		return ""
	})
	time.Sleep(testLease) // time enough for a wrong move
	w := &testapi.Widget{}
	if err := env.Client.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: busy}, w); err != nil {
		t.Fatal(err)
	}
	if got := w.Labels[kdagv1alpha1.LabelShard]; got != holder {
		t.Errorf("Widget %s moved to %q while %s was reconciling it", busy, got, holder)
	}
	if _, _, ok := act.span("r4", busy); ok {
		t.Errorf("r4 reconciled Widget %s while %s was reconciling it", busy, holder)
	}
	release()
	waitReady(t, env, ns, names, four)
	taken := 0
	for _, n := range names {
		if _, _, ok := act.span("r4", n); ok {
			taken++
		}
	}
	if f := float64(taken) / float64(len(names)); f < 0.15 || f > 0.35 {
		t.Errorf("r4 took %d of %d Widgets (%.0f%%), want 15-35%%", taken, len(names), 100*f)
	}

	stops["r1"]() // returns once r1's manager has stopped
	rest := NewRing("r2", "r3", "r4")
	poll.Until(t, "the Widgets of r1 relabelled for r2, r3 and r4", 2*testLease, func(ctx context.Context) string {
		return labelled(ctx, env, ns, names, rest)
	})
	waitReady(t, env, ns, names, rest)
	stopTicking()
	ticking.Wait()

	for _, n := range names {
		type span struct {
			id          string
			first, last time.Time
		}
		var spans []span
		for _, id := range []string{"r1", "r2", "r3", "r4"} {
			if first, last, ok := act.span(id, n); ok {
				spans = append(spans, span{id, first, last})
			}
		}
		slices.SortFunc(spans, func(a, b span) int { return a.first.Compare(b.first) })
		for i := 1; i < len(spans); i++ {
			if prev, cur := spans[i-1], spans[i]; !cur.first.After(prev.last) {
				t.Errorf("Widget %s: %s worked on it until %s, and %s from %s: overlapping", n, prev.id,
					prev.last.Format(time.StampMicro), cur.id, cur.first.Format(time.StampMicro))
			}
		}
	}
}

// waitMembers waits until the member Leases of ids are live.
func waitMembers(t *testing.T, env *envtest.Environment, ns string, ids ...string) {
	t.Helper()
	poll.Until(t, fmt.Sprintf("member Leases of %v live", ids), 30*time.Second, func(ctx context.Context) string {
		for _, id := range ids {
			l := &coordinationv1.Lease{}
			if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "kdag-shard-" + id}, l); err != nil {
				return err.Error()
			}
			if !expiry(l).After(time.Now()) {
				return "Lease of " + id + " expired"
			}
		}
		return ""
	})
}

// labelled returns "" when every Widget of names is labelled with the shard ring gives it,
// annotated as assigned to it, with no hand-over pending; else what is not.
func labelled(ctx context.Context, env *envtest.Environment, ns string, names []string, ring Ring) string {
	// One list, not a read per Widget: the test client's rate limit (5 requests a second) would
	// otherwise take seconds of the time the assigner is given.
	list := &testapi.WidgetList{}
	if err := env.Client.List(ctx, list, client.InNamespace(ns)); err != nil {
		return err.Error()
	}
	byName := map[string]*testapi.Widget{}
	for i := range list.Items {
		byName[list.Items[i].Name] = &list.Items[i]
	}
	for _, n := range names {
		w, ok := byName[n]
		if !ok {
			return fmt.Sprintf("Widget %s: not found", n)
		}
		want := ring.Owner(ns + "/" + n)
		if got := w.Labels[kdagv1alpha1.LabelShard]; got != want || w.Annotations[kdagv1alpha1.AnnotationShardAssigned] != want {
			return fmt.Sprintf("Widget %s: shard %q (assigned %q), want %q", n, got, w.Annotations[kdagv1alpha1.AnnotationShardAssigned], want)
		}
		if next, ok := w.Annotations[kdagv1alpha1.AnnotationShardNext]; ok {
			return fmt.Sprintf("Widget %s: hand-over to %s pending", n, next)
		}
	}
	return ""
}

// waitReady waits until every Widget of names is labelled as ring says (labelled) and Ready with
// the status its replica writes.
func waitReady(t *testing.T, env *envtest.Environment, ns string, names []string, ring Ring) {
	t.Helper()
	poll.Until(t, fmt.Sprintf("Widgets in the shards of %v, Ready", ring.Members()), 30*time.Second, func(ctx context.Context) string {
		if msg := labelled(ctx, env, ns, names, ring); msg != "" {
			return msg
		}
		for _, n := range names {
			w := &testapi.Widget{}
			if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: n}, w); err != nil {
				return err.Error()
			}
			want := ring.Owner(ns + "/" + n)
			if !meta.IsStatusConditionTrue(w.Status.Conditions, kdagv1alpha1.ConditionReady) || w.Status.OperatorVersion != "replica-"+want ||
				w.Status.ObservedGeneration != w.Generation {
				return fmt.Sprintf("Widget %s: not Ready from %s: %+v", n, want, w.Status)
			}
		}
		return ""
	})
}

// touchAll touches one Widget of names every 40 ms, round robin, until ctx is done, so that each
// is reconciled again every 1.2 s (with 30 Widgets) while owners move.
func touchAll(ctx context.Context, c client.Client, ns string, names []string) {
	tick := time.NewTicker(40 * time.Millisecond)
	defer tick.Stop()
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		touch(ctx, c, ns, names[i%len(names)], fmt.Sprint(i))
	}
}

// touch sets the annotation test.kdag.dev/tick of Widget name to value, which makes its replica
// reconcile it. The patch has no resourceVersion: it never fails for a concurrent write.
func touch(ctx context.Context, c client.Client, ns, name, value string) {
	w := &testapi.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	patch := fmt.Sprintf(`{"metadata":{"annotations":{"test.kdag.dev/tick":%q}}}`, value)
	_ = c.Patch(ctx, w, client.RawPatch(types.MergePatchType, []byte(patch)))
}
