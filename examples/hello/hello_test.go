package hello_test

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

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
