package operator

import (
	// Mozilla's CA roots, used only where the system has none: an image with no base layer (kdag's
	// `make image`) has none, and without them no trace could be exported over TLS.
	_ "golang.org/x/crypto/x509roots/fallback"

	"context"
	"io/fs"
	"sort"
	"strings"
	"time"

	"github.com/pkg/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/kdag-dev/kdag/pkg/controller"
	"github.com/kdag-dev/kdag/pkg/shard"
	"github.com/kdag-dev/kdag/pkg/tracing"
)

// Options are an operator's settings: what its code fixes (Name, Version, Scheme, CRDs) and what
// its command line sets (BindFlags binds the rest to flags). The zero value of each field is its
// default unless it says otherwise.
type Options struct {
	// Name is the operator's name: the tracing service name, the first word --version prints and
	// the default leader election ID's first label. Required: a DNS label ("kdag", "hello").
	Name string
	// Version is the operator's version, written into every owner's status
	// (controller.Options.OperatorVersion) and printed by --version. Default "dev".
	Version string
	// Scheme knows every type the components reconcile and apply: client-go's
	// (clientgoscheme.AddToScheme) and the owner types. Required.
	Scheme *runtime.Scheme
	// CRDs holds the CustomResourceDefinition manifests of the owner kinds, with which the `plan`
	// subcommand defaults owners as the API server would (plan.Options.CRDs). Default nil: owners
	// are planned as written.
	CRDs fs.FS
	// RESTConfig reaches the cluster. Default nil: ctrl.GetConfig (--kubeconfig, KUBECONFIG, the
	// in-cluster config, ~/.kube/config).
	RESTConfig *rest.Config

	// MetricsBindAddress is where the Prometheus metrics endpoint binds (--metrics-bind-address);
	// "0" disables it. Default "" is controller-runtime's (":8080"); the flag's default is ":8080".
	MetricsBindAddress string
	// HealthProbeBindAddress is where /healthz and /readyz bind (--health-probe-bind-address).
	// Default "": no probe endpoint; the flag's default is ":8081".
	HealthProbeBindAddress string
	// LeaderElect holds a Lease so that only one replica reconciles at a time (--leader-elect).
	LeaderElect bool
	// LeaderElectionNamespace is the namespace of the Leases (--leader-election-namespace).
	// Default "": the namespace the manager's pod runs in.
	LeaderElectionNamespace string
	// LeaderElectionID is the unsharded manager's leader election Lease; static shard NAME's is
	// "NAME.<it>". Default: Name + ".kdag.dev".
	LeaderElectionID string
	// Sharding is the manager's share of the owners (--shard, --shards, --shard-id,
	// --shard-lease-duration); Run completes it with the leader election settings above.
	// Default: unsharded.
	Sharding shard.Options
	// Concurrency is the number of owners each controller reconciles in parallel (--concurrency).
	// Default 0: kdag's (controller.Options.MaxConcurrentReconciles). Negative is an error.
	Concurrency int
	// ControllerConcurrency sets Concurrency per component name (--NAME-concurrency); 0 means
	// Concurrency. A name that no component has, or a negative value, is an error.
	ControllerConcurrency map[string]int
	// ControllerOptions apply to every component, before each component's own (controller.Setup).
	ControllerOptions []controller.Options
	// ManagerOptions, when set, edits the manager's options last, before the manager is made:
	// cache namespaces, a webhook server, controller-runtime settings kdag does not set.
	ManagerOptions func(*ctrl.Options)
	// Zap are the logger's settings (--zap-log-level, --zap-encoder, --zap-devel, ...), which
	// Main applies (ctrl.SetLogger); Run logs with ctrl.Log and sets no logger.
	Zap zap.Options

	printVersion bool // --version
	// flagConcurrency are the --NAME-concurrency flags' values (BindFlags), read by Run.
	flagConcurrency map[string]*int
}

// defaultLeaderElectionDomain follows Name in the default LeaderElectionID.
const defaultLeaderElectionDomain = ".kdag.dev"

