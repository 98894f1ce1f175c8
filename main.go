// Command kdag is the manager of the reference operator built on kdag: it runs the controllers of
// the Gitea application (apis/gitea) under one controller-runtime manager.
package main

import (
	"flag"
	"os"

	"github.com/pkg/errors"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// scheme is the process-wide registry of the types the manager serves.
var scheme = runtime.NewScheme()

func init() {
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
}

// options are the manager's command-line settings.
type options struct {
	metricsAddr   string
	probeAddr     string
	leaderElect   bool
	leaderElectNS string
	zap           zap.Options
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
	o.zap = zap.Options{Development: false}
	o.zap.BindFlags(fs)
}

func main() {
	var opts options
	opts.bindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts.zap)))

	if err := run(opts); err != nil {
		ctrl.Log.Error(err, "manager stopped")
		os.Exit(1)
	}
}

// run starts the manager and blocks until SIGINT or SIGTERM; it returns an error when the manager
// cannot be configured or stops on a failure.
func run(opts options) error {
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return errors.Wrap(err, "load kubeconfig (set KUBECONFIG or run in a cluster)")
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                  scheme,
		Metrics:                 metricsserver.Options{BindAddress: opts.metricsAddr},
		HealthProbeBindAddress:  opts.probeAddr,
		LeaderElection:          opts.leaderElect,
		LeaderElectionID:        "kdag.kdag.dev",
		LeaderElectionNamespace: opts.leaderElectNS,
	})
	if err != nil {
		return errors.Wrap(err, "create manager")
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return errors.Wrap(err, "add health check")
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return errors.Wrap(err, "add ready check")
	}
	ctrl.Log.WithName("setup").Info("starting manager")
	return errors.Wrap(mgr.Start(ctrl.SetupSignalHandler()), "run manager")
}
