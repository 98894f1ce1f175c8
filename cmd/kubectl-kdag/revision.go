package main

import (
	"context"
	"fmt"
	"io"

	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	giteav1alpha1 "github.com/kdag-dev/kdag/apis/gitea/v1alpha1"
	crds "github.com/kdag-dev/kdag/config/crd"
	"github.com/kdag-dev/kdag/controllers"
	"github.com/kdag-dev/kdag/pkg/history"
)

// revisionUsage is the help of the history and rollback commands.
const revisionUsage = `Show the revisions kdag recorded of an owner, or roll it back to one.

Usage:
  kubectl kdag history TYPE/NAME [-n NS] [--revision N] [-o text|yaml|json]
  kubectl kdag rollback TYPE/NAME --to N [-n NS] [--dry-run]

Every reconcile that changes an owner's objects records a revision (a ControllerRevision owned by
the owner, at most kdag.dev/revision-history-limit of them, default 10): the owner's spec, its
generation, the operator version, the trace ID, and what changed per object. history lists them;
--revision N shows one in full. rollback applies the owner spec of revision N again, after
checking with server-side dry runs that it can work (it refuses, naming why, a version below one
whose database migration finished, a volume that would shrink); --dry-run prints the live plan of
the rollback and writes nothing.

Flags:
  -n, --namespace NAME   namespace of the owner (default: the kubeconfig context's)
      --kubeconfig PATH  kubeconfig file (default: $KUBECONFIG, then ~/.kube/config)
      --context NAME     kubeconfig context to use
  -o, --output FORMAT    history: text (default), yaml or json
      --revision N       history: show revision N in full
      --to N             rollback: the revision to roll back to
      --dry-run          rollback: check and print the live plan; write nothing
`

// operatorScheme knows the reference operator's types.
func operatorScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(giteav1alpha1.AddToScheme(s))
	return s
}

// isRevisionCommand reports whether args start with history or rollback.
func isRevisionCommand(args []string) bool {
	return len(args) > 0 && (args[0] == "history" || args[0] == "rollback")
}

// runRevision runs `history` or `rollback` (args[0]) with the reference operator's components and
// returns the exit code: 0, 1 on errors (a refused rollback), 2 on usage errors.
func runRevision(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	for _, a := range args[1:] {
		if a == "-h" || a == "--help" {
			fmt.Fprint(stdout, revisionUsage)
			return 0
		}
	}
	opts := history.Options{Scheme: operatorScheme(), Components: controllers.Components(nil), CRDs: crds.Bases}
	if err := history.Run(ctx, args[0], args[1:], stdout, opts); err != nil {
		fmt.Fprintf(stderr, "error: %v\n", err)
		if history.IsUsage(err) {
			fmt.Fprintln(stderr, "Run 'kubectl kdag "+args[0]+" --help' for usage.")
			return 2
		}
		return 1
	}
	return 0
}
