package plan

import (
	"context"
	"flag"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/pkg/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// Run is an operator's `plan` command; args are the words after "plan" and out gets the plans.
//
// Offline, `-f FILE [-o text|mermaid|dot|yaml] [-n NAMESPACE]` (-n: the namespace of owners that
// have none, default "default") writes the plans of FILE's owners and their children
// (Planner.Write).
//
// Against a cluster, `--live TYPE/NAME [-n NAMESPACE]` plans the owner TYPE/NAME
// (TYPE: its kind or resource name, "gitea" or "giteas.gitea.kdag.dev") as the cluster holds it,
// and `--live -f FILE` the owners of FILE as they would be once applied (Resolve: the cluster's
// owner with FILE's spec, or FILE's owner when the cluster has none); -n defaults to the
// context's namespace. --kubeconfig and --context choose the cluster as kubectl's flags do
// (Options.RESTConfig, when set, wins). out gets the changes (Planner.Changes, WriteChanges) in
// text, yaml or json, each owner followed by its child owners; an owner of FILE is first dry-run
// itself (DryRunOwner): one the API server refuses is reported with the server's message, and
// its objects are not planned. Nothing is written to the cluster (every write is a dry run).
//
// `--live --all [-n NAMESPACE | -A] [-l SELECTOR] [--details]` plans every owner of the
// components' kinds on the cluster, in the namespace (-n, default the context's) or all of them
// (-A), that the label selector matches (ListOwners; a child owner through its owner), at most
// Options.Parallel owners at once (Planner.Fleet), and writes a summary (WriteFleet): owners per
// action, the fields that change most, every Recreate, Refused object and error by name; with
// --details, then the plan of every owner that changes. It returns FleetStatus(plans).
//
// It returns an error for bad flags or options, a file that cannot be read or holds no owner of a
// component's kind, an owner that is not on the cluster, and the errors of Planner.Write or
// Planner.Changes; a live plan returns Status(changes) (ErrChanges when something would change),
// whose ExitCode is kubectl diff's. Flag usage goes to os.Stderr.
func Run(ctx context.Context, args []string, out io.Writer, opts Options) error {
	flags := flag.NewFlagSet("plan", flag.ContinueOnError)
	file := flags.String("f", "", "file with the owner(s) to plan, e.g. config/samples/app.yaml")
	format := flags.String("o", string(Text), "output: text, mermaid, dot or yaml; with --live: text, yaml or json")
	namespace := flags.String("n", "default", "namespace of owners that have none; with --live: the kube context's by default")
	live := flags.Bool("live", false, "plan against the cluster: --live TYPE/NAME, or --live -f FILE")
	kubeconfig := flags.String("kubeconfig", "", "with --live: the kubeconfig file (default: $KUBECONFIG, ~/.kube/config)")
	kubeContext := flags.String("context", "", "with --live: the kubeconfig context (default: the current one)")
	var fleet fleetArgs
	fleet.bind(flags)
	var positional []string
	for {
		if err := flags.Parse(args); err != nil {
			return errors.WithStack(err)
		}
		if flags.NArg() == 0 {
			break
		}
		positional = append(positional, flags.Arg(0))
		args = flags.Args()[1:]
	}
	nsSet := false
	flags.Visit(func(f *flag.Flag) { nsSet = nsSet || f.Name == "n" })
	if err := fleet.validate(*live, nsSet); err != nil {
		return err
	}
	if *live {
		return runLive(ctx, out, opts, liveArgs{file: *file, format: Format(*format), namespace: *namespace, nsSet: nsSet,
			kubeconfig: *kubeconfig, context: *kubeContext, owners: positional, fleet: fleet})
	}
	if len(positional) > 0 {
		return errors.Errorf("unexpected argument %q: a TYPE/NAME needs --live", positional[0])
	}
	if *file == "" {
		return errors.New("-f is required")
	}
	if err := Format(*format).validate(); err != nil {
		return err
	}
	p, err := New(opts)
	if err != nil {
		return err
	}
	owners, err := decodeFile(p, *file, *namespace)
	if err != nil {
		return err
	}
	return p.Write(ctx, out, owners, Format(*format))
}

// decodeFile decodes the owners of file; it returns an error when it holds none.
func decodeFile(p *Planner, file, namespace string) ([]client.Object, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, errors.WithStack(err)
	}
	defer f.Close()
	owners, err := p.Decode(f, namespace)
	if err != nil {
		return nil, errors.Wrapf(err, "read %s", file)
	}
	if len(owners) == 0 {
		return nil, errors.Errorf("%s holds no object that a kdag controller reconciles", file)
	}
	return owners, nil
}

// liveArgs are the flags of a live plan.
type liveArgs struct {
	file, namespace, kubeconfig, context string
	nsSet                                bool
	format                               Format
	owners                               []string
	fleet                                fleetArgs
}

