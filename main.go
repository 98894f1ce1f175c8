// Command kdag is the manager of the reference operator built on kdag: it runs the controllers of
// the Gitea application (apis/gitea) under one controller-runtime manager (package operator).
//
//	kdag [flags]                                   run the manager
//	kdag --version                                 print the version and exit
//	kdag plan -f gitea.yaml [-o text|mermaid|dot|yaml]   render the graphs without a cluster
//	kdag plan --live gitea/demo [-n NS] [-o text|yaml|json]   what applying would change on the cluster
//	kdag plan --live -f gitea.yaml                       the same for a spec not applied yet
//	kdag plan --live --all [-n NS | -A] [-l SEL] [--details]   the same for every owner, summarised
package main

import (
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	giteav1alpha1 "github.com/kdag-dev/kdag/apis/gitea/v1alpha1"
	crds "github.com/kdag-dev/kdag/config/crd"
	"github.com/kdag-dev/kdag/controllers"
	"github.com/kdag-dev/kdag/pkg/operator"
)

// version is the operator's version, written into every owner's status and printed by --version;
// `make build`, `make image` and `make release` set it from `git describe` with
// -ldflags "-X main.version=...".
var version = "dev"

// scheme is the process-wide registry of the types the manager serves.
var scheme = runtime.NewScheme()

func init() {
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(giteav1alpha1.AddToScheme(scheme))
}

// options are the reference operator's settings; its flags (operator.Options.BindFlags) set the
// rest. Its unsharded leader election Lease is kdag.kdag.dev (static shard NAME's:
// NAME.kdag.kdag.dev).
func options() operator.Options {
	return operator.Options{Name: "kdag", Version: version, Scheme: scheme, CRDs: crds.Bases}
}

func main() { operator.Main(controllers.Components(nil), options()) }
