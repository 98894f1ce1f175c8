package hello_test

import (
	"context"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kdag-dev/kdag/examples/hello"
	"github.com/kdag-dev/kdag/pkg/controller"
	"github.com/kdag-dev/kdag/pkg/controllertest"
	"github.com/kdag-dev/kdag/pkg/testing/envtest"
	"github.com/kdag-dev/kdag/pkg/testing/testapi"
)

var api = controllertest.NewAPIServer(envtest.Options{CRDs: testapi.CRDs()}, testapi.AddToScheme)

func TestMain(m *testing.M) { api.Main(m) }

func TestHello_ServiceOnceTheServerIsAvailable(t *testing.T) {
	h := controllertest.Start(t, api, controller.For("hello", hello.ResourceManager{}))
	site := h.Create(controllertest.Named[testapi.Widget]("site"))
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
		Components: []controller.Component{controller.For("hello", hello.ResourceManager{})},
		Scenario: func(t *testing.T, h *controllertest.Harness) {
			site := h.Create(&testapi.Widget{ObjectMeta: metav1.ObjectMeta{Name: "site"},
				Spec: testapi.WidgetSpec{Data: map[string]string{"index.html": "hello"}}}).(*testapi.Widget)
			server := controllertest.Named[appsv1.Deployment]("site")
			h.MarkReady(server)
			h.WaitReady(site)
			h.Update(site, func() { site.Spec.Data["index.html"] = "hello again" })
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
