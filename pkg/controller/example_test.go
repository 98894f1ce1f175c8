package controller_test

import (
	"context"
	"fmt"
	"os"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kdag-dev/kdag/pkg/controller"
	"github.com/kdag-dev/kdag/pkg/plan"
	"github.com/kdag-dev/kdag/pkg/testing/testapi"
)

// cacheRM is a ResourceManager: a ConfigMap, a Deployment that needs it, and a Service.
type cacheRM struct{}

func (cacheRM) OwnedTypes() []client.Object {
	return []client.Object{&corev1.ConfigMap{}, &appsv1.Deployment{}, &corev1.Service{}}
}

func (cacheRM) AddResources(_ context.Context, owner *testapi.Widget, b *controller.Graph) error {
	name := owner.GetName() + "-cache"
	config := b.Add(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}})
	deploy := b.Add(&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name}}, controller.DependsOn(config))
	b.Add(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name}}, controller.DependsOn(deploy))
	return nil
}

// Example_plan renders the graph of a ResourceManager without a cluster (plan.NewPlan).
func Example_plan() {
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(testapi.AddToScheme(scheme))
	owner := &testapi.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "app"}}

	plan, err := plan.NewPlan(context.Background(), cacheRM{}, owner, scheme, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, n := range plan.Nodes {
		fmt.Println(n.ID, "after", n.Blockers)
	}
	_ = plan.WriteMermaid(os.Stdout)
	// Output:
	// ConfigMap demo/app-cache after []
	// Deployment demo/app-cache after [ConfigMap demo/app-cache]
	// Service demo/app-cache after [Deployment demo/app-cache]
	// flowchart TD
	//   n0["ConfigMap demo/app-cache"]
	//   n1["Deployment demo/app-cache"]
	//   n2["Service demo/app-cache"]
	//   n0 --> n1
	//   n1 --> n2
}
