package shard

import (
	"flag"
	"os"
	"strings"
	"time"

	"github.com/pkg/errors"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"

	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/controller"
)

// Options say how a manager shares the owners with other managers: not at all (the zero value,
// an unsharded manager), as a static shard (Shard), or as a replica of dynamic shards (Shards
// "auto"). They are the kdag command's --shard, --shards, --shard-id and --shard-lease-duration
// (RegisterFlags); the manager's leader election flags go in LeaderElect and Namespace. Complete
// checks them and fills in the defaults; then ManagerOptions, ControllerOptions and Add set the
// layer up:
//
//	var o shard.Options
//	o.RegisterFlags(fs)
//	_ = fs.Parse(args)
//	o.LeaderElect, o.Namespace = leaderElect, leaderElectionNamespace
//	if err := o.Complete(); err != nil { ... }
//	mgrOpts, _ := o.ManagerOptions(ctrl.Options{Scheme: scheme, Cache: controller.CacheOptions(scheme, components...)})
//	mgr, _ := ctrl.NewManager(cfg, mgrOpts)
//	_ = controller.Setup(ctx, mgr, components, o.ControllerOptions(mgr))
//	_ = o.Add(mgr, components)
type Options struct {
	// Shard is the static shard the manager reconciles (--shard): the owners labelled
	// kdag.dev/shard=Shard. "": the owners without the label.
	Shard string
	// Shards is "auto" for dynamic shards (--shards=auto), "" for none.
	Shards string
	// ID is the replica's shard with dynamic shards (--shard-id); Complete sets it from the host
	// name when it is "".
	ID string
	// LeaseDuration is how long a member Lease stays live after its last renewal
	// (--shard-lease-duration). Default: DefaultLeaseDuration.
	LeaseDuration time.Duration
	// LeaderElect is the manager's --leader-elect; dynamic shards imply it (for the assigner).
	LeaderElect bool
	// Namespace is where the Leases go (--leader-election-namespace); Complete sets it, when it
	// is "", to the namespace of the pod the manager runs in, if any. Dynamic shards need one.
	Namespace string
	// LeaderElectionID is the unsharded manager's leader election ID; static shard NAME elects on
	// "NAME.<it>". Default: DefaultLeaderElectionID.
	LeaderElectionID string

	// hostname and podNamespace are where Complete finds the defaults (os.Hostname, the service
	// account's namespace file); tests replace them.
	hostname     func() (string, error)
	podNamespace func() (string, error)
}

// serviceAccountNamespace is where a pod finds its own namespace.
const serviceAccountNamespace = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// RegisterFlags registers --shard, --shards, --shard-id and --shard-lease-duration on fs, bound
// to o.
func (o *Options) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.Shard, "shard", "",
		"Reconcile only the owners labelled "+kdagv1alpha1.LabelShard+"=SHARD, in a leader election of their own; "+
			"empty means the owners without that label. See docs/sharding.md.")
	fs.StringVar(&o.Shards, "shards", "",
		"\"auto\": dynamic shards. Every replica reconciles its own shard, named --shard-id, and the owners without a "+
			"static shard are spread over the live replicas (member Leases in --leader-election-namespace). "+
			"Implies --leader-elect (for the assigner); excludes --shard. See docs/sharding.md.")
	fs.DurationVar(&o.LeaseDuration, "shard-lease-duration", DefaultLeaseDuration,
		"With --shards=auto, how long a replica's member Lease stays live after its last renewal: its owners move to "+
			"the other replicas that long after it stops (whole seconds).")
	fs.StringVar(&o.ID, "shard-id", "",
		"With --shards=auto, this replica's shard name; empty means the host name (the pod's name), made a DNS-1123 label.")
}

// Auto reports whether o are dynamic shards.
func (o *Options) Auto() bool { return o.Shards == "auto" }

// Name returns the manager's shard: Shard, or with dynamic shards the replica's ID (after
// Complete); "" for an unsharded manager.
func (o *Options) Name() string {
	if o.Auto() {
		return o.ID
	}
	return o.Shard
}

