// Command hello is a whole kdag operator: Hello web sites (api/v1alpha1), each a ConfigMap of
// pages served by a Deployment behind a Service (hello.go). `hello -h` lists its flags;
// `hello plan -f site.yaml` renders a site's graph without a cluster.
package main

import (
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/kdag-dev/kdag/examples/hello/api/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/controller"
	"github.com/kdag-dev/kdag/pkg/operator"
)

// options are the operator's settings; its flags set the rest (hello -h).
func options() operator.Options {
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(v1alpha1.AddToScheme(scheme))
	return operator.Options{Name: "hello", Scheme: scheme}
}

func main() {
	operator.Main([]controller.Component{controller.For("hello", ResourceManager{})}, options())
}
