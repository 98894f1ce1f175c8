package main

import (
	"context"
	"io"

	crds "github.com/kdag-dev/kdag/config/crd"
	"github.com/kdag-dev/kdag/controllers"
	"github.com/kdag-dev/kdag/pkg/plan"
)

// runPlan is `kdag plan -f FILE [-o text|mermaid|dot|yaml] [-n NAMESPACE]`: it renders, without
// a cluster, the graph of every owner in FILE and of each child owner its graph creates, from the
// same AddResources code the controllers run (pkg/plan). Objects are defaulted with the CRD
// schemas as the API server would. Secret values are never printed.
//
// With --live (`--live gitea/demo` or `--live -f FILE`, --kubeconfig, --context) it asks the
// cluster, with server-side dry runs only, what applying would change (plan.Run); it
// then returns plan.ErrChanges when something would change.
func runPlan(args []string, out io.Writer) error {
	return plan.Run(context.Background(), args, out, plan.Options{
		Scheme:     scheme,
		Components: controllers.Components(nil),
		CRDs:       crds.Bases,
	})
}
