package shard_test

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kdag-dev/kdag/pkg/controller"
	"github.com/kdag-dev/kdag/pkg/shard"
	"github.com/kdag-dev/kdag/pkg/testing/testapi"
)

// widgets is the ResourceManager of the example: a ConfigMap per Widget.
type widgets struct{}

func (widgets) OwnedTypes() []client.Object { return []client.Object{&corev1.ConfigMap{}} }

func (widgets) AddResources(_ context.Context, _ *testapi.Widget, _ *controller.Graph) error {
	return nil
}

// Example is a replica of dynamic shards, as kdag's --shards=auto (compiled, not run: it needs a
// cluster). The replica's ID is its pod's name, its Leases go to the operator's namespace.
func Example() {
	ctx, cfg, scheme := context.Background(), &rest.Config{Host: "https://kube-apiserver"}, runtime.NewScheme()
	_ = testapi.AddToScheme(scheme)
	var rm widgets
	components := []controller.Component{controller.For("widgets", rm)}
	layer := shard.Options{Shards: "auto", ID: shard.SanitizeID("kdag-7c9f5d-x2x4z"), Namespace: "kdag-system"}
	if err := layer.Complete(); err != nil {
		panic(err)
	}
	mgrOpts, _ := layer.ManagerOptions(ctrl.Options{Scheme: scheme, Cache: controller.CacheOptions(scheme, components...)})
	mgr, _ := ctrl.NewManager(cfg, mgrOpts)
	_ = controller.Setup(ctx, mgr, components, layer.ControllerOptions(mgr))
	_ = layer.Add(mgr, components)
}
