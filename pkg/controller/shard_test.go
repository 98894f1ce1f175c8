package controller_test

// Tests of static shards (issue 17) as a layer over this package (package shard's cache selection,
// owner filter and hand-over): the cache options, and, on envtest, two managers in one process (shard "a" and unsharded) that
// each reconcile only their own owners, and an owner moving between them with its objects.

import (
	"context"
	"crypto/rand"
	"fmt"
	"maps"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	ctrl "sigs.k8s.io/controller-runtime"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/controller"
	"github.com/kdag-dev/kdag/pkg/metrics"
	"github.com/kdag-dev/kdag/pkg/revision"
	"github.com/kdag-dev/kdag/pkg/shard"
	"github.com/kdag-dev/kdag/pkg/testing/poll"
	"github.com/kdag-dev/kdag/pkg/testing/running"
	"github.com/kdag-dev/kdag/pkg/testing/testapi"
)

// TestCacheOptions_SelectsShard: a manager's cache holds its shard's owners, child owners and
// objects (kdag.dev/shard=NAME), an unsharded manager's those without the label; owned types
// keep their kdag.dev/controller selection besides. The owners' revisions are kdag's whatever
// the shard: they carry no shard label.
func TestCacheOptions_SelectsShard(t *testing.T) {
	for _, tc := range []struct {
		shard, want string
	}{
		{"", kdagv1alpha1.LabelShard + " !"},
		{"a", kdagv1alpha1.LabelShard + " = [a]"},
	} {
		t.Run(fmt.Sprintf("shard %q", tc.shard), func(t *testing.T) {
			// "widgets" owns ConfigMaps; "parents" reconciles Services (an owner type nothing
			// owns) and owns Widgets, which "widgets" reconciles (a child owner).
			parent := controller.For("parents", serviceOwnerRM{owned: &testapi.Widget{}})
			opts, err := shard.SelectCache(controller.CacheOptions(scheme, controller.For("widgets", funcRM{add: nil}), parent), tc.shard)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range []struct {
				obj        client.Object
				controller bool // selected by kdag.dev/controller too
				unsharded  bool // not narrowed to the shard
			}{
				{obj: &corev1.ConfigMap{}, controller: true},
				{obj: &appsv1.Deployment{}, controller: true},
				{obj: &testapi.Widget{}},
				{obj: &corev1.Service{}},
				{obj: &appsv1.ControllerRevision{}, controller: true, unsharded: true},
			} {
				var sel labels.Selector
				for o, by := range opts.ByObject {
					if sameType(o, c.obj) {
						sel = by.Label
					}
				}
				if sel == nil {
					t.Errorf("%T: no label selector, want %s", c.obj, tc.want)
					continue
				}
				if got := selects(sel, tc.want); got == c.unsharded {
					t.Errorf("%T: selector %q has %s: %v, want %v", c.obj, sel, tc.want, got, !c.unsharded)
				}
				if got := selects(sel, kdagv1alpha1.LabelController+" exists"); got != c.controller {
					t.Errorf("%T: selector %q selects kdag.dev/controller: %v, want %v", c.obj, sel, got, c.controller)
				}
			}
		})
	}
}

// serviceOwnerRM reconciles Services and owns the type of owned (a ResourceManager whose owner
// type no other test component has).
type serviceOwnerRM struct{ owned client.Object }

func (rm serviceOwnerRM) OwnedTypes() []client.Object { return []client.Object{rm.owned} }

func (serviceOwnerRM) AddResources(context.Context, *corev1.Service, *controller.Graph) error {
	return nil
}

// shardManager is a started manager running the Widget controller of one shard ("" none),
// as one operator process of a sharded deployment would: its cache from controller.CacheOptions.
type shardManager struct {
	shard   string
	version string // the operator version it writes into its owners' status
	cache   crcache.Cache
	// seen holds the names of the Widgets whose graph it built (types.NamespacedName → true).
	seen *sync.Map
}

