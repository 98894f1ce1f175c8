package operator

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/pkg/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	crconfig "sigs.k8s.io/controller-runtime/pkg/client/config"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/kdag-dev/kdag/pkg/controller"
	"github.com/kdag-dev/kdag/pkg/plan"
)

// BindFlags registers the manager's flags on fs, each writing into o, its default being o's
// value where o sets one: --metrics-bind-address (":8080"), --health-probe-bind-address
// (":8081"), --leader-elect, --leader-election-namespace, --shard, --shards, --shard-id,
// --shard-lease-duration (shard.Options.RegisterFlags), --concurrency, --NAME-concurrency for
// each component NAME, --version, and the logger's --zap-* flags (zap.Options.BindFlags). It
// registers no --kubeconfig: Main adds controller-runtime's on its flag set.
func (o *Options) BindFlags(fs *flag.FlagSet, components []controller.Component) {
	orDefault := func(v, def string) string {
		if v == "" {
			return def
		}
		return v
	}
	fs.StringVar(&o.MetricsBindAddress, "metrics-bind-address", orDefault(o.MetricsBindAddress, ":8080"),
		"Address the Prometheus metrics endpoint binds to; \"0\" disables it.")
	fs.StringVar(&o.HealthProbeBindAddress, "health-probe-bind-address", orDefault(o.HealthProbeBindAddress, ":8081"),
		"Address the /healthz and /readyz probes bind to.")
	fs.BoolVar(&o.LeaderElect, "leader-elect", o.LeaderElect,
		"Hold a Lease so that only one replica reconciles at a time.")
	fs.StringVar(&o.LeaderElectionNamespace, "leader-election-namespace", o.LeaderElectionNamespace,
		"Namespace of the leader election Lease; empty means the namespace the manager runs in.")
	o.Sharding.RegisterFlags(fs) // --shard, --shards, --shard-id, --shard-lease-duration
	fs.IntVar(&o.Concurrency, "concurrency", o.Concurrency,
		"Owners reconciled in parallel by each controller; 0 means kdag's default (4).")
	o.flagConcurrency = map[string]*int{}
	for _, c := range components {
		o.flagConcurrency[c.Name()] = fs.Int(c.Name()+"-concurrency", o.ControllerConcurrency[c.Name()],
			fmt.Sprintf("Owners reconciled in parallel by the %s controller; 0 means --concurrency.", c.Name()))
	}
	fs.BoolVar(&o.printVersion, "version", false, "Print the version and exit.")
	o.Zap.BindFlags(fs) // --zap-log-level, --zap-encoder (json|console), --zap-devel, ...
}

// Main is an operator's whole command, run with os.Args; it exits the process:
//
//	NAME [flags]            run the manager (Run) until SIGINT or SIGTERM; exit 1 on an error
//	NAME --version          print Name and Version and exit
//	NAME plan ARGS...       the plan subcommand (Plan), with kubectl diff's exit codes
//
// The flags are BindFlags' and --kubeconfig, parsed on a flag set of the command's own (not the
// process-global flag.CommandLine): -h prints them and exits 0, a bad flag exits 2. The logger is
// zap with the --zap-* flags (ctrl.SetLogger).
func Main(components []controller.Component, opts Options) {
	os.Exit(command(os.Args, os.Stdout, os.Stderr, ctrl.SetupSignalHandler, components, opts))
}

// command is Main with its arguments (args[0] the program's name), its output and its context
// (made once the flags are parsed) given; it returns the exit status.
func command(args []string, stdout, stderr io.Writer, context func() context.Context,
	components []controller.Component, opts Options) int {
	if len(args) > 1 && args[1] == "plan" {
		err := Plan(context(), args[2:], stdout, components, opts)
		if err != nil && !errors.Is(err, plan.ErrChanges) {
			fmt.Fprintln(stderr, "plan:", err)
		}
		return plan.ExitCode(err) // kubectl diff's: 0 no change, 1 changes, 2 error
	}
	fs := flag.NewFlagSet(args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	crconfig.RegisterFlags(fs) // --kubeconfig, read by ctrl.GetConfig
	opts.BindFlags(fs, components)
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if opts.printVersion {
		name := opts.Name
		if opts.Version == "" {
			opts.Version = "dev"
		}
		fmt.Fprintln(stdout, name, opts.Version)
		return 0
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts.Zap), zap.WriteTo(stderr)))
	if err := Run(context(), components, opts); err != nil {
		ctrl.Log.Error(err, "manager stopped")
		return 1
	}
	return 0
}

// Plan is the operator's `plan` subcommand (plan.Run, whose documentation lists args): it
// renders the graphs of the owners of a file without a cluster, or asks a cluster with dry runs
// what applying would change, writing to out. opts gives the scheme, the CRDs that default the
// owners, and the cluster (RESTConfig; nil: --kubeconfig and --context as kubectl reads them).
// It returns plan.Run's errors (plan.ErrChanges when a live plan would change something; see
// plan.ExitCode) and an error when opts has no Scheme.
func Plan(ctx context.Context, args []string, out io.Writer, components []controller.Component, opts Options) error {
	if opts.Scheme == nil {
		return errors.New("operator: Options.Scheme is nil: give a scheme with client-go's types and the owner types")
	}
	return plan.Run(ctx, args, out, plan.Options{
		Scheme: opts.Scheme, Components: components, CRDs: opts.CRDs, RESTConfig: opts.RESTConfig,
	})
}
