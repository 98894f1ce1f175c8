package main

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/kdag-dev/kdag/examples/hello/api/v1alpha1"
	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/controller"
	"github.com/kdag-dev/kdag/pkg/controllertest"
	"github.com/kdag-dev/kdag/pkg/operator"
	"github.com/kdag-dev/kdag/pkg/rbac"
	"github.com/kdag-dev/kdag/pkg/testing/envtest"
	"github.com/kdag-dev/kdag/pkg/testing/poll"
	"github.com/kdag-dev/kdag/pkg/testing/workload"
)

var api = controllertest.NewAPIServer(envtest.Options{CRDDirectoryPaths: []string{"config/crd"}}, v1alpha1.AddToScheme)

func TestMain(m *testing.M) { api.Main(m) }

func TestHello_ServiceOnceTheServerIsAvailable(t *testing.T) {
	h := controllertest.Start(t, api, controller.For("hello", ResourceManager{}))
	site := h.Create(controllertest.Named[v1alpha1.Hello]("site"))
	server := controllertest.Named[appsv1.Deployment]("site")
	h.WaitExists(server)
	if h.Get(controllertest.Named[corev1.Service]("site")) {
		t.Error("the Service is applied before the server is available")
	}
	h.MarkReady(server)
	h.WaitReady(site) // Ready: every node applied and ready, the Service included
}

// TestHello_SurvivesACrashAtEveryWrite kills the operator at each of its writes in turn while a
// site is deployed and its pages change, starts a fresh one, and checks that the site ends Ready,
// that a further pass writes nothing and that nothing was deleted, created again or rewritten
// more than without the crash.
func TestHello_SurvivesACrashAtEveryWrite(t *testing.T) {
	controllertest.ExploreCrashes(t, api, controllertest.Crashes{
		Components: []controller.Component{controller.For("hello", ResourceManager{})},
		Scenario: func(t *testing.T, h *controllertest.Harness) {
			site := h.Create(&v1alpha1.Hello{ObjectMeta: metav1.ObjectMeta{Name: "site"},
				Spec: v1alpha1.HelloSpec{Pages: map[string]string{"index.html": "hello"}}}).(*v1alpha1.Hello)
			server := controllertest.Named[appsv1.Deployment]("site")
			h.MarkReady(server)
			h.WaitReady(site)
			h.Update(site, func() { site.Spec.Pages["index.html"] = "hello again" })
			h.Eventually("the server rolls with the new pages", func(context.Context) (bool, error) {
				return h.Get(server) && server.Generation > 1, nil
			})
			h.MarkReady(server)
			h.WaitReady(site)
			if pages := controllertest.Named[corev1.ConfigMap]("site-pages"); !h.Get(pages) || pages.Data["index.html"] != "hello again" {
				t.Errorf("pages %v, want the new ones", pages.Data)
			}
		},
	})
}

// TestOperator_ServesASite runs the operator as main does (operator.Run with main's options and
// components, on the API server with the Hello CRD installed): a Hello gets its pages, its
// server and, once the server is available, its Service, and is Ready with its CRD's default of
// one replica.
func TestOperator_ServesASite(t *testing.T) {
	env := api.Env(t)
	ns := env.Namespace(t)
	opts := options()
	opts.RESTConfig, opts.MetricsBindAddress = env.Config, "0"
	opts.ManagerOptions = func(o *ctrl.Options) { o.Cache.DefaultNamespaces = map[string]cache.Config{ns: {}} }
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- operator.Run(ctx, []controller.Component{controller.For("hello", ResourceManager{})}, opts)
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("operator.Run: %v", err)
		}
	}()
	site := &v1alpha1.Hello{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "site"},
		Spec: v1alpha1.HelloSpec{Pages: map[string]string{"index.html": "<h1>hello</h1>"}}}
	if err := env.Client.Create(t.Context(), site); err != nil {
		t.Fatal(err)
	}
	server := &appsv1.Deployment{}
	poll.True(t, "the server Deployment", 2*time.Minute, func(ctx context.Context) bool {
		return env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "site"}, server) == nil
	})
	if r := server.Spec.Replicas; r == nil || *r != 1 {
		t.Errorf("server replicas %v, want the CRD's default 1", r)
	}
	// envtest runs no Deployment controller: say the server is available, as it would.
	poll.True(t, "the Hello is Ready", 2*time.Minute, func(ctx context.Context) bool {
		if env.Client.Get(ctx, client.ObjectKeyFromObject(server), server) == nil && server.Status.ObservedGeneration != server.Generation {
			if err := workload.SetReady(server, metav1.Now()); err != nil {
				t.Fatal(err)
			}
			_ = env.Client.Status().Update(ctx, server) // a conflict: marked again on the next poll
		}
		return env.Client.Get(ctx, client.ObjectKeyFromObject(site), site) == nil &&
			meta.IsStatusConditionTrue(site.Status.Conditions, kdagv1alpha1.ConditionReady) &&
			site.Status.ObservedGeneration == site.Generation
	})
	pages, svc := &corev1.ConfigMap{}, &corev1.Service{}
	if err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "site-pages"}, pages); err != nil ||
		pages.Data["index.html"] != "<h1>hello</h1>" {
		t.Errorf("pages %v (%v), want the Hello's", pages.Data, err)
	}
	if err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "site"}, svc); err != nil {
		t.Errorf("the Service: %v", err)
	}
}

// TestRBAC_RoleGrantsWhatTheOperatorNeeds: the ClusterRole `make manifests` generates from
// hello.go's markers grants every rule operator.Rules derives from the component's owner type
// and OwnedTypes; a type added to OwnedTypes without its marker fails here, naming the marker.
func TestRBAC_RoleGrantsWhatTheOperatorNeeds(t *testing.T) {
	env := api.Env(t)
	need, err := operator.Rules(options().Scheme, env.Client.RESTMapper(), controller.For("hello", ResourceManager{}))
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile("config/rbac/role.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var role rbacv1.ClusterRole
	if err := yaml.Unmarshal(b, &role); err != nil {
		t.Fatal(err)
	}
	if missing := rbac.Missing(role.Rules, need); missing != nil {
		t.Errorf("config/rbac/role.yaml lacks rules the operator needs; add to hello.go and run make manifests:\n%s",
			strings.Join(rbac.Markers("", missing), "\n"))
	}
}
