package shard

import (
	"time"

	"github.com/pkg/errors"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Defaults of the Options.
const (
	// DefaultGroup is the value of the member Leases' kdag.dev/shard-member label and the prefix
	// of their names.
	DefaultGroup = "kdag"
	// DefaultLeaseDuration is how long a member Lease stays live after its last renewal, as
	// controller-runtime's leader election Lease.
	DefaultLeaseDuration = 15 * time.Second
	// DefaultLeaderElectionID is the leader election ID of kdag's unsharded manager: the Lease of
	// static shard NAME is "NAME.<it>" (LeaderElectionID).
	DefaultLeaderElectionID = "kdag.kdag.dev"
)

// Option is an optional setting of Add (and NewMember, NewAssigner). Each With… function says
// the default.
type Option interface {
	applyTo(*options)
}

type optionFunc func(*options)

func (f optionFunc) applyTo(o *options) { f(o) }

// options are the settings of a replica's membership and of the assigner.
type options struct {
	namespace       string
	group           string
	leaseDuration   time.Duration
	watchNamespaces []string
	leaderElection  string           // the unsharded manager's leader election ID
	own             string           // the manager's own shard (WithOwnShard)
	now             func() time.Time // the clock the assigner judges Leases by
}

// WithNamespace sets the namespace of the member Leases: the operator's own, where its leader
// election Lease is. Required: Add returns an error without it.
func WithNamespace(namespace string) Option {
	return optionFunc(func(o *options) { o.namespace = namespace })
}

// WithGroup sets the group of replicas that share owners: the value of the member Leases'
// kdag.dev/shard-member label and their name prefix ("<group>-shard-<id>"), so that two
// operators in one namespace keep apart. It must be a DNS-1123 label. Default: DefaultGroup.
func WithGroup(group string) Option {
	return optionFunc(func(o *options) { o.group = group })
}

// WithLeaseDuration sets how long a member Lease stays live after its last renewal: a replica
// that stops renewing loses its owners to the others that long after its last renewal. The
// replica renews every fifth of it and stops itself (fences) when it has not renewed for two
// thirds of it, so that it no longer writes when the Lease expires. Whole seconds (a Lease counts
// in seconds), at least 1 s. Default: DefaultLeaseDuration.
func WithLeaseDuration(d time.Duration) Option {
	return optionFunc(func(o *options) { o.leaseDuration = d })
}

// WithWatchNamespaces limits the owners the assigner assigns to those in namespaces, as the
// manager's cache is (ctrl.Options.Cache.DefaultNamespaces). Default: all namespaces.
func WithWatchNamespaces(namespaces ...string) Option {
	return optionFunc(func(o *options) { o.watchNamespaces = append([]string(nil), namespaces...) })
}

// WithLeaderElectionID sets the leader election ID of the operator's unsharded manager, whose
// static shards' managers elect on the Leases LeaderElectionID(id, shard) in the
// namespace of WithNamespace: Unserved reads them to tell which static shards run. Default:
// DefaultLeaderElectionID.
func WithLeaderElectionID(id string) Option {
	return optionFunc(func(o *options) { o.leaderElection = id })
}

// WithOwnShard tells the check of unserved shards (NewUnserved) the shard of the manager it runs
// in, which it counts as served whatever the Leases say. Default: "", the unsharded manager.
func WithOwnShard(shard string) Option {
	return optionFunc(func(o *options) { o.own = shard })
}

// newOptions applies opts over the defaults and returns an error when the result cannot work.
func newOptions(opts []Option) (options, error) {
	o := options{group: DefaultGroup, leaseDuration: DefaultLeaseDuration, leaderElection: DefaultLeaderElectionID, now: time.Now}
	for _, opt := range opts {
		opt.applyTo(&o)
	}
	if o.namespace == "" {
		return o, errors.New("shard: no namespace for the member Leases (WithNamespace, kdag's --leader-election-namespace)")
	}
	if msgs := validation.IsDNS1123Label(o.group); len(msgs) > 0 {
		return o, errors.Errorf("shard: group %q is not a DNS-1123 label: %v", o.group, msgs)
	}
	if msgs := validation.IsDNS1123Subdomain(o.leaderElection); len(msgs) > 0 {
		return o, errors.Errorf("shard: leader election ID %q is not a valid Lease name: %v", o.leaderElection, msgs)
	}
	if o.leaseDuration < time.Second || o.leaseDuration%time.Second != 0 {
		return o, errors.Errorf("shard: Lease duration %s is not a whole number of seconds of at least 1s", o.leaseDuration)
	}
	return o, nil
}

// renewInterval is how often a member renews its Lease.
func (o options) renewInterval() time.Duration { return o.leaseDuration / 5 }

// renewDeadline is how long a member goes without a renewal before it stops itself: a third of
// the Lease duration before the Lease expires, for in-flight writes to end and for clock skew.
func (o options) renewDeadline() time.Duration { return o.leaseDuration * 2 / 3 }

// electorRenewDeadline is the leader elector's RenewDeadline: a renewal round starts a retry
// period after the last success and gives up after this, so that the member stops by
// renewDeadline after its last renewal that succeeded.
func (o options) electorRenewDeadline() time.Duration { return o.renewDeadline() - o.renewInterval() }

// leaseName returns the name of the member Lease of replica id: "<group>-shard-<id>".
func (o options) leaseName(id string) string { return o.group + "-shard-" + id }
