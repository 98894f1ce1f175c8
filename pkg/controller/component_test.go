package controller_test

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/controller"
	"github.com/kdag-dev/kdag/pkg/testing/poll"
	"github.com/kdag-dev/kdag/pkg/testing/testapi"
)

// endpointRM is funcRM with a StatusReporter: status.endpoint is the "url" key of the applied
// ConfigMap <owner>-config, read back typed with Report.Get. It also tries to overwrite kdag's
// status block, which kdag must ignore, and records what Report.State answered.
type endpointRM struct {
	funcRM
	states chan [2]kdagv1alpha1.NodeState // the config node's state, and an absent node's
	hide   *atomic.Bool                   // set: the endpoint is cleared (as if the service went away)
}

func (rm endpointRM) ReportStatus(_ context.Context, w *testapi.Widget, report controller.Report) error {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: w.Name + "-config"}}
	found, err := report.Get(cm)
	if err != nil {
		return err
	}
	w.Status.Endpoint = ""
	if found && !rm.hide.Load() {
		w.Status.Endpoint = cm.Data["url"]
	}
	w.Status.ObservedGeneration = 42 // kdag's: ignored
	w.Status.Conditions = nil        // kdag's: ignored
	select {
	case rm.states <- [2]kdagv1alpha1.NodeState{report.State(cm), report.State(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "absent"}})}:
	default:
	}
	return nil
}

// TestStatusReporter_WritesTheOwnersTypedStatus (issue 19 item 1): ReportStatus sets the owner's
// own typed status field from a node's applied object (Report.Get); kdag writes it with its own
// block, which the reporter cannot overwrite; a second pass writes nothing; a field the reporter
// clears is removed from the live status.
func TestStatusReporter_WritesTheOwnersTypedStatus(t *testing.T) {
	rm := endpointRM{states: make(chan [2]kdagv1alpha1.NodeState, 100), hide: &atomic.Bool{}, funcRM: funcRM{add: func(w *testapi.Widget, b *controller.Graph) error {
		b.Add(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: w.Name + "-config"}, Data: w.Spec.Data})
		return nil
	}}}
	f := newFixture(t, rm)
	w := f.widget("web", testapi.WidgetSpec{Data: map[string]string{"url": "http://web.example"}})
	f.settle("web")

	live := f.get(&testapi.Widget{}, "web").(*testapi.Widget)
	if live.Status.Endpoint != "http://web.example" {
		t.Errorf("status.endpoint = %q, want the ConfigMap's url", live.Status.Endpoint)
	}
	if live.Status.ObservedGeneration != w.Generation || !meta.IsStatusConditionTrue(live.Status.Conditions, kdagv1alpha1.ConditionReady) {
		t.Errorf("kdag's block overwritten by the reporter: observedGeneration %d (want %d), conditions %v",
			live.Status.ObservedGeneration, w.Generation, live.Status.Conditions)
	}
	var last [2]kdagv1alpha1.NodeState
	for len(rm.states) > 0 {
		last = <-rm.states
	}
	if last != [2]kdagv1alpha1.NodeState{kdagv1alpha1.NodeReady, ""} {
		t.Errorf("Report.State = %q for the config node and %q for a node not in the graph, want Ready and \"\"", last[0], last[1])
	}

	f.updateWidget("web", func(w *testapi.Widget) { w.Spec.Data = map[string]string{"url": "http://new.example"} })
	f.settle("web")
	if got := f.get(&testapi.Widget{}, "web").(*testapi.Widget).Status.Endpoint; got != "http://new.example" {
		t.Errorf("status.endpoint = %q after the spec changed, want the new url", got)
	}

	// Only the reporter's field changes (no new generation, no node changes): still written.
	rm.hide.Store(true)
	f.settle("web")
	if got := f.get(&testapi.Widget{}, "web").(*testapi.Widget).Status.Endpoint; got != "" {
		t.Errorf("status.endpoint = %q after the reporter cleared it, want it removed", got)
	}
}