// startShard starts a manager of shard watching namespace ns, with the Widget controller named
// name: every Widget gets a ConfigMap, a create-only Secret (a generated password) and, unless
// its name ends in "-child", a child Widget "<name>-child", which this controller reconciles too.
func startShard(t *testing.T, ns, name, shardName string) *shardManager {
	t.Helper()
	m := &shardManager{shard: shardName, version: "shard-" + shardName, seen: &sync.Map{}}
	rm := funcRM{add: func(w *testapi.Widget, b *controller.Graph) error {
		m.seen.Store(client.ObjectKeyFromObject(w), true)
		b.Add(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: w.Name + "-config"}, Data: map[string]string{"k": "v"}})
		b.Add(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: w.Name + "-key"}, StringData: map[string]string{"password": rand.Text()}}, controller.CreateOnly())
		// Objects whose policy writes less than an apply: drift reported, a field ignored, and
		// one a user keeps (the move test annotates it): a move relabels them all the same.
		b.Add(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: w.Name + "-reported"}, Data: map[string]string{"k": "v"}}, controller.OnDrift(controller.DriftReport))
		b.Add(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: w.Name + "-ignored"}, Data: map[string]string{"k": "v"}}, controller.IgnoreFields("data.k"))
		b.Add(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: w.Name + "-userkept"}, Data: map[string]string{"k": "v"}})
		// A node whose work is done once the owner was Ready (as a migration Job recorded as
		// succeeded): Finished, never created again, yet moved with its owner.
		var finished []controller.NodeOption
		if meta.IsStatusConditionTrue(w.Status.Conditions, kdagv1alpha1.ConditionReady) {
			finished = append(finished, controller.Finished())
		}
		b.Add(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: w.Name + "-finished"}, Data: map[string]string{"k": "v"}}, finished...)
		if !strings.HasSuffix(w.Name, "-child") {
			b.Add(&testapi.Widget{ObjectMeta: metav1.ObjectMeta{Name: w.Name + "-child"}, Spec: testapi.WidgetSpec{MaxReplicas: 1}})
		}
		return nil
	}}.owning(&testapi.Widget{})
	comp := controller.For(name, rm, controller.Options{OperatorVersion: m.version})
	layer := shard.Options{Shard: shardName}
	if err := layer.Complete(); err != nil {
		t.Fatal(err)
	}
	cacheOpts, err := shard.SelectCache(controller.CacheOptions(scheme, comp), shardName)
	if err != nil {
		t.Fatal(err)
	}
	cacheOpts.DefaultNamespaces = map[string]crcache.Config{ns: {}}
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme:         scheme,
		Metrics:        metricsserver.Options{BindAddress: "0"},
		Cache:          cacheOpts,
		MapperProvider: controller.MapperProvider,
		Controller:     skipNameValidation(),
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
	running.Manager(t, mgr)
	if !mgr.GetCache().WaitForCacheSync(t.Context()) {
		t.Fatal("cache did not sync")
	}
	m.cache = mgr.GetCache()
	return m
}

// shardObjects are the objects kdag applies for the Widget name: its own, its child Widget's, and
// that child's own ones.
func shardObjects(name string) []client.Object {
	return []client.Object{
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name + "-config"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name + "-key"}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name + "-reported"}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name + "-ignored"}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name + "-userkept"}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name + "-finished"}},
		&testapi.Widget{ObjectMeta: metav1.ObjectMeta{Name: name + "-child"}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name + "-child-config"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name + "-child-key"}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name + "-child-reported"}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name + "-child-ignored"}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name + "-child-finished"}},
	}
}