// Complete checks o (a shard is the value of a label and part of a Lease's name: checked before
// anything runs) and fills in the defaults: the ID from the host name, the namespace from the
// pod's, the leader election ID, --leader-elect with dynamic shards. It returns an error that
// names the flag to fix.
func (o *Options) Complete() error {
	if o.LeaderElectionID == "" {
		o.LeaderElectionID = DefaultLeaderElectionID
	}
	if o.LeaseDuration == 0 {
		o.LeaseDuration = DefaultLeaseDuration
	}
	if o.Namespace == "" {
		podNamespace := o.podNamespace
		if podNamespace == nil {
			podNamespace = func() (string, error) {
				ns, err := os.ReadFile(serviceAccountNamespace)
				return strings.TrimSpace(string(ns)), err
			}
		}
		if ns, err := podNamespace(); err == nil {
			o.Namespace = ns
		}
	}
	switch o.Shards {
	case "":
		if o.ID != "" {
			return errors.New("--shard-id needs --shards=auto")
		}
		_, err := LeaderElectionID(o.LeaderElectionID, o.Shard)
		return errors.Wrap(err, "--shard")
	case "auto":
	default:
		return errors.Errorf("--shards=%q: the only value is \"auto\"", o.Shards)
	}
	if o.Shard != "" {
		return errors.New("--shard and --shards=auto exclude each other: a replica of dynamic shards is the shard --shard-id")
	}
	o.LeaderElect = true
	if o.ID == "" {
		hostname := o.hostname
		if hostname == nil {
			hostname = os.Hostname
		}
		host, err := hostname()
		if err != nil {
			return errors.Wrap(err, "--shards=auto: no --shard-id, and no host name to take it from")
		}
		o.ID = SanitizeID(host)
	}
	if err := ValidateName(o.ID); err != nil {
		return errors.Wrap(err, "--shard-id")
	}
	if o.Namespace == "" {
		return errors.New("--shards=auto outside a pod: set --leader-election-namespace, where the replicas' Leases go")
	}
	if _, err := newOptions(o.options()); err != nil {
		return errors.Wrap(err, "--shard-lease-duration")
	}
	return nil
}

// options returns the functional options of the lower-level parts (Add, AddUnserved).
func (o *Options) options(extra ...Option) []Option {
	return append([]Option{WithNamespace(o.Namespace), WithLeaseDuration(o.LeaseDuration),
		WithLeaderElectionID(o.LeaderElectionID)}, extra...)
}

// ManagerOptions returns base (the manager's options, with Cache from controller.CacheOptions)
// with the shard's part set: the cache narrowed to the shard (SelectCache), the leader election
// (Lease "<shard>.<LeaderElectionID>" for a static shard, AssignerLeaderElectionID with dynamic
// shards, where every replica reconciles and only the assigner is elected, and releases its
// Lease when it stops). It returns an error when o is not valid (call Complete first).
func (o *Options) ManagerOptions(base ctrl.Options) (ctrl.Options, error) {
	var err error
	if base.Cache, err = SelectCache(base.Cache, o.Name()); err != nil {
		return base, err
	}
	base.LeaderElection = o.LeaderElect
	base.LeaderElectionNamespace = o.Namespace
	if o.Auto() {
		base.LeaderElectionID = AssignerLeaderElectionID
		base.LeaderElectionReleaseOnCancel = true
		base.Controller.NeedLeaderElection = ptr.To(false)
		return base, nil
	}
	base.LeaderElectionID, err = LeaderElectionID(o.LeaderElectionID, o.Shard)
	return base, err
}

// ControllerOptions returns the controller options of every Controller of the manager (give
// them to controller.Setup): the shard's owner filter (InShard), the hand-over (HandOver, with
// mgr's client) for a sharded manager, and Options.NamespacedReferences, so that the informers of
// referenced objects hold the namespaces of the shard's owners only.
func (o *Options) ControllerOptions(mgr ctrl.Manager) controller.Options {
	opts := controller.Options{OwnerFilter: InShard(o.Name())}
	if o.Name() != "" {
		opts.Wrappers = []controller.ReconcilerWrapper{HandOver(mgr.GetClient(), o.Name())}
		opts.NamespacedReferences = true
	}
	return opts
}

// Add adds the shard's runnables to mgr: with dynamic shards, the replica's Member and the
// Assigner of components' owners (Add); in every mode, the check of owners whose shard no
// manager serves (AddUnserved), when o has a namespace for the Leases (without one it adds
// nothing for it and says so in mgr's log). extra are given to both (WithWatchNamespaces). It
// returns an error when a part cannot be set up.
func (o *Options) Add(mgr ctrl.Manager, components []controller.Component, extra ...Option) error {
	if o.Auto() {
		if err := Add(mgr, o.ID, components, o.options(extra...)...); err != nil {
			return err
		}
	}
	if o.Namespace == "" {
		mgr.GetLogger().WithName("shard").Info("not checking for owners of shards that no manager serves: no namespace " +
			"for the Leases (set --leader-election-namespace)")
		return nil
	}
	return AddUnserved(mgr, components, o.options(append([]Option{WithOwnShard(o.Name())}, extra...)...)...)
}

// newLeases returns the Lease client of mgr's config.
func newLeases(mgr ctrl.Manager) (coordinationv1client.LeasesGetter, error) {
	c, err := coordinationv1client.NewForConfigAndClient(mgr.GetConfig(), mgr.GetHTTPClient())
	return c, errors.Wrap(err, "shard: the Lease client")
}
