// Command kubectl-kdag is a kubectl plugin that shows the graph of an object reconciled by a kdag
// controller, with the state of each node, as the owner's status publishes it:
//
//	install bin/release/kubectl-kdag_<os>_<arch> as kubectl-kdag on the PATH (`make release`),
//	or: go install github.com/kdag-dev/kdag/cmd/kubectl-kdag@latest
//	kubectl kdag tree gitea/demo
//	kubectl kdag tree gitea demo -n default -o mermaid
//
// Usage:
//
//	kubectl kdag tree TYPE/NAME [flags]
//	kubectl kdag tree TYPE NAME [flags]
//
// TYPE is a resource name as kubectl takes it: singular, plural, short name or Kind, optionally
// with its group (giteas.gitea.kdag.dev). Flags:
//
//	-n, --namespace NAME   namespace of the object (default: the kubeconfig context's)
//	    --kubeconfig PATH  kubeconfig file (default: $KUBECONFIG, then ~/.kube/config)
//	    --context NAME     kubeconfig context to use
//	-o, --output FORMAT    tree (default), mermaid or dot
//	    --depth N          levels of nested kdag owners the tree expands (default 3; 0: none)
//	    --version          print the version and exit
//
// The tree lists the owner's nodes in graph order; a node that is itself a kdag owner (its
// object has status.graph) is read and expanded below it. Mermaid and DOT draw the owner's
// graph only, nodes colored by state, edges from blocker to dependent.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/pkg/errors"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
)

const usage = `Show the graph of an object reconciled by a kdag controller, with each node's state.

Usage:
  kubectl kdag tree TYPE/NAME [flags]
  kubectl kdag tree TYPE NAME [flags]

Examples:
  kubectl kdag tree gitea/demo
  kubectl kdag tree gt demo -n prod --depth 1
  kubectl kdag tree gitea/demo -o mermaid

Flags:
`

// version is the plugin's version, printed by --version and sent in the User-Agent; `make build`
// and `make release` set it from `git describe` with -ldflags "-X main.version=...".
var version = "dev"

// options are the parsed command line.
type options struct {
	kubeconfig, context, namespace string
	output                         string
	depth                          int
	typ, name                      string
	printVersion                   bool
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run executes the command line args and returns the exit code: 0, 1 on errors, 2 on usage errors.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	opts, help, err := parseArgs(args, stderr)
	switch {
	case help:
		return 0
	case err != nil:
		fmt.Fprintf(stderr, "error: %v\nRun 'kubectl kdag --help' for usage.\n", err)
		return 2
	case opts.printVersion:
		fmt.Fprintln(stdout, "kubectl-kdag", version)
		return 0
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := tree(ctx, opts, stdout, stderr); err != nil {
		fmt.Fprintf(stderr, "error: %v\n", err)
		return 1
	}
	return 0
}

// parseArgs parses args (without the program name). help is true when usage was printed;
// opts.printVersion is set, and nothing else checked, when --version is given.
func parseArgs(args []string, stderr io.Writer) (opts options, help bool, err error) {
	fs := pflag.NewFlagSet("kubectl-kdag", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&opts.kubeconfig, "kubeconfig", "", "path to the kubeconfig file (default: $KUBECONFIG, then ~/.kube/config)")
	fs.StringVar(&opts.context, "context", "", "name of the kubeconfig context to use")
	fs.StringVarP(&opts.namespace, "namespace", "n", "", "namespace of the object (default: the context's namespace)")
	fs.StringVarP(&opts.output, "output", "o", "tree", "output format: tree, mermaid or dot")
	fs.IntVar(&opts.depth, "depth", 3, "levels of nested kdag owners the tree expands (0: none)")
	fs.BoolVar(&opts.printVersion, "version", false, "print the version and exit")
	fs.Usage = func() { fmt.Fprint(stderr, usage+fs.FlagUsages()) }
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return opts, true, nil
		}
		return opts, false, err
	}
	if opts.printVersion {
		return opts, false, nil
	}
	rest := fs.Args()
	if len(rest) == 0 {
		fs.Usage()
		return opts, false, errors.Errorf("missing command: want tree")
	}
	if rest[0] != "tree" {
		return opts, false, errors.Errorf("unknown command %q: want tree", rest[0])
	}
	switch rest = rest[1:]; {
	case len(rest) == 1 && strings.Count(rest[0], "/") == 1:
		opts.typ, opts.name, _ = strings.Cut(rest[0], "/")
	case len(rest) == 2 && !strings.Contains(rest[0], "/"):
		opts.typ, opts.name = rest[0], rest[1]
	default:
		return opts, false, errors.Errorf("tree takes one object, TYPE/NAME or TYPE NAME; got %q", rest)
	}
	if opts.typ == "" || opts.name == "" {
		return opts, false, errors.Errorf("tree takes TYPE/NAME; got %q", strings.Join(rest, " "))
	}
	switch opts.output {
	case "tree", "mermaid", "dot":
	default:
		return opts, false, errors.Errorf("unknown output format %q: want tree, mermaid or dot", opts.output)
	}
	if opts.depth < 0 {
		return opts, false, errors.Errorf("--depth must not be negative, got %d", opts.depth)
	}
	return opts, false, nil
}

