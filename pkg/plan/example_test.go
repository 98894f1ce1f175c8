package plan_test

import (
	"context"
	"os"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/kdag-dev/kdag/pkg/controller"
	"github.com/kdag-dev/kdag/pkg/plan"
	"github.com/kdag-dev/kdag/pkg/testing/testapi"
)

// An operator's `plan` command is one call: its scheme, its components and its CRDs. Here the
// Widget of testdata/widgets.yaml, defaulted by its CRD (maxReplicas 10), creates a child Widget,
// which is planned too.
func ExampleRun() {
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = testapi.AddToScheme(scheme)
	err := plan.Run(context.Background(), []string{"-f", "testdata/widgets.yaml", "-o", "mermaid"}, os.Stdout, plan.Options{
		Scheme:     scheme,
		Components: []controller.Component{controller.For("widget", widgets{})},
		CRDs:       os.DirFS("../testing/testapi/crd"),
	})
	if err != nil {
		panic(err)
	}
	// Output:
	// %% Widget default/shop
	// flowchart TD
	//   n0["ConfigMap default/shop"]
	//   n1["Widget default/shop-child"]
	//   n0 --> n1
	//
	// %% Widget default/shop-child
	// flowchart TD
	//   n0["ConfigMap default/shop-child"]
}
