package shard

import (
	"context"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/pkg/errors"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	crlog "sigs.k8s.io/controller-runtime/pkg/log"

	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
)

// Member keeps one replica's membership Lease ("<group>-shard-<id>" in the operator's namespace)
// renewed while the replica runs, so that the assigner counts the replica among the live shards.
// It is not a lock shared with others: every replica holds its own Lease, with client-go's
// leader election (tools/leaderelection) as the one candidate of that Lease. It is a
// manager.Runnable that every replica runs (NeedLeaderElection is false); its Start returns an
// error, which stops the manager, when the Lease could not be renewed in time (the elector's
// renew deadline): a replica that may have lost its Lease stops reconciling before the assigner
// can give its owners to others (fencing).
type Member struct {
	id     string
	leases coordinationv1client.LeasesGetter
	o      options
	// log is the logger when Start's context carries none (runLogger): the manager's (Add), or
	// controller-runtime's global one (NewMember).
	log logr.Logger
}

// NewMember returns the Member of replica id (a valid shard name, ValidateName), writing its
// Lease with leases (coordinationv1client.NewForConfigAndClient of the manager's config and HTTP
// client, or a clientset's CoordinationV1()). It returns an error when id or an option is invalid
// (options.go says which are required).
func NewMember(id string, leases coordinationv1client.LeasesGetter, opts ...Option) (*Member, error) {
	o, err := newOptions(opts)
	if err != nil {
		return nil, err
	}
	if id == "" {
		return nil, errors.New("shard: a member needs an ID (kdag's --shard-id)")
	}
	if err := ValidateName(id); err != nil {
		return nil, errors.Wrap(err, "shard: member ID")
	}
	if leases == nil {
		return nil, errors.New("shard: a member needs a Lease client")
	}
	return &Member{id: id, leases: leases, o: o, log: crlog.Log}, nil
}

// runLogger returns the logger of ctx, or fallback when ctx carries none: a controller-runtime
// manager starts its runnables with a context without a logger, so the Member, Assigner and
// Unserved fall back to the manager's logger (Add, NewAssigner, NewUnserved) or, for a Member
// made with NewMember, to controller-runtime's global logger (ctrl.SetLogger).
func runLogger(ctx context.Context, fallback logr.Logger) logr.Logger {
	if l, err := logr.FromContext(ctx); err == nil {
		return l
	}
	return fallback
}

// ID returns the replica's ID, the name of its shard.
func (m *Member) ID() string { return m.id }

// NeedLeaderElection implements manager.LeaderElectionRunnable: every replica is a member.
func (m *Member) NeedLeaderElection() bool { return false }

// Start creates or takes over the Lease and renews it every fifth of the Lease duration until ctx
// is done (then it returns nil, and leaves the Lease to expire: the replica's reconciles may
// still be running). It returns an error when the Lease was not held within the renew deadline of
// Start, or when a renewal did not succeed within the renew deadline: in both cases before two
// thirds of the Lease duration have passed since the last renewal that succeeded.
func (m *Member) Start(ctx context.Context) error {
	log := runLogger(ctx, m.log).WithName("shard-member").WithValues("shard", m.id)
	name := m.o.leaseName(m.id)
	held := make(chan struct{})
	var once sync.Once
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Namespace: m.o.namespace, Name: name},
			Client:     m.leases,
			LockConfig: resourcelock.ResourceLockConfig{Identity: m.id},
			Labels:     map[string]string{kdagv1alpha1.LabelShardMember: m.o.group},
		},
		LeaseDuration: m.o.leaseDuration,
		RenewDeadline: m.o.electorRenewDeadline(),
		RetryPeriod:   m.o.renewInterval(),
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(context.Context) { once.Do(func() { close(held) }) },
			OnStoppedLeading: func() {},
		},
		Name: name,
	})
	if err != nil {
		return errors.Wrapf(err, "shard %s: member Lease %s/%s", m.id, m.o.namespace, name)
	}
	ectx, cancel := context.WithCancel(ctx)
	defer cancel()
	ran := make(chan struct{})
	go func() {
		defer close(ran)
		elector.Run(ectx)
	}()
	select {
	case <-held:
		log.V(1).Info("holding the member Lease", "lease", m.o.namespace+"/"+name)
	case <-ran:
	case <-ctx.Done():
	case <-time.After(m.o.renewDeadline()):
		cancel()
		<-ran
		if ctx.Err() != nil {
			return nil
		}
		return errors.Errorf("shard %s: member Lease %s/%s not held within %s of the start; stopping, so that no owner "+
			"is given to a replica that cannot say it is alive", m.id, m.o.namespace, name, m.o.renewDeadline())
	}
	<-ran
	if ctx.Err() != nil {
		return nil
	}
	return errors.Errorf("shard %s: member Lease %s/%s not renewed within %s; stopping, so that its owners can move to "+
		"other replicas when it expires", m.id, m.o.namespace, name, m.o.electorRenewDeadline())
}

// expiry returns when lease stops being live: its renew time plus its duration; the zero time
// when it has neither.
func expiry(lease *coordinationv1.Lease) time.Time {
	if lease.Spec.RenewTime == nil || lease.Spec.LeaseDurationSeconds == nil {
		return time.Time{}
	}
	return lease.Spec.RenewTime.Add(time.Duration(*lease.Spec.LeaseDurationSeconds) * time.Second)
}