// tree connects to the cluster, reads the owner and its nested owners, and prints them.
func tree(ctx context.Context, opts options, stdout, stderr io.Writer) error {
	cfg, namespace, err := clientConfig(opts)
	if err != nil {
		return err
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return errors.Wrap(err, "create discovery client")
	}
	mapper := newMapper(dc, stderr)
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return errors.Wrap(err, "create dynamic client")
	}
	r := &reader{client: dyn, mapper: mapper, warn: stderr}
	mapping, err := resolveType(mapper, opts.typ)
	if err != nil {
		return err
	}
	depth := opts.depth
	if opts.output != "tree" {
		depth = 0 // the drawings show the owner's graph only
	}
	owner, err := r.load(ctx, mapping, namespace, opts.name, depth)
	if err != nil {
		return err
	}
	return write(stdout, owner, opts.output)
}

// newMapper maps resources and kinds to REST mappings from discovery, read once, with the short
// names (gt for giteas) that discovery publishes.
func newMapper(dc discovery.DiscoveryInterface, warn io.Writer) meta.RESTMapper {
	cached := memory.NewMemCacheClient(dc)
	return restmapper.NewShortcutExpander(restmapper.NewDeferredDiscoveryRESTMapper(cached), cached,
		func(msg string) { fmt.Fprintf(warn, "Warning: %s\n", msg) })
}

// write renders the owner in format: tree, mermaid or dot.
func write(w io.Writer, owner *ownerTree, format string) error {
	switch format {
	case "mermaid":
		return writeMermaid(w, owner)
	case "dot":
		return writeDOT(w, owner)
	default:
		return writeTree(w, owner)
	}
}

// clientConfig loads the kubeconfig as kubectl does and returns the REST config and the
// namespace: -n, else the context's, else "default".
func clientConfig(opts options) (*rest.Config, string, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = opts.kubeconfig
	overrides := &clientcmd.ConfigOverrides{CurrentContext: opts.context}
	overrides.Context.Namespace = opts.namespace
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides)
	cfg, err := cc.ClientConfig()
	if err != nil {
		return nil, "", errors.Wrap(err, "load kubeconfig")
	}
	namespace, _, err := cc.Namespace()
	if err != nil {
		return nil, "", errors.Wrap(err, "load kubeconfig namespace")
	}
	cfg.UserAgent = "kubectl-kdag/" + version
	cfg.QPS, cfg.Burst = 50, 100
	return cfg, namespace, nil
}

// resolveType maps what the user typed (plural, singular, short name when mapper expands them,
// Kind, each optionally with .version.group or .group) to a REST mapping, as kubectl does.
func resolveType(mapper meta.RESTMapper, typ string) (*meta.RESTMapping, error) {
	mapping, err := mappingFor(mapper, typ)
	if err != nil {
		return nil, errors.Wrapf(err, "the server does not have a resource type %q", typ)
	}
	return mapping, nil
}