// waitSharded waits until the Widget name in ns is Ready with the status m writes, and every
// object of shardObjects carries m's shard label (none for the unsharded manager).
func waitSharded(t *testing.T, ns, name string, m *shardManager) {
	t.Helper()
	want := ""
	if m.shard != "" {
		want = "=" + m.shard
	}
	poll.Until(t, fmt.Sprintf("Widget %s reconciled by the manager of shard %q, its objects labelled so", name, m.shard), 2*waitTimeout,
		func(ctx context.Context) string {
			for _, n := range []string{name, name + "-child"} {
				w := &testapi.Widget{}
				if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: n}, w); err != nil {
					return err.Error()
				}
				if !meta.IsStatusConditionTrue(w.Status.Conditions, kdagv1alpha1.ConditionReady) || w.Status.OperatorVersion != m.version ||
					w.Status.ObservedGeneration != w.Generation {
					return fmt.Sprintf("Widget %s: not Ready with status from %s: %+v", n, m.version, w.Status)
				}
			}
			for _, obj := range shardObjects(name) {
				if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: obj.GetName()}, obj); err != nil {
					return err.Error()
				}
				if got := shardLabel(obj); got != want {
					return fmt.Sprintf("%T %s: shard label %q, want %q", obj, obj.GetName(), got, want)
				}
			}
			return ""
		})
}

// TestShards_EachManagerReconcilesItsOwners: of two managers, shard "a" and unsharded, the
// first reconciles only owners labelled kdag.dev/shard=a and the second only unlabelled ones;
// the objects of each owner, its child owner's included, carry its shard label; an owner of a
// shard no manager runs is reconciled by neither.
func TestShards_EachManagerReconcilesItsOwners(t *testing.T) {
	ns := env.Namespace(t)
	name := "widget-" + ns
	a := startShard(t, ns, name, "a")
	none := startShard(t, ns, name, "")
	create := func(owner, shard string) {
		w := &testapi.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: owner}}
		if shard != "" {
			w.Labels = map[string]string{kdagv1alpha1.LabelShard: shard}
		}
		if err := env.Client.Create(t.Context(), w); err != nil {
			t.Fatal(err)
		}
	}
	create("orphan", "b") // first: its events reach the caches before the others'
	for _, tc := range []struct {
		name      string
		owner     string
		shard     string
		by, notBy *shardManager
	}{
		{name: "labelled a: the manager of shard a", owner: "in-a", shard: "a", by: a, notBy: none},
		{name: "unlabelled: the unsharded manager", owner: "plain", by: none, notBy: a},
	} {
		t.Run(tc.name, func(t *testing.T) {
			create(tc.owner, tc.shard)
			waitSharded(t, ns, tc.owner, tc.by)
			for _, n := range []string{tc.owner, tc.owner + "-child"} {
				if _, ok := tc.notBy.seen.Load(types.NamespacedName{Namespace: ns, Name: n}); ok {
					t.Errorf("the manager of shard %q built the graph of Widget %s too", tc.notBy.shard, n)
				}
				if err := tc.notBy.cache.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: n}, &testapi.Widget{}); !apierrors.IsNotFound(err) {
					t.Errorf("the cache of the manager of shard %q holds Widget %s (err %v), want NotFound", tc.notBy.shard, n, err)
				}
			}
		})
	}
	for _, m := range []*shardManager{a, none} {
		if _, ok := m.seen.Load(types.NamespacedName{Namespace: ns, Name: "orphan"}); ok {
			t.Errorf("the manager of shard %q built the graph of Widget orphan, labelled shard b", m.shard)
		}
	}
	orphan := &testapi.Widget{}
	if err := env.Client.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: "orphan"}, orphan); err != nil {
		t.Fatal(err)
	}
	if len(orphan.Status.Conditions) > 0 || len(orphan.Finalizers) > 0 {
		t.Errorf("Widget orphan of shard b was written to: status %+v, finalizers %v", orphan.Status, orphan.Finalizers)
	}
}

