package shard

import (
	"context"
	"time"

	"github.com/go-logr/logr"
	"github.com/pkg/errors"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crlog "sigs.k8s.io/controller-runtime/pkg/log"

	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/controller"
)

// Member keeps one replica's membership Lease ("<group>-shard-<id>" in the operator's namespace)
// renewed while the replica runs, so that the assigner counts the replica among the live shards.
// It is not a lock: every replica holds its own Lease. It is a manager.Runnable that every
// replica runs (NeedLeaderElection is false); its Start returns an error, which stops the
// manager, when the Lease has not been renewed for the renew deadline (two thirds of the Lease
// duration): a replica that may have lost its Lease stops reconciling before the assigner can
// give its owners to others (fencing).
type Member struct {
	id     string
	client client.Client // writes the Lease
	reader client.Reader // reads it from the API server, not a cache
	o      options
	log    logr.Logger
}

// NewMember returns the Member of replica id (a valid shard name, controller.ValidateShard),
// writing its Lease with c and reading it with r (a manager's GetClient and GetAPIReader). It
// returns an error when id or an option is invalid (options.go says which are required).
func NewMember(id string, c client.Client, r client.Reader, opts ...Option) (*Member, error) {
	o, err := newOptions(opts)
	if err != nil {
		return nil, err
	}
	if id == "" {
		return nil, errors.New("shard: a member needs an ID (kdag's --shard-id)")
	}
	if err := controller.ValidateShard(id); err != nil {
		return nil, errors.Wrap(err, "shard: member ID")
	}
	return &Member{id: id, client: c, reader: r, o: o, log: crlog.Log}, nil
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
// still be running). It returns an error when no renewal has succeeded for the renew deadline,
// counted from Start for the first one.
func (m *Member) Start(ctx context.Context) error {
	m.log = runLogger(ctx, m.log).WithName("shard-member").WithValues("shard", m.id)
	var lease *coordinationv1.Lease
	last := time.Now() // the last renewal that succeeded, as of when it was sent
	var lastErr error
	for {
		sent := time.Now()
		deadline := last.Add(m.o.renewDeadline())
		rctx, cancel := context.WithDeadline(ctx, deadline)
		l, err := m.renew(rctx, lease, sent)
		cancel()
		switch {
		case ctx.Err() != nil:
			return nil
		case err == nil:
			lease, last, lastErr = l, sent, nil
		default:
			lease, lastErr = nil, err // read it again: it may have been changed or deleted
			m.log.Info("could not renew the member Lease", "error", err.Error())
		}
		wait := m.o.renewInterval()
		if lastErr != nil {
			if !time.Now().Before(deadline) {
				return errors.Wrapf(lastErr, "shard %s: member Lease %s/%s not renewed for %s; stopping, so that its owners "+
					"can move to other replicas when it expires", m.id, m.o.namespace, m.o.leaseName(m.id), time.Since(last).Round(time.Millisecond))
			}
			wait = min(wait, time.Until(deadline))
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
	}
}

// renew writes the Lease, live from now: lease is the last one written, or nil to read it (and
// create it when it does not exist).
func (m *Member) renew(ctx context.Context, lease *coordinationv1.Lease, now time.Time) (*coordinationv1.Lease, error) {
	t := metav1.NewMicroTime(now)
	if lease == nil {
		lease = &coordinationv1.Lease{}
		err := m.reader.Get(ctx, client.ObjectKey{Namespace: m.o.namespace, Name: m.o.leaseName(m.id)}, lease)
		if apierrors.IsNotFound(err) {
			lease = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{
				Namespace: m.o.namespace, Name: m.o.leaseName(m.id),
				Labels: map[string]string{kdagv1alpha1.LabelShardMember: m.o.group},
			}}
			m.fill(lease, t)
			return lease, errors.Wrapf(m.client.Create(ctx, lease), "create Lease %s/%s", lease.Namespace, lease.Name)
		}
		if err != nil {
			return nil, errors.Wrapf(err, "get Lease %s/%s", m.o.namespace, m.o.leaseName(m.id))
		}
	}
	l := lease.DeepCopy()
	if l.Labels == nil {
		l.Labels = map[string]string{}
	}
	l.Labels[kdagv1alpha1.LabelShardMember] = m.o.group
	m.fill(l, t)
	return l, errors.Wrapf(m.client.Update(ctx, l), "update Lease %s/%s", l.Namespace, l.Name)
}

// fill sets lease's spec: held by the member, renewed at now.
func (m *Member) fill(lease *coordinationv1.Lease, now metav1.MicroTime) {
	if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity != m.id || lease.Spec.AcquireTime == nil {
		lease.Spec.AcquireTime = &now
	}
	lease.Spec.HolderIdentity = ptr.To(m.id)
	lease.Spec.LeaseDurationSeconds = ptr.To(int32(m.o.leaseDuration / time.Second))
	lease.Spec.RenewTime = &now
}

// expiry returns when lease stops being live: its renew time plus its duration; the zero time
// when it has neither.
func expiry(lease *coordinationv1.Lease) time.Time {
	if lease.Spec.RenewTime == nil || lease.Spec.LeaseDurationSeconds == nil {
		return time.Time{}
	}
	return lease.Spec.RenewTime.Add(time.Duration(*lease.Spec.LeaseDurationSeconds) * time.Second)
}
