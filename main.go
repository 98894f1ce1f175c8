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
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/pkg/errors"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	crconfig "sigs.k8s.io/controller-runtime/pkg/client/config"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	giteav1alpha1 "github.com/kdag-dev/kdag/apis/gitea/v1alpha1"
	"github.com/kdag-dev/kdag/controllers"
	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
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
	shard         string
	shards        string
	shardID       string
	shardLease    time.Duration
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
	fs.StringVar(&o.shard, "shard", "",
		"Reconcile only the owners labelled "+kdagv1alpha1.LabelShard+"=SHARD, in a leader election of their own; "+
			"empty means the owners without that label. See docs/sharding.md.")
	fs.StringVar(&o.shards, "shards", "",
		"\"auto\": dynamic shards. Every replica reconciles its own shard, named --shard-id, and the owners without a "+
			"static shard are spread over the live replicas (member Leases in --leader-election-namespace). "+
			"Implies --leader-elect (for the assigner); excludes --shard. See docs/sharding.md.")
	fs.DurationVar(&o.shardLease, "shard-lease-duration", shard.DefaultLeaseDuration,
		"With --shards=auto, how long a replica's member Lease stays live after its last renewal: its owners move to "+
			"the other replicas that long after it stops (whole seconds).")
	fs.StringVar(&o.shardID, "shard-id", "",
		"With --shards=auto, this replica's shard name; empty means the host name (the pod's name), made a DNS-1123 label.")
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
	sharding, err := opts.sharding()
	if err != nil {
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
	components := controllers.Components(concurrency, controller.WithOperatorVersion(version), controller.WithShard(sharding.shard))
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                        scheme,
		Metrics:                       metricsserver.Options{BindAddress: opts.metricsAddr},
		HealthProbeBindAddress:        opts.probeAddr,
		LeaderElection:                sharding.leaderElect,
		LeaderElectionID:              sharding.leaderElectionID,
		LeaderElectionNamespace:       sharding.namespace,
		LeaderElectionReleaseOnCancel: sharding.auto,
		Cache:                         controller.CacheOptions(scheme, components...),
		MapperProvider:                controller.MapperProvider,
		// With dynamic shards, every replica reconciles (its own shard); only the assigner is elected.
		Controller: config.Controller{NeedLeaderElection: ptr.To(!sharding.auto)},
	})
	if err != nil {
		return errors.Wrap(err, "create manager")
	}
	if err := controller.Setup(ctx, mgr, components); err != nil {
		return err
	}
	if sharding.auto {
		if err := shard.Add(mgr, sharding.shard, components, shard.WithNamespace(sharding.namespace),
			shard.WithLeaseDuration(opts.shardLease)); err != nil {
			return err
		}
	}
	// In every mode: a Warning event and kdag_owners_unserved for owners whose shard no manager serves.
	if ns := sharding.leaseNamespace(); ns != "" {
		if err := shard.AddUnserved(mgr, components, shard.WithNamespace(ns), shard.WithLeaderElectionID(leaderElectionID)); err != nil {
			return err
		}
	} else {
		ctrl.Log.WithName("setup").Info("not checking for owners of shards that no manager serves: no namespace for the Leases " +
			"(set --leader-election-namespace)")
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return errors.Wrap(err, "add health check")
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return errors.Wrap(err, "add ready check")
	}
	ctrl.Log.WithName("setup").Info("starting manager", "version", version, "controllers", len(concurrency), "shard", sharding.shard,
		"dynamicShards", sharding.auto)
	return errors.Wrap(mgr.Start(ctx), "run manager")
}

// sharding is how the manager shares the owners with others, from the flags.
type sharding struct {
	auto             bool   // --shards=auto
	shard            string // the manager's shard: --shard, or the replica's ID with --shards=auto
	leaderElect      bool
	leaderElectionID string
	namespace        string // of the leader election Lease, and of the member Leases with auto
}

// serviceAccountNamespace is where a pod finds its own namespace.
const serviceAccountNamespace = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// leaderElectionID is the unsharded manager's leader election ID; static shard NAME's is
// "NAME.<it>" (controller.LeaderElectionID).
const leaderElectionID = "kdag.kdag.dev"

// leaseNamespace returns the namespace of the managers' Leases: --leader-election-namespace, or
// in a pod the pod's namespace, as controller-runtime's leader election; "" when neither is known.
func (s sharding) leaseNamespace() string {
	if s.namespace != "" {
		return s.namespace
	}
	ns, err := os.ReadFile(serviceAccountNamespace)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(ns))
}

// sharding checks the sharding flags (a shard is the value of a label and part of a Lease's
// name: checked before anything runs) and returns what they mean, or an error that names the
// flag to fix.
func (o options) sharding() (sharding, error) {
	s := sharding{shard: o.shard, leaderElect: o.leaderElect, namespace: o.leaderElectNS}
	switch o.shards {
	case "":
		if o.shardID != "" {
			return s, errors.New("--shard-id needs --shards=auto")
		}
		id, err := controller.LeaderElectionID(leaderElectionID, o.shard)
		s.leaderElectionID = id
		return s, errors.Wrap(err, "--shard")
	case "auto":
	default:
		return s, errors.Errorf("--shards=%q: the only value is \"auto\"", o.shards)
	}
	if o.shard != "" {
		return s, errors.New("--shard and --shards=auto exclude each other: a replica of dynamic shards is the shard --shard-id")
	}
	s.auto, s.leaderElect, s.leaderElectionID = true, true, shard.AssignerLeaderElectionID
	s.shard = o.shardID
	if s.shard == "" {
		host, err := os.Hostname()
		if err != nil {
			return s, errors.Wrap(err, "--shards=auto: no --shard-id, and no host name to take it from")
		}
		s.shard = shard.SanitizeID(host)
	}
	if err := controller.ValidateShard(s.shard); err != nil {
		return s, errors.Wrap(err, "--shard-id")
	}
	if s.namespace == "" {
		ns, err := os.ReadFile(serviceAccountNamespace)
		if err != nil {
			return s, errors.New("--shards=auto outside a pod: set --leader-election-namespace, where the replicas' Leases go")
		}
		s.namespace = strings.TrimSpace(string(ns))
	}
	return s, nil
}