// TestShards_MovingAnOwnerKeepsItsObjects: relabelling an owner moves it to the other manager,
// which relabels its objects (a create-only Secret too, its password kept; a Finished node's,
// which the new shard's cache does not hold and kdag never creates: found by the crash
// explorer, test/crash TestGitea_ShardMove, where the finished migration Job stayed in the old
// shard) and its child owner's;
// nothing is deleted or re-created (same UIDs), although the old manager's cache sees them all
// go.
func TestShards_MovingAnOwnerKeepsItsObjects(t *testing.T) {
	ns := env.Namespace(t)
	name := "widget-" + ns
	managers := map[string]*shardManager{"a": startShard(t, ns, name, "a"), "": startShard(t, ns, name, "")}
	for _, tc := range []struct {
		name, owner, from, to string
	}{
		{"unsharded to a", "up", "", "a"},
		{"a to unsharded", "down", "a", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// One revision kept: the move must number on from the old shard's last one and prune
			// it, although the first is long gone.
			w := &testapi.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: tc.owner,
				Annotations: map[string]string{revision.AnnotationHistoryLimit: "1"}}}
			if tc.from != "" {
				w.Labels = map[string]string{kdagv1alpha1.LabelShard: tc.from}
			}
			if err := env.Client.Create(t.Context(), w); err != nil {
				t.Fatal(err)
			}
			waitSharded(t, ns, tc.owner, managers[tc.from])
			// A ConfigMap deleted by someone: kdag creates it again and records revision 2, and
			// prunes revision 1 (the history limit): the new shard must not number from 1 again.
			if err := env.Client.Delete(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: tc.owner + "-config"}}); err != nil {
				t.Fatal(err)
			}
			poll.True(t, "revision 2 or later of Widget "+tc.owner+", the first pruned", waitTimeout, func(context.Context) bool {
				return lastRevision(t, ns, w) >= 2
			})
			uids, passwords := map[string]types.UID{}, map[string]string{}
			for _, obj := range append(shardObjects(tc.owner), w) {
				obj.SetNamespace(ns)
				if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(obj), obj); err != nil {
					t.Fatal(err)
				}
				uids[fmt.Sprintf("%T %s", obj, obj.GetName())] = obj.GetUID()
				if s, ok := obj.(*corev1.Secret); ok {
					passwords[s.Name] = string(s.Data["password"])
				}
			}

			// A user keeps one object; kdag drops its owner reference. From then on no write may
			// give it one back, not even for the one reconcile after the move before the new
			// shard's cache holds it.
			kept := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: tc.owner + "-userkept"}}
			if err := env.Client.Patch(t.Context(), kept, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"kdag.dev/keep":"true"}}}`))); err != nil {
				t.Fatal(err)
			}
			poll.True(t, "the kept ConfigMap loses its owner reference", waitTimeout, func(ctx context.Context) bool {
				return env.Client.Get(ctx, client.ObjectKeyFromObject(kept), kept) == nil && len(kept.OwnerReferences) == 0
			})
			regained := watchOwnerReferences(t, ns, kept.Name, kept.ResourceVersion)

			if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(w), w); err != nil {
				t.Fatal(err)
			}
			last := lastRevision(t, ns, w)
			patch := client.MergeFrom(w.DeepCopy())
			lbls := maps.Clone(w.Labels)
			if lbls == nil {
				lbls = map[string]string{}
			}
			if tc.to == "" {
				delete(lbls, kdagv1alpha1.LabelShard)
			} else {
				lbls[kdagv1alpha1.LabelShard] = tc.to
			}
			w.Labels = lbls
			if err := env.Client.Patch(t.Context(), w, patch); err != nil {
				t.Fatal(err)
			}
			waitSharded(t, ns, tc.owner, managers[tc.to])
			// The move's writes (the objects relabelled) are revision last+1 or later, recorded by
			// the new shard, which sees and prunes the old shard's revisions: one history.
			poll.Until(t, "the revisions of Widget "+tc.owner+" numbered on in shard "+tc.to, waitTimeout, func(ctx context.Context) string {
				return revisionsAfter(ctx, ns, w, last, 1)
			})

			for _, obj := range append(shardObjects(tc.owner), &testapi.Widget{ObjectMeta: metav1.ObjectMeta{Name: tc.owner}}) {
				obj.SetNamespace(ns)
				if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(obj), obj); err != nil {
					t.Fatal(err)
				}
				key := fmt.Sprintf("%T %s", obj, obj.GetName())
				if obj.GetUID() != uids[key] || obj.GetDeletionTimestamp() != nil {
					t.Errorf("%s: UID %s (deleting %v), want %s: moving the owner re-created or deleted it", key, obj.GetUID(), obj.GetDeletionTimestamp(), uids[key])
				}
				if s, ok := obj.(*corev1.Secret); ok && string(s.Data["password"]) != passwords[s.Name] {
					t.Errorf("Secret %s: the generated password changed with the move", s.Name)
				}
			}
			if got := regained(); got != "" {
				t.Errorf("the user-kept ConfigMap got an owner reference back during the move: %s", got)
			}
			for _, n := range []string{tc.owner, tc.owner + "-child"} {
				moved := &testapi.Widget{}
				if err := env.Client.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: n}, moved); err != nil {
					t.Fatal(err)
				}
				if c := meta.FindStatusCondition(moved.Status.Conditions, kdagv1alpha1.ConditionDrifted); c != nil && c.Status == metav1.ConditionTrue {
					t.Errorf("Widget %s: Drifted=True after the move (%s): kdag's own shard label is no drift", n, c.Message)
				}
			}
			old := managers[tc.from]
			for _, n := range []string{tc.owner, tc.owner + "-child"} {
				poll.True(t, fmt.Sprintf("Widget %s gone from the cache of the manager of shard %q", n, old.shard), waitTimeout, func(ctx context.Context) bool {
					return apierrors.IsNotFound(old.cache.Get(ctx, types.NamespacedName{Namespace: ns, Name: n}, &testapi.Widget{}))
				})
			}
		})
	}
}

// TestShards_HandOver: an owner of shard a annotated kdag.dev/shard-next=b (dynamic shards: the
// assigner asks shard a to let it go) is handed over by a without building its graph: a relabels
// it b, records the assignment and removes the request, and b reconciles it. A request naming the
// owner's own shard, or an invalid one, is no request: a reconciles the owner.
func TestShards_HandOver(t *testing.T) {
	ns := env.Namespace(t)
	name := "widget-" + ns
	managers := map[string]*shardManager{"a": startShard(t, ns, name, "a"), "b": startShard(t, ns, name, "b")}
	for _, tc := range []struct {
		name, owner, next string
		to                string // the shard that reconciles the owner
	}{
		{"asked to move to b: handed over", "moving", "b", "b"},
		{"asked to stay in a: reconciled by a", "staying", "a", "a"},
		{"asked to move to an invalid shard: reconciled by a", "invalid", "B_1", "a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &testapi.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: tc.owner,
				Labels:      map[string]string{kdagv1alpha1.LabelShard: "a"},
				Annotations: map[string]string{kdagv1alpha1.AnnotationShardAssigned: "a", kdagv1alpha1.AnnotationShardNext: tc.next}}}
			if err := env.Client.Create(t.Context(), w); err != nil {
				t.Fatal(err)
			}
			waitSharded(t, ns, tc.owner, managers[tc.to])
			// The owner's revisions carry no shard label, whichever shard recorded them.
			poll.Until(t, "the revisions of Widget "+tc.owner, waitTimeout, func(ctx context.Context) string {
				return revisionsAfter(ctx, ns, w, 0, revision.DefaultHistoryLimit)
			})
			if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(w), w); err != nil {
				t.Fatal(err)
			}
			if tc.to == "b" {
				if w.Labels[kdagv1alpha1.LabelShard] != "b" || w.Annotations[kdagv1alpha1.AnnotationShardAssigned] != "b" {
					t.Errorf("handed over: labels %v, annotations %v; want shard b, assigned b", w.Labels, w.Annotations)
				}
				if _, ok := w.Annotations[kdagv1alpha1.AnnotationShardNext]; ok {
					t.Errorf("handed over, the request %s stays: %v", kdagv1alpha1.AnnotationShardNext, w.Annotations)
				}
				if _, ok := managers["a"].seen.Load(client.ObjectKeyFromObject(w)); ok {
					t.Errorf("shard a built the graph of Widget %s, which it was asked to hand over", tc.owner)
				}
			}
		})
	}
}

// watchOwnerReferences watches the ConfigMap name in ns from resourceVersion rv on and returns a
// function that stops the watch and says which version carried an owner reference ("" none).
func watchOwnerReferences(t *testing.T, ns, name, rv string) func() string {
	t.Helper()
	cs := kubernetes.NewForConfigOrDie(env.Config)
	w, err := cs.CoreV1().ConfigMaps(ns).Watch(t.Context(), metav1.ListOptions{FieldSelector: "metadata.name=" + name, ResourceVersion: rv})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	found := ""
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			if cm, ok := ev.Object.(*corev1.ConfigMap); ok && len(cm.OwnerReferences) > 0 {
				mu.Lock()
				if found == "" {
					found = fmt.Sprintf("resourceVersion %s: %v", cm.ResourceVersion, cm.OwnerReferences)
				}
				mu.Unlock()
			}
		}
	}()
	return func() string {
		w.Stop()
		<-done
		mu.Lock()
		defer mu.Unlock()
		return found
	}
}

// shardLabel returns obj's kdag.dev/shard label: "" without it, "=" and its value with it.
func shardLabel(obj client.Object) string {
	if v, ok := obj.GetLabels()[kdagv1alpha1.LabelShard]; ok {
		return "=" + v
	}
	return ""
}

func init() {
	shardCache = shard.SelectCache
	shardControllerOptions = func(mgr ctrl.Manager, name string) controller.Options {
		o := shard.Options{Shard: name}
		return o.ControllerOptions(mgr)
	}
}

// TestShards_ReferenceInformersHoldOnlyTheShardsNamespaces: the informers of referenced objects
// of a shard's manager hold the Secrets of the namespaces its own owners reference, not those
// of another shard's namespace, and let them go when its last owner there moves to another
// shard. Without the shard layer's WithNamespacedReferences they hold every Secret of the
// cluster.
func TestShards_ReferenceInformersHoldOnlyTheShardsNamespaces(t *testing.T) {
	env := env
	mine, theirs := env.Namespace(t), env.Namespace(t)
	for _, ns := range []string{mine, theirs} {
		for i := range 3 {
			s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("ref-%d", i)}, StringData: map[string]string{"k": "v"}}
			if err := env.Client.Create(t.Context(), s); err != nil {
				t.Fatal(err)
			}
		}
	}
	rm := funcRM{add: func(w *testapi.Widget, b *controller.Graph) error {
		ref := b.Reference(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "ref-0"}}, controller.RequireKeys("k"))
		b.Add(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: w.Name + "-config"}, Data: map[string]string{"k": "v"}}, controller.DependsOn(ref))
		return nil
	}}
	layer := shard.Options{Shard: "a"}
	if err := layer.Complete(); err != nil {
		t.Fatal(err)
	}
	comp := controller.For("refs", rm)
	cacheOpts, err := shard.SelectCache(controller.CacheOptions(scheme, comp), "a")
	if err != nil {
		t.Fatal(err)
	}
	cacheOpts.DefaultNamespaces = map[string]crcache.Config{mine: {}, theirs: {}}
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"}, Cache: cacheOpts,
		MapperProvider: controller.MapperProvider, Controller: skipNameValidation(),
	})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := metrics.New(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	c, err := controller.Register(mgr, "refs", rm, layer.ControllerOptions(mgr), controller.Options{Metrics: reg})
	if err != nil {
		t.Fatal(err)
	}
	running.Manager(t, mgr)
	for _, w := range []*testapi.Widget{
		{ObjectMeta: metav1.ObjectMeta{Namespace: mine, Name: "in-a", Labels: map[string]string{kdagv1alpha1.LabelShard: "a"}}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: theirs, Name: "in-b", Labels: map[string]string{kdagv1alpha1.LabelShard: "b"}}},
	} {
		if err := env.Client.Create(t.Context(), w); err != nil {
			t.Fatal(err)
		}
	}
	poll.True(t, "Widget in-a Ready", 2*waitTimeout, func(ctx context.Context) bool {
		w := &testapi.Widget{}
		return env.Client.Get(ctx, types.NamespacedName{Namespace: mine, Name: "in-a"}, w) == nil &&
			meta.IsStatusConditionTrue(w.Status.Conditions, kdagv1alpha1.ConditionReady)
	})
	secrets := &corev1.SecretList{}
	if err := env.Client.List(t.Context(), secrets, client.InNamespace(mine)); err != nil {
		t.Fatal(err)
	}
	if got := controller.ReferenceObjects(c, "Secret"); got != len(secrets.Items) {
		t.Errorf("the shard's informers of referenced Secrets hold %d, want the %d of its owner's namespace %s "+
			"(none of namespace %s, another shard's)", got, len(secrets.Items), mine, theirs)
	}

	// The owner moves to shard b: no owner of shard a references anything any more.
	w := &testapi.Widget{}
	if err := env.Client.Get(t.Context(), types.NamespacedName{Namespace: mine, Name: "in-a"}, w); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(w.DeepCopy())
	w.Labels[kdagv1alpha1.LabelShard] = "b"
	if err := env.Client.Patch(t.Context(), w, patch); err != nil {
		t.Fatal(err)
	}
	poll.True(t, "the shard's informers of referenced Secrets let namespace "+mine+" go", waitTimeout, func(context.Context) bool {
		return controller.ReferenceObjects(c, "Secret") == 0
	})
}

// revisionsAfter returns "" when owner has at most limit revisions, none labelled with a shard,
// and the newest numbered after last; else what is wrong.
func revisionsAfter(ctx context.Context, ns string, owner client.Object, last int64, limit int) string {
	list := &appsv1.ControllerRevisionList{}
	if err := env.Client.List(ctx, list, client.InNamespace(ns),
		client.MatchingLabels{kdagv1alpha1.LabelOwnerUID: string(owner.GetUID())}); err != nil {
		return err.Error()
	}
	var newest int64
	for _, cr := range list.Items {
		if got, ok := cr.Labels[kdagv1alpha1.LabelShard]; ok {
			return fmt.Sprintf("ControllerRevision %s has shard label %q, want none", cr.Name, got)
		}
		newest = max(newest, cr.Revision)
	}
	switch {
	case newest <= last:
		return fmt.Sprintf("the newest revision is %d, want one after %d (%d revisions)", newest, last, len(list.Items))
	case len(list.Items) > limit:
		return fmt.Sprintf("%d revisions, want at most %d (the history limit)", len(list.Items), limit)
	}
	return ""
}

// lastRevision returns the number of owner's newest revision (0 when it has none).
func lastRevision(t *testing.T, ns string, owner client.Object) int64 {
	t.Helper()
	list := &appsv1.ControllerRevisionList{}
	if err := env.Client.List(t.Context(), list, client.InNamespace(ns),
		client.MatchingLabels{kdagv1alpha1.LabelOwnerUID: string(owner.GetUID())}); err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, cr := range list.Items {
		n = max(n, cr.Revision)
	}
	return n
}