// TestCacheOptions_ScopesOwnedTypesToKdagsObjects (issue 19 item 1): the cache of a manager set
// up with CacheOptions holds the owned types' objects kdag applied, not the others of the
// cluster; a type one component owns and another reconciles is cached whole. The cached objects
// share the metadata they repeat (issue 32: the manager's peak RSS): two ConfigMaps with the same
// labels hold one copy of each label key and value, in one label map.
func TestCacheOptions_ScopesOwnedTypesToKdagsObjects(t *testing.T) {
	parent := controller.For("parents", funcRM{}.owning(&testapi.Widget{})) // owns Widgets, which "widgets" reconciles
	opts := controller.CacheOptions(scheme, controller.For("widgets", funcRM{}), parent)
	for obj, want := range map[client.Object]bool{&corev1.ConfigMap{}: true, &appsv1.Deployment{}: true, &testapi.Widget{}: false} {
		scoped := false
		for o, by := range opts.ByObject {
			if sameType(o, obj) {
				scoped = by.Label != nil && selects(by.Label, kdagv1alpha1.LabelController+" exists")
			}
		}
		if scoped != want {
			t.Errorf("%T label-scoped = %v, want %v (ByObject %v)", obj, scoped, want, opts.ByObject)
		}
	}
	for obj, by := range opts.ByObject {
		if by.Transform == nil {
			t.Errorf("%T: no cache transform, want one sharing repeated metadata", obj)
		}
	}

	ns := env.Namespace(t)
	for name, lbls := range map[string]map[string]string{
		"kdags": {kdagv1alpha1.LabelController: "widgets"}, "kdags-2": {kdagv1alpha1.LabelController: "widgets"}, "users": nil,
	} {
		if err := env.Client.Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: lbls}}); err != nil {
			t.Fatal(err)
		}
	}
	opts.DefaultNamespaces = map[string]cache.Config{ns: {}}
	c, err := cache.New(env.Config, cache.Options{Scheme: scheme, Mapper: restMapper(t), DefaultNamespaces: opts.DefaultNamespaces, ByObject: opts.ByObject})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); _ = c.Start(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	poll.True(t, "the cache holds kdag's ConfigMap", waitTimeout, func(context.Context) bool {
		return c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "kdags"}, &corev1.ConfigMap{}) == nil
	})
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "users"}, &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
		t.Errorf("the cache's answer for a ConfigMap kdag did not apply = %v, want NotFound", err)
	}

	var cached []corev1.ConfigMap
	poll.True(t, "the cache holds both of kdag's ConfigMaps", waitTimeout, func(context.Context) bool {
		list := &corev1.ConfigMapList{}
		if err := c.List(ctx, list, client.InNamespace(ns), client.UnsafeDisableDeepCopy); err != nil || len(list.Items) != 2 {
			return false
		}
		cached = list.Items
		return true
	})
	stored := func(cm *corev1.ConfigMap) (key, value *byte) {
		for k, v := range cm.Labels {
			return unsafe.StringData(k), unsafe.StringData(v)
		}
		return nil, nil
	}
	k1, v1 := stored(&cached[0])
	k2, v2 := stored(&cached[1])
	if k1 == nil || k1 != k2 || v1 != v2 {
		t.Errorf("two cached ConfigMaps with the label %s=widgets hold their own copies of it, want one shared",
			kdagv1alpha1.LabelController)
	}
	if reflect.ValueOf(cached[0].Labels).UnsafePointer() != reflect.ValueOf(cached[1].Labels).UnsafePointer() {
		t.Errorf("two cached ConfigMaps with equal labels %v hold two label maps, want one shared", cached[0].Labels)
	}
}

// sameType reports whether a and b are of one kind in the scheme.
func sameType(a, b client.Object) bool {
	ga, _ := apiutil.GVKForObject(a, scheme)
	gb, _ := apiutil.GVKForObject(b, scheme)
	return ga == gb
}

func restMapper(t *testing.T) meta.RESTMapper {
	t.Helper()
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"}})
	if err != nil {
		t.Fatal(err)
	}
	return mgr.GetRESTMapper()
}