// complete checks o against components and returns it with its defaults and the concurrency
// flags folded in; the errors say which option or flag to fix.
func (o Options) complete(components []controller.Component) (Options, error) {
	if o.Name == "" {
		return o, errors.New("operator: Options.Name is empty: name the operator (\"hello\"); it names its traces and its leader election Lease")
	}
	if o.Scheme == nil {
		return o, errors.New("operator: Options.Scheme is nil: give a scheme with client-go's types (clientgoscheme.AddToScheme) and the owner types")
	}
	if len(components) == 0 {
		return o, errors.New("operator: no components: pass at least one (controller.For(name, resourceManager))")
	}
	if o.Version == "" {
		o.Version = "dev"
	}
	if o.LeaderElectionID == "" {
		o.LeaderElectionID = o.Name + defaultLeaderElectionDomain
	}
	if o.Concurrency < 0 {
		return o, errors.Errorf("operator: --concurrency=%d: want 0 (kdag's default) or more", o.Concurrency)
	}
	names := map[string]bool{}
	for _, c := range components {
		names[c.Name()] = true
	}
	perController := map[string]int{}
	for name, n := range o.ControllerConcurrency {
		perController[name] = n
	}
	for name, n := range o.flagConcurrency {
		if *n != 0 {
			perController[name] = *n
		}
	}
	for name, n := range perController {
		if !names[name] {
			known := make([]string, 0, len(names))
			for k := range names {
				known = append(known, k)
			}
			sort.Strings(known)
			return o, errors.Errorf("operator: concurrency of controller %q: no component has that name (components: %s)",
				name, strings.Join(known, ", "))
		}
		if n < 0 {
			return o, errors.Errorf("operator: --%s-concurrency=%d: want 0 (--concurrency) or more", name, n)
		}
	}
	o.ControllerConcurrency = perController
	o.Sharding.LeaderElect = o.LeaderElect
	o.Sharding.Namespace = o.LeaderElectionNamespace
	o.Sharding.LeaderElectionID = o.LeaderElectionID
	if err := o.Sharding.Complete(); err != nil {
		return o, err
	}
	return o, nil
}

// withConcurrency returns components with each one's number of owners reconciled at once:
// ControllerConcurrency's, else Concurrency, else its own.
func (o Options) withConcurrency(components []controller.Component) []controller.Component {
	out := make([]controller.Component, len(components))
	for i, c := range components {
		n := o.ControllerConcurrency[c.Name()]
		if n == 0 {
			n = o.Concurrency
		}
		if n > 0 {
			c = c.With(controller.Options{MaxConcurrentReconciles: n})
		}
		out[i] = c
	}
	return out
}

// Run sets up a controller-runtime manager for components and runs it until ctx is done: tracing
// from the OTEL_* environment (package tracing; off unless OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_TRACES_EXPORTER=otlp is set), the API client traced, the cache scoped to kdag's objects
// (controller.CacheOptions) and to the shard, the remembering RESTMapper
// (controller.MapperProvider), leader election, the components registered (controller.Setup:
// RBAC checked first), the shard runnables (shard.Options.Add), and /healthz and /readyz.
//
// It returns an error that says what to fix when opts or components are not valid (before it
// connects to anything), when the cluster cannot be reached or the manager's RBAC lacks a rule
// (the error names the +kubebuilder:rbac markers to add), or when the manager stops on a failure;
// nil when ctx ends it. Spans still queued are flushed for up to 5 s on return.
func Run(ctx context.Context, components []controller.Component, opts Options) error {
	o, err := opts.complete(components)
	if err != nil {
		return err
	}
	components = o.withConcurrency(components)
	shutdownTracing, err := tracing.Setup(ctx, tracing.WithServiceName(o.Name))
	if err != nil {
		return errors.Wrap(err, "operator: set up tracing from the OTEL_* environment")
	}
	defer func() {
		flushCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = shutdownTracing(flushCtx)
	}()
	cfg := o.RESTConfig
	if cfg == nil {
		if cfg, err = ctrl.GetConfig(); err != nil {
			return errors.Wrap(err, "operator: load the kubeconfig (set --kubeconfig or KUBECONFIG, or run in a cluster)")
		}
	}
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(tracing.WrapTransport) // API requests carry the reconcile's trace context
	mgrOpts := ctrl.Options{
		Scheme:                 o.Scheme,
		Metrics:                metricsserver.Options{BindAddress: o.MetricsBindAddress},
		HealthProbeBindAddress: o.HealthProbeBindAddress,
		Cache:                  controller.CacheOptions(o.Scheme, components...),
		MapperProvider:         controller.MapperProvider,
	}
	if mgrOpts, err = o.Sharding.ManagerOptions(mgrOpts); err != nil {
		return err
	}
	if o.ManagerOptions != nil {
		o.ManagerOptions(&mgrOpts)
	}
	mgr, err := ctrl.NewManager(cfg, mgrOpts)
	if err != nil {
		return errors.Wrap(err, "operator: create the manager")
	}
	setupOpts := append([]controller.Options{{OperatorVersion: o.Version}}, o.ControllerOptions...)
	if err := controller.Setup(ctx, mgr, components, append(setupOpts, o.Sharding.ControllerOptions(mgr))...); err != nil {
		return err
	}
	// Dynamic shards: the member Lease and the assigner. In every mode: a Warning event and
	// kdag_owners_unserved for owners whose shard no manager serves.
	if err := o.Sharding.Add(mgr, components); err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return errors.Wrap(err, "operator: add the health check")
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return errors.Wrap(err, "operator: add the ready check")
	}
	ctrl.Log.WithName("setup").Info("starting manager", "operator", o.Name, "version", o.Version,
		"controllers", len(components), "shard", o.Sharding.Name(), "dynamicShards", o.Sharding.Auto())
	return errors.Wrap(mgr.Start(ctx), "operator: run the manager")
}
