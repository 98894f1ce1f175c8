// Command kubectl-kdag is a kubectl plugin that shows the graph of an object reconciled by a kdag
// controller, with the state of each node, as the owner's status publishes it, and finds the
// trace of its last reconcile in Jaeger:
//
//	install bin/release/kubectl-kdag_<os>_<arch> as kubectl-kdag on the PATH (`make release`),
//	or: go install github.com/kdag-dev/kdag/cmd/kubectl-kdag@latest
//	kubectl kdag tree gitea/demo
//	kubectl kdag tree gitea demo -n default -o mermaid
//	kubectl kdag trace gitea/demo --jaeger-url http://127.0.0.1:16686
//
// Usage:
//
//	kubectl kdag tree TYPE/NAME [flags]
//	kubectl kdag tree TYPE NAME [flags]
//	kubectl kdag trace TYPE/NAME [flags]
//	kubectl kdag history TYPE/NAME [--revision N] [flags]
//	kubectl kdag rollback TYPE/NAME --to N [--dry-run] [flags]
//
// history and rollback read the revisions the operator records of an owner and apply the owner
// spec of one again (package history; `kubectl kdag history --help`).
//
// TYPE is a resource name as kubectl takes it: singular, plural, short name or Kind, optionally
// with its group (giteas.gitea.kdag.dev). Flags:
//
//	-n, --namespace NAME   namespace of the object (default: the kubeconfig context's)
//	    --kubeconfig PATH  kubeconfig file (default: $KUBECONFIG, then ~/.kube/config)
//	    --context NAME     kubeconfig context to use
//	-o, --output FORMAT    tree: tree (default), mermaid or dot; trace: url (default) or id
//	    --depth N          levels of nested kdag owners the tree expands (default 3; 0: none)
//	    --jaeger-url URL   trace: base URL of the Jaeger UI (default: $KDAG_JAEGER_URL)
//	    --version          print the version and exit
//
// The tree lists the owner's nodes in graph order; a node that is itself a kdag owner (its
// object has status.graph) is read and expanded below it. Mermaid and DOT draw the owner's
// graph only, nodes colored by state, edges from blocker to dependent.
//
// Why is it not Ready yet? When the operator publishes them (status.waitingFor and
// status.lastReconcile), the owner's row of the tree says which node it has been waiting for and
// for how long, and the last reconcile's duration and trace ID; the nodes of the last reconcile's
// critical path, the chain of nodes that set its duration, are marked with " *" and their run
// and wait times (a legend line below the tree says so); Mermaid and DOT draw them and their
// edges bold. Owners of operators without these fields print as before.
//
// The trace command prints the Jaeger URL of the owner's last reconcile trace,
// <jaeger-url>/trace/<traceID>, or with -o id the trace ID alone (no Jaeger URL needed). It
// fails when the owner has no trace ID: tracing is off in its operator unless
// OTEL_EXPORTER_OTLP_ENDPOINT is set (Helm: otel.endpoint).
//
// Exit codes: 0 success, 1 error, 2 usage error.
package main