// runLive is Run with --live.
func runLive(ctx context.Context, out io.Writer, opts Options, a liveArgs) error {
	switch {
	case a.fleet.all && (a.file != "" || len(a.owners) > 0):
		return errors.New("--all plans every owner on the cluster: it takes no TYPE/NAME and no -f FILE")
	case a.file == "" && len(a.owners) == 0 && !a.fleet.all:
		return errors.New("--live needs TYPE/NAME, -f FILE or --all")
	case a.file != "" && len(a.owners) > 0:
		return errors.New("--live takes TYPE/NAME or -f FILE, not both")
	}
	if !slices.Contains(liveFormats, a.format) {
		return errors.Errorf("unknown output %q for --live: use text, yaml or json", string(a.format))
	}
	p, err := New(opts)
	if err != nil {
		return err
	}
	cfg := opts.RESTConfig
	loaded := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: a.kubeconfig, Precedence: clientcmd.NewDefaultClientConfigLoadingRules().Precedence},
		&clientcmd.ConfigOverrides{CurrentContext: a.context})
	if cfg == nil {
		if cfg, err = loaded.ClientConfig(); err != nil {
			return errors.Wrap(err, "load kubeconfig (--kubeconfig, $KUBECONFIG or ~/.kube/config)")
		}
	}
	if !a.nsSet {
		a.namespace = "default"
		if ns, _, err := loaded.Namespace(); err == nil && ns != "" && opts.RESTConfig == nil {
			a.namespace = ns
		}
	}
	if cfg.QPS == 0 && cfg.RateLimiter == nil {
		// client-go's default of 5 requests a second would make a fleet plan of 50 Giteas
		// (about 2,400 requests) take 8 minutes; the plan bounds its requests in flight itself
		// (Options.Parallel), and the API server's priority and fairness protects it, as with
		// controller-runtime's config.
		cfg = rest.CopyConfig(cfg)
		cfg.QPS = -1
	}
	c, err := client.New(cfg, client.Options{Scheme: p.scheme})
	if err != nil {
		return errors.Wrap(err, "connect to the cluster")
	}
	// Every write of a live plan is a dry run: the engine's options say so, and so does the
	// client, should one be missed.
	c = client.NewDryRunClient(c)
	if a.fleet.all {
		return runFleet(ctx, out, p, c, a, opts.Parallel)
	}
	var owners []client.Object
	if a.file != "" {
		decoded, err := decodeFile(p, a.file, a.namespace)
		if err != nil {
			return err
		}
		for _, o := range decoded {
			resolved, err := p.Resolve(ctx, c, o)
			if err != nil {
				return err
			}
			owners = append(owners, resolved)
		}
	} else {
		for _, arg := range a.owners {
			typ, name, ok := strings.Cut(arg, "/")
			if !ok || typ == "" || name == "" {
				return errors.Errorf("%q is not TYPE/NAME", arg)
			}
			gvk, err := p.kindFor(typ, c.RESTMapper())
			if err != nil {
				return err
			}
			o, err := p.ReadOwner(ctx, c, gvk, client.ObjectKey{Namespace: a.namespace, Name: name})
			if err != nil {
				return err
			}
			owners = append(owners, o)
		}
	}
	// Each owner, then its child owners: a child's objects come under its own heading, after
	// its owner's. An owner from a file is first dry-run itself: the children of a spec the API
	// server refuses are not planned.
	var changes []OwnerChanges
	for _, owner := range owners {
		if a.file != "" {
			err := p.DryRunOwner(ctx, c, owner)
			if refused, ok := AsOwnerRefused(err); ok {
				changes = append(changes, OwnerChanges{Owner: refused.Owner, Exists: owner.GetUID() != placeholderUID, Error: refused.Err.Error()})
				continue
			}
			if err != nil {
				return err
			}
		}
		tree, err := p.Changes(ctx, c, []client.Object{owner}, opts.Parallel)
		if err != nil {
			return err
		}
		changes = append(changes, tree...)
	}
	if err := WriteChanges(out, changes, a.format); err != nil {
		return err
	}
	return Status(changes)
}

// kindFor returns the kind of a component that typ names: its kind, "kind.group", or a resource
// name the cluster's mapper knows ("giteas", "gitea.gitea.kdag.dev").
func (p *Planner) kindFor(typ string, mapper meta.RESTMapper) (schema.GroupVersionKind, error) {
	for gk, c := range p.components {
		if strings.EqualFold(typ, gk.Kind) || strings.EqualFold(typ, gk.Kind+"."+gk.Group) {
			gvk, err := apiutil.GVKForObject(c.NewOwner(), p.scheme)
			return gvk, errors.WithStack(err)
		}
	}
	gvk, err := mapper.KindFor(schema.ParseGroupResource(strings.ToLower(typ)).WithVersion(""))
	if err != nil {
		return schema.GroupVersionKind{}, errors.Wrapf(err, "type %s", typ)
	}
	if !p.reconciled(gvk.GroupKind()) {
		return schema.GroupVersionKind{}, errors.Errorf("type %s: no component reconciles %s", typ, gvk.GroupKind())
	}
	return gvk, nil
}
