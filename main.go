// Command kdag is the manager of the reference operator built on kdag: it runs the controllers of
// the Gitea application (apis/gitea) under one controller-runtime manager.
//
//	kdag [flags]                                   run the manager
//	kdag --version                                 print the version and exit
//	kdag plan -f gitea.yaml [-o text|mermaid|dot|yaml]   render the graphs without a cluster
//	kdag plan --live gitea/demo [-n NS] [-o text|yaml|json]   what applying would change on the cluster
//	kdag plan --live -f gitea.yaml                       the same for a spec not applied yet
//	kdag plan --live --all [-n NS | -A] [-l SEL] [--details]   the same for every owner, summarised
package main

import (
	// Mozilla's CA roots, used only where the system has none: `make image` builds the image
	// with no base layer, so without them no trace could be exported over TLS.
	_ "golang.org/x/crypto/x509roots/fallback"

	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/pkg/errors"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	crconfig "sigs.k8s.io/controller-runtime/pkg/client/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	giteav1alpha1 "github.com/kdag-dev/kdag/apis/gitea/v1alpha1"
	"github.com/kdag-dev/kdag/controllers"
	"github.com/kdag-dev/kdag/pkg/controller"
	"github.com/kdag-dev/kdag/pkg/plan"
	"github.com/kdag-dev/kdag/pkg/shard"
	"github.com/kdag-dev/kdag/pkg/tracing"
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

// options are the manager's command-line settings.
type options struct {
	metricsAddr   string
	probeAddr     string
	leaderElect   bool
	leaderElectNS string
	sharding      shard.Options
	concurrency   int
	perController map[string]*int
	zap           zap.Options
	printVersion  bool
}

func (o *options) bindFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.metricsAddr, "metrics-bind-address", ":8080",
		"Address the Prometheus metrics endpoint binds to; \"0\" disables it.")
	fs.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081",
		"Address the /healthz and /readyz probes bind to.")
	fs.BoolVar(&o.leaderElect, "leader-elect", false,
		"Hold a Lease so that only one replica reconciles at a time.")
	fs.StringVar(&o.leaderElectNS, "leader-election-namespace", "",
		"Namespace of the leader election Lease; empty means the namespace the manager runs in.")
	o.sharding.RegisterFlags(fs) // --shard, --shards, --shard-id, --shard-lease-duration
	fs.IntVar(&o.concurrency, "concurrency", 0, "Owners reconciled in parallel by each controller; 0 means kdag's default (4).")
	o.perController = map[string]*int{}
	for _, c := range controllers.Components(nil) {
		o.perController[c.Name()] = fs.Int(c.Name()+"-concurrency", 0,
			fmt.Sprintf("Owners reconciled in parallel by the %s controller; 0 means --concurrency.", c.Name()))
	}
	fs.BoolVar(&o.printVersion, "version", false, "Print the version and exit.")
	o.zap = zap.Options{}
	o.zap.BindFlags(fs) // --zap-log-level, --zap-encoder (json|console), --zap-devel, ...
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "plan" {
		err := runPlan(os.Args[2:], os.Stdout)
		if err != nil && !errors.Is(err, plan.ErrChanges) {
			fmt.Fprintln(os.Stderr, "plan:", err)
		}
		os.Exit(plan.ExitCode(err)) // kubectl diff's: 0 no change, 1 changes, 2 error
	}
	// The manager's own flag set, as the Kubernetes components have: an imported package that
	// registers a name on the process-global flag.CommandLine cannot clash with these.
	fs := flag.NewFlagSet(os.Args[0], flag.ExitOnError)
	crconfig.RegisterFlags(fs) // --kubeconfig, read by ctrl.GetConfig
	var opts options
	opts.bindFlags(fs)
	_ = fs.Parse(os.Args[1:]) // ExitOnError: -h exits 0, a bad flag exits 2
	if opts.printVersion {
		fmt.Println("kdag", version)
		return
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts.zap)))

	if err := run(opts); err != nil {
		ctrl.Log.Error(err, "manager stopped")
		os.Exit(1)
	}
}

// run starts the manager and blocks until SIGINT or SIGTERM; it returns an error when the manager
// cannot be configured or stops on a failure.
func run(opts options) error {
	sharding := opts.sharding
	sharding.LeaderElect, sharding.Namespace, sharding.LeaderElectionID = opts.leaderElect, opts.leaderElectNS, leaderElectionID
	if err := sharding.Complete(); err != nil {
		return err
	}
	ctx := ctrl.SetupSignalHandler()
	// Tracing is off unless OTEL_EXPORTER_OTLP_ENDPOINT (or OTEL_TRACES_EXPORTER=otlp) is set.
	shutdownTracing, err := tracing.Setup(ctx, tracing.WithServiceName("kdag"))
	if err != nil {
		return errors.Wrap(err, "set up tracing from the OTEL_* environment")
	}
	defer func() {
		flushCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = shutdownTracing(flushCtx)
	}()
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return errors.Wrap(err, "load kubeconfig (set KUBECONFIG or run in a cluster)")
	}
	cfg.Wrap(tracing.WrapTransport) // API requests carry the reconcile's trace context
	concurrency := map[string]int{}
	for name, n := range opts.perController {
		concurrency[name] = *n
		if *n == 0 {
			concurrency[name] = opts.concurrency
		}
	}
	components := controllers.Components(concurrency, controller.WithOperatorVersion(version))
	mgrOpts, err := sharding.ManagerOptions(ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: opts.metricsAddr},
		HealthProbeBindAddress: opts.probeAddr,
		Cache:                  controller.CacheOptions(scheme, components...),
		MapperProvider:         controller.MapperProvider,
	})
	if err != nil {
		return err
	}
	mgr, err := ctrl.NewManager(cfg, mgrOpts)
	if err != nil {
		return errors.Wrap(err, "create manager")
	}
	if err := controller.Setup(ctx, mgr, components, sharding.ControllerOptions(mgr)...); err != nil {
		return err
	}
	// Dynamic shards: the member Lease and the assigner. In every mode: a Warning event and
	// kdag_owners_unserved for owners whose shard no manager serves.
	if err := sharding.Add(mgr, components); err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return errors.Wrap(err, "add health check")
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return errors.Wrap(err, "add ready check")
	}
	ctrl.Log.WithName("setup").Info("starting manager", "version", version, "controllers", len(concurrency), "shard", sharding.Name(),
		"dynamicShards", sharding.Auto())
	return errors.Wrap(mgr.Start(ctx), "run manager")
}

// leaderElectionID is the unsharded manager's leader election ID; static shard NAME's is
// "NAME.<it>" (shard.LeaderElectionID).
const leaderElectionID = "kdag.kdag.dev"