import (
	"context"
	"fmt"
	"io"
	"net/url"
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

const usage = `Show the graph of an object reconciled by a kdag controller, with each node's state,
or the trace of its last reconcile in Jaeger.

Usage:
  kubectl kdag tree TYPE/NAME [flags]
  kubectl kdag tree TYPE NAME [flags]
  kubectl kdag trace TYPE/NAME [flags]
  kubectl kdag history TYPE/NAME [--revision N] [flags]
  kubectl kdag rollback TYPE/NAME --to N [--dry-run] [flags]

The tree marks with * the nodes of the last reconcile's critical path (the chain that set its
duration) with their run and wait times, and says what a not Ready owner is waiting for and
since when. The trace command prints <jaeger-url>/trace/<trace ID> of the last reconcile.
history lists the revisions the operator recorded of the owner; rollback applies the owner spec
of one again (see 'kubectl kdag history --help').

Examples:
  kubectl kdag tree gitea/demo
  kubectl kdag tree gt demo -n prod --depth 1
  kubectl kdag tree gitea/demo -o mermaid
  kubectl kdag trace gitea/demo --jaeger-url http://127.0.0.1:16686
  KDAG_JAEGER_URL=http://127.0.0.1:16686 kubectl kdag trace gitea demo
  kubectl kdag trace gitea/demo -o id

Flags:
`

// envJaegerURL is the environment variable that gives --jaeger-url's default.
const envJaegerURL = "KDAG_JAEGER_URL"

// version is the plugin's version, printed by --version and sent in the User-Agent; `make build`
// and `make release` set it from `git describe` with -ldflags "-X main.version=...".
var version = "dev"

// options are the parsed command line.
type options struct {
	command                        string // tree or trace
	kubeconfig, context, namespace string
	output                         string // tree, mermaid, dot (tree); url, id (trace)
	depth                          int
	jaegerURL                      string // --jaeger-url, else $KDAG_JAEGER_URL; "" with -o id
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
	if isRevisionCommand(args) {
		ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		return runRevision(ctx, args, stdout, stderr)
	}
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
	cmd := tree
	if opts.command == "trace" {
		cmd = traceURL
	}
	if err := cmd(ctx, opts, stdout, stderr); err != nil {
		fmt.Fprintf(stderr, "error: %v\n", err)
		return 1
	}
	return 0
}

// parseArgs parses args (without the program name); --jaeger-url defaults to $KDAG_JAEGER_URL.
// help is true when usage was printed; opts.printVersion is set, and nothing else checked, when
// --version is given.
func parseArgs(args []string, stderr io.Writer) (opts options, help bool, err error) {
	fs := pflag.NewFlagSet("kubectl-kdag", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&opts.kubeconfig, "kubeconfig", "", "path to the kubeconfig file (default: $KUBECONFIG, then ~/.kube/config)")
	fs.StringVar(&opts.context, "context", "", "name of the kubeconfig context to use")
	fs.StringVarP(&opts.namespace, "namespace", "n", "", "namespace of the object (default: the context's namespace)")
	fs.StringVarP(&opts.output, "output", "o", "", "output format of tree: tree (default), mermaid or dot; of trace: url (default) or id")
	fs.IntVar(&opts.depth, "depth", 3, "levels of nested kdag owners the tree expands (0: none)")
	fs.StringVar(&opts.jaegerURL, "jaeger-url", "", "base URL of the Jaeger UI that trace links to (default: $"+envJaegerURL+")")
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
		return opts, false, errors.Errorf("missing command: want tree or trace")
	}
	opts.command = rest[0]
	if opts.command != "tree" && opts.command != "trace" {
		return opts, false, errors.Errorf("unknown command %q: want tree or trace", rest[0])
	}
	switch rest = rest[1:]; {
	case len(rest) == 1 && strings.Count(rest[0], "/") == 1:
		opts.typ, opts.name, _ = strings.Cut(rest[0], "/")
	case len(rest) == 2 && !strings.Contains(rest[0], "/"):
		opts.typ, opts.name = rest[0], rest[1]
	default:
		return opts, false, errors.Errorf("%s takes one object, TYPE/NAME or TYPE NAME; got %q", opts.command, rest)
	}
	if opts.typ == "" || opts.name == "" {
		return opts, false, errors.Errorf("%s takes TYPE/NAME; got %q", opts.command, strings.Join(rest, " "))
	}
	if opts.depth < 0 {
		return opts, false, errors.Errorf("--depth must not be negative, got %d", opts.depth)
	}
	if opts.command == "tree" {
		switch opts.output {
		case "":
			opts.output = "tree"
		case "tree", "mermaid", "dot":
		default:
			return opts, false, errors.Errorf("unknown output format %q for tree: want tree, mermaid or dot", opts.output)
		}
		return opts, false, nil
	}
	switch opts.output {
	case "":
		opts.output = "url"
	case "url", "id":
	default:
		return opts, false, errors.Errorf("unknown output format %q for trace: want url or id", opts.output)
	}
	if opts.jaegerURL == "" {
		opts.jaegerURL = os.Getenv(envJaegerURL)
	}
	if opts.output == "id" {
		return opts, false, nil
	}
	if opts.jaegerURL == "" {
		return opts, false, errors.Errorf("trace needs the Jaeger UI's address: pass --jaeger-url (e.g. --jaeger-url http://127.0.0.1:16686) "+
			"or set %s; or print the trace ID alone with -o id", envJaegerURL)
	}
	if opts.jaegerURL, err = jaegerBase(opts.jaegerURL); err != nil {
		return opts, false, err
	}
	return opts, false, nil
}