// TestSetup_RBACCheck (issue 19 item 1): Setup refuses a manager whose RBAC lacks a rule its
// controllers need, with every missing rule named as a +kubebuilder:rbac marker to add (and
// nothing granted among them), also when the missing rule is one the
// manager's cache needs to start at all (list, watch: its informers would wait for ever); with the
// rules its component declares, the manager starts and reconciles.
func TestSetup_RBACCheck(t *testing.T) {
	all := []string{"get", "list", "watch", "create", "update", "patch", "delete"}
	grant := func(drop ...string) []rbacv1.PolicyRule {
		keep := func(verbs []string, resource string) []string {
			var out []string
			for _, v := range verbs {
				if !strings.Contains(strings.Join(drop, ","), resource+":"+v) {
					out = append(out, v)
				}
			}
			return out
		}
		return []rbacv1.PolicyRule{
			{APIGroups: []string{testapi.GroupVersion.Group}, Resources: []string{"widgets"}, Verbs: keep([]string{"get", "list", "watch", "update", "patch"}, "widgets")},
			{APIGroups: []string{testapi.GroupVersion.Group}, Resources: []string{"widgets/status"}, Verbs: keep([]string{"update", "patch"}, "widgets/status")},
			{APIGroups: []string{testapi.GroupVersion.Group}, Resources: []string{"widgets/finalizers"}, Verbs: []string{"update"}},
			{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: keep(all, "configmaps")},
			{APIGroups: []string{""}, Resources: []string{"secrets", "services"}, Verbs: all},
			{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: all},
			{APIGroups: []string{"apps"}, Resources: []string{"controllerrevisions"}, Verbs: []string{"get", "list", "watch", "create", "delete"}},
			{APIGroups: []string{"events.k8s.io"}, Resources: []string{"events"}, Verbs: keep([]string{"create", "patch"}, "events")},
		}
	}
	for _, tc := range []struct {
		name        string
		rules       []rbacv1.PolicyRule
		inNamespace bool     // a Role in the manager's namespace (WithWatchNamespaces), else a ClusterRole
		wantMissing []string // nil: the manager starts and reconciles
	}{
		{name: "every rule granted cluster-wide", rules: grant()},
		{name: "every rule granted in the watched namespace", rules: grant(), inNamespace: true},
		{name: "three rules missing", rules: grant("configmaps:delete", "widgets/status:patch", "events:create"),
			wantMissing: []string{`+kubebuilder:rbac:groups="",resources=configmaps,verbs=delete;`,
				"+kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;",
				"+kubebuilder:rbac:groups=testing.kdag.dev,resources=widgets/status,verbs=patch"}},
		{name: "a rule missing in the watched namespace", rules: grant("configmaps:delete"), inNamespace: true,
			wantMissing: []string{`+kubebuilder:rbac:groups="",resources=configmaps,verbs=delete,namespace=`}},
		{name: "list and watch missing: the cache could never sync", rules: grant("configmaps:list", "configmaps:watch"),
			wantMissing: []string{`+kubebuilder:rbac:groups="",resources=configmaps,verbs=list;watch`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := env.Namespace(t)
			cfg := userWithRules(t, ns, tc.rules, tc.inNamespace)
			var setupOpts []controller.Options
			if tc.inNamespace {
				setupOpts = append(setupOpts, controller.Options{WatchNamespaces: []string{ns}})
			}
			mgr, err := ctrl.NewManager(cfg, ctrl.Options{
				Scheme:     scheme,
				Metrics:    metricsserver.Options{BindAddress: "0"},
				Cache:      cache.Options{DefaultNamespaces: map[string]cache.Config{ns: {}}},
				Controller: skipNameValidation(),
			})
			if err != nil {
				t.Fatal(err)
			}
			rm := funcRM{add: func(w *testapi.Widget, b *controller.Graph) error {
				b.Add(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: w.Name + "-config"}})
				return nil
			}}
			err = controller.Setup(t.Context(), mgr, []controller.Component{controller.For("widget-"+ns, rm)}, setupOpts...)
			if tc.wantMissing != nil {
				if err == nil {
					t.Fatal("Setup accepted a manager without the rules its controller needs")
				}
				for _, want := range tc.wantMissing {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("Setup error %q does not name the missing rule %q", err, want)
					}
				}
				if strings.Contains(err.Error(), "verbs=get") || strings.Contains(err.Error(), "resources=widgets,") {
					t.Errorf("Setup error %q lists rules that are granted", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			started := make(chan error, 1)
			go func() { started <- mgr.Start(ctx) }()
			w := &testapi.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}}
			if err := env.Client.Create(t.Context(), w); err != nil {
				t.Fatal(err)
			}
			poll.True(t, "the widget is Ready", waitTimeout, func(context.Context) bool {
				if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(w), w); err != nil {
					return false
				}
				return meta.IsStatusConditionTrue(w.Status.Conditions, kdagv1alpha1.ConditionReady)
			})
			cancel()
			if err := <-started; err != nil {
				t.Errorf("manager: %v", err)
			}
		})
	}
}

// userWithRules returns a config of a new user granted rules: by a Role in namespace ns, or by
// a ClusterRole (removed when the test ends) when not inNamespace.
func userWithRules(t *testing.T, ns string, rules []rbacv1.PolicyRule, inNamespace bool) *rest.Config {
	t.Helper()
	name := "kdag-" + ns
	cfg, err := env.User(name)
	if err != nil {
		t.Fatal(err)
	}
	subjects := []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: name}}
	var objs []client.Object
	if inNamespace {
		objs = []client.Object{
			&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Rules: rules},
			&rbacv1.RoleBinding{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
				RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
				Subjects:   subjects,
			},
		}
	} else {
		objs = []client.Object{
			&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules},
			&rbacv1.ClusterRoleBinding{
				ObjectMeta: metav1.ObjectMeta{Name: name},
				RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
				Subjects:   subjects,
			},
		}
	}
	for _, obj := range objs {
		if err := env.Client.Create(t.Context(), obj); err != nil {
			t.Fatal(err)
		}
		if !inNamespace {
			t.Cleanup(func() { _ = env.Client.Delete(context.Background(), obj) })
		}
	}
	return cfg
}

// selects reports whether sel has the requirement req, written "key operator [values]"
// ("kdag.dev/controller exists", "kdag.dev/shard = [a]", "kdag.dev/shard !").
func selects(sel labels.Selector, req string) bool {
	reqs, _ := sel.Requirements()
	for _, r := range reqs {
		got := r.Key() + " " + string(r.Operator())
		if vals := r.ValuesUnsorted(); len(vals) > 0 {
			got += " " + fmt.Sprint(vals)
		}
		if got == req {
			return true
		}
	}
	return false
}