// jaegerBase checks that raw is an absolute http(s) URL and returns it without a trailing slash.
func jaegerBase(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return "", errors.Errorf("Jaeger URL %q (--jaeger-url or %s) is not an http(s) base URL such as http://127.0.0.1:16686", raw, envJaegerURL)
	}
	return strings.TrimRight(raw, "/"), nil
}

// tree connects to the cluster, reads the owner and its nested owners, and prints them.
func tree(ctx context.Context, opts options, stdout, stderr io.Writer) error {
	depth := opts.depth
	if opts.output != "tree" {
		depth = 0 // the drawings show the owner's graph only
	}
	owner, err := loadOwner(ctx, opts, depth, stderr)
	if err != nil {
		return err
	}
	return write(stdout, owner, opts.output, time.Now())
}

// traceURL connects to the cluster, reads the owner and prints the Jaeger URL of its last
// reconcile's trace, or its trace ID with -o id.
func traceURL(ctx context.Context, opts options, stdout, stderr io.Writer) error {
	owner, err := loadOwner(ctx, opts, 0, stderr)
	if err != nil {
		return err
	}
	return writeTrace(stdout, owner, opts.output, opts.jaegerURL)
}

// writeTrace prints the owner's last reconcile trace ID with format id, else its Jaeger URL
// jaegerURL/trace/<trace ID>; it returns traceID's error when the owner has none.
func writeTrace(w io.Writer, owner *ownerTree, format, jaegerURL string) error {
	id, err := traceID(owner)
	if err != nil {
		return err
	}
	if format == "id" {
		_, err = fmt.Fprintln(w, id)
	} else {
		_, err = fmt.Fprintf(w, "%s/trace/%s\n", jaegerURL, id)
	}
	return errors.WithStack(err)
}

// traceID returns the trace ID of the owner's last reconcile (status.lastReconcile.traceID), or
// an error saying why there is none and what to do.
func traceID(t *ownerTree) (string, error) {
	what := t.Kind + " " + t.Name
	if t.Namespace != "" {
		what = t.Kind + " " + t.Namespace + "/" + t.Name
	}
	l := t.Status.LastReconcile
	if l == nil {
		return "", errors.Errorf("%s has no status.lastReconcile: its operator is older than kdag's reconcile summary, "+
			"or has not written its status since it was upgraded; `kubectl kdag tree` still shows its graph", what)
	}
	if l.TraceID == "" {
		return "", errors.Errorf("%s: its last reconcile has no trace ID, so tracing may be off in its operator; "+
			"enable it by setting OTEL_EXPORTER_OTLP_ENDPOINT on the operator (Helm value otel.endpoint, e.g. http://jaeger-collector:4317), "+
			"then look again after its next reconcile that changes the status", what)
	}
	return l.TraceID, nil
}

// loadOwner connects to the cluster and reads the owner opts names, expanded depth levels.
func loadOwner(ctx context.Context, opts options, depth int, stderr io.Writer) (*ownerTree, error) {
	cfg, namespace, err := clientConfig(opts)
	if err != nil {
		return nil, err
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, errors.Wrap(err, "create discovery client")
	}
	mapper := newMapper(dc, stderr)
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, errors.Wrap(err, "create dynamic client")
	}
	r := &reader{client: dyn, mapper: mapper, warn: stderr}
	mapping, err := resolveType(mapper, opts.typ)
	if err != nil {
		return nil, err
	}
	return r.load(ctx, mapping, namespace, opts.name, depth)
}

// newMapper maps resources and kinds to REST mappings from discovery, read once, with the short
// names (gt for giteas) that discovery publishes.
func newMapper(dc discovery.DiscoveryInterface, warn io.Writer) meta.RESTMapper {
	cached := memory.NewMemCacheClient(dc)
	return restmapper.NewShortcutExpander(restmapper.NewDeferredDiscoveryRESTMapper(cached), cached,
		func(msg string) { fmt.Fprintf(warn, "Warning: %s\n", msg) })
}

// write renders the owner in format: tree, mermaid or dot; now is the current time, which the
// tree measures how long the owner has been waiting to.
func write(w io.Writer, owner *ownerTree, format string, now time.Time) error {
	switch format {
	case "mermaid":
		return writeMermaid(w, owner)
	case "dot":
		return writeDOT(w, owner)
	default:
		return writeTree(w, owner, now)
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
