package shard

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/pkg/errors"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/controller"
	"github.com/kdag-dev/kdag/pkg/metrics"
)

// ReasonShardNotServed is the reason of the Warning event Unserved records on an owner whose
// kdag.dev/shard label names a shard that no running manager serves.
const ReasonShardNotServed = "ShardNotServed"

// Defaults of Unserved.
const (
	// unservedInterval is how often Unserved looks at every owner without an event.
	unservedInterval = 30 * time.Second
	// unservedGrace is how long an owner stays unserved before it counts (event and gauge): a
	// dead replica's owners wait a Lease duration and an assigner's pass before they move, and a
	// static shard's new manager takes a while to start and win its election.
	unservedGrace = 30 * time.Second
	// unservedMinGap is the least time between two looks, however many owner events come.
	unservedMinGap = time.Second
)

// Unserved finds the owners that no manager reconciles because their kdag.dev/shard label names
// a shard that no running manager serves (a typo, a shard whose Deployment was never deployed or
// was removed), and says so: a Warning event ReasonShardNotServed on each such owner, once per
// owner and label value, and the gauge kdag_owners_unserved{kind} (metrics.Metrics). A shard is
// served when one of the Leases in the namespace of WithNamespace is live (renewed within its
// own duration, with a holder):
//
//   - the leader election Lease of its static shard's managers, LeaderElectionID of
//     WithLeaderElectionID and the shard ("tenants-a.kdag.kdag.dev"), or
//   - the member Lease of its dynamic shard's replica ("<group>-shard-<id>", as Member writes it);
//
// the shard of the manager Unserved runs in counts as served too (a manager without leader
// election has no Lease). Owners without the label are not looked at: the unsharded manager or
// the assigner takes them. An owner counts only after it has been unserved for unservedGrace,
// so that the owners of a replica that just died, which the assigner moves within a Lease
// duration, or of a shard whose manager is starting, do not count.
//
// It watches the metadata of the owners of every component type in every shard (a cache of its
// own, as the Assigner's), looks at them on every owner event (at most once a second) and every
// unservedInterval, and reads the Leases from the API server at each look. It is a
// manager.Runnable for one replica at a time (NeedLeaderElection is true): each manager that
// runs it (each static shard's leader, the assigner's replica with dynamic shards) reports on
// every owner, so the events of an owner come from each of them, and each exposes the gauge.
// Without leader election, the managers have no Lease, and Unserved takes the shards of the
// others for unserved.
type Unserved struct {
	cfg        *rest.Config
	httpClient *http.Client
	scheme     *runtime.Scheme
	mapper     meta.RESTMapper
	reader     client.Reader // reads the Leases from the API server
	recorder   recorder.EventRecorder
	metrics    *metrics.Metrics
	gvks       []schema.GroupVersionKind
	own        string // the shard of the manager it runs in
	o          options
	log        logr.Logger

	interval, grace, minGap time.Duration
	leaseErr                bool // the last look could not read the Leases: said once
	// unserved holds, per owner kind, the owners seen unserved: since when, with which label,
	// and whether the event was recorded.
	unserved map[schema.GroupVersionKind]map[types.UID]sighting
}

// sighting is an owner seen unserved.
type sighting struct {
	shard  string
	since  time.Time
	warned bool
}

// NewUnserved returns the Unserved of the owners of components (the manager's own; its shard,
// WithOwnShard, counts as served), for mgr's API server, scheme and REST mapper, recording events with
// mgr's recorder and the gauge on controller-runtime's metrics registry. WithNamespace is
// required (where the Leases are); WithGroup, WithLeaderElectionID, WithOwnShard and
// WithWatchNamespaces apply. It returns an error when an option is invalid or a component's owner type is not in
// mgr's scheme.
func NewUnserved(mgr ctrl.Manager, components []controller.Component, opts ...Option) (*Unserved, error) {
	o, err := newOptions(opts)
	if err != nil {
		return nil, err
	}
	u := &Unserved{
		cfg: mgr.GetConfig(), httpClient: mgr.GetHTTPClient(), scheme: mgr.GetScheme(), mapper: mgr.GetRESTMapper(),
		reader: mgr.GetAPIReader(), recorder: mgr.GetEventRecorder("kdag-shard"), metrics: metrics.Register(ctrlmetrics.Registry),
		o: o, log: mgr.GetLogger(), interval: unservedInterval, grace: unservedGrace, minGap: unservedMinGap,
		unserved: map[schema.GroupVersionKind]map[types.UID]sighting{},
	}
	seen := map[schema.GroupVersionKind]bool{}
	for _, comp := range components {
		gvk, err := apiutil.GVKForObject(comp.NewOwner(), mgr.GetScheme())
		if err != nil {
			return nil, errors.Wrapf(err, "shard: owner type of component %s", comp.Name())
		}
		if !seen[gvk] {
			seen[gvk] = true
			u.gvks = append(u.gvks, gvk)
		}
	}
	u.own = o.own
	return u, nil
}

// AddUnserved adds NewUnserved's Unserved to mgr. It returns NewUnserved's errors.
func AddUnserved(mgr ctrl.Manager, components []controller.Component, opts ...Option) error {
	u, err := NewUnserved(mgr, components, opts...)
	if err != nil {
		return err
	}
	return errors.Wrap(mgr.Add(u), "shard: add the check of unserved shards")
}

// NeedLeaderElection implements manager.LeaderElectionRunnable: one per manager's election.
func (u *Unserved) NeedLeaderElection() bool { return true }

// Start looks at the owners until ctx is done (then it returns nil). It returns an error when
// its cache cannot be set up or stops on its own.
func (u *Unserved) Start(ctx context.Context) error {
	u.log = runLogger(ctx, u.log).WithName("shard-unserved")
	var namespaces map[string]cache.Config
	if len(u.o.watchNamespaces) > 0 {
		namespaces = map[string]cache.Config{}
		for _, ns := range u.o.watchNamespaces {
			namespaces[ns] = cache.Config{}
		}
	}
	c, err := cache.New(u.cfg, cache.Options{HTTPClient: u.httpClient, Scheme: u.scheme, Mapper: u.mapper, DefaultNamespaces: namespaces})
	if err != nil {
		return errors.Wrap(err, "shard: the cache of the check of unserved shards")
	}
	objs := make([]client.Object, 0, len(u.gvks))
	for _, gvk := range u.gvks {
		objs = append(objs, metadataOf(gvk))
	}
	return passLoop(ctx, c, objs, "check of unserved shards", u.minGap, u.pass)
}

// pass looks at every owner once, as c (Unserved's cache) lists them, against the shards the
// Leases say are served; it records the events and sets the gauge. It returns how soon to look
// again: the interval, or sooner when an owner's grace ends before.
func (u *Unserved) pass(ctx context.Context, c client.Reader) time.Duration {
	now := u.o.now()
	next := u.interval
	var leases coordinationv1.LeaseList
	if err := u.reader.List(ctx, &leases, client.InNamespace(u.o.namespace)); err != nil {
		if !u.leaseErr {
			u.log.Info("could not list the Leases, so cannot tell which shards are served; the owners are not checked until it can",
				"namespace", u.o.namespace, "error", err.Error())
		}
		u.leaseErr = true
		return next
	}
	u.leaseErr = false
	served := servedShards(leases.Items, u.o, now)
	if u.own != "" {
		served[u.own] = true // this manager's shard: it runs
	}
	for _, gvk := range u.gvks {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err := c.List(ctx, list); err != nil {
			u.log.Info("could not list owners", "kind", gvk.Kind, "error", err.Error())
			continue
		}
		before, after := u.unserved[gvk], map[types.UID]sighting{}
		count := 0
		for i := range list.Items {
			owner := &list.Items[i]
			shard, labelled := owner.Labels[kdagv1alpha1.LabelShard]
			if !labelled || served[shard] {
				continue
			}
			s, ok := before[owner.UID]
			if !ok || s.shard != shard {
				s = sighting{shard: shard, since: now}
			}
			if due := s.since.Add(u.grace); due.After(now) {
				next = min(next, due.Sub(now)+10*time.Millisecond)
			} else {
				count++
				if !s.warned {
					owner.SetGroupVersionKind(gvk)
					u.warn(owner, shard)
					s.warned = true
				}
			}
			after[owner.UID] = s
		}
		u.unserved[gvk] = after
		u.metrics.SetOwnersUnserved(gvk.Kind, count)
	}
	return next
}

// warn records the Warning event on owner, unserved in shard: what is wrong and what to do.
func (u *Unserved) warn(owner *metav1.PartialObjectMetadata, shard string) {
	target := strings.ToLower(owner.Kind) + " " + owner.Name
	if owner.Namespace != "" {
		target += " -n " + owner.Namespace
	}
	why := fmt.Sprintf(", and none can: %q is not a valid shard name", shard)
	if id, err := LeaderElectionID(u.o.leaderElection, shard); err == nil && shard != "" {
		why = fmt.Sprintf(" (no live Lease %s/%s of its managers (--shard=%s) or %s/%s of a replica (--shards=auto))",
			u.o.namespace, id, shard, u.o.namespace, u.o.leaseName(shard))
	}
	u.log.Info("an owner's shard is served by no manager", "kind", owner.Kind, "owner", client.ObjectKeyFromObject(owner).String(),
		"shard", shard)
	u.recorder.Eventf(owner, nil, corev1.EventTypeWarning, ReasonShardNotServed, "CheckShard",
		"%s=%s names a shard that no running manager serves%s, so nothing reconciles this %s. Fix the label "+
			"(kubectl label %s %s=NAME --overwrite), remove it for the unsharded manager or the assigner (kubectl label %s %s-), "+
			"or run a manager of the shard", kdagv1alpha1.LabelShard, shard, why, owner.Kind, target, kdagv1alpha1.LabelShard,
		target, kdagv1alpha1.LabelShard)
}

// servedShards returns the shards that leases (those of the namespace of o) say are served at
// now: the static shards whose leader election Lease (LeaderElectionID of o's ID and
// the shard) is live, and the dynamic shards whose member Lease is. A Lease is live when it has
// a holder and was renewed within its duration. The unsharded manager's and the assigner's
// Leases name no shard.
func servedShards(leases []coordinationv1.Lease, o options, now time.Time) map[string]bool {
	served := map[string]bool{}
	suffix := "." + o.leaderElection
	for i := range leases {
		l := &leases[i]
		holder := ptr.Deref(l.Spec.HolderIdentity, "")
		if holder == "" || !expiry(l).After(now) {
			continue
		}
		switch {
		case l.Labels[kdagv1alpha1.LabelShardMember] == o.group && l.Name == o.leaseName(holder):
			served[holder] = true
		case l.Name == AssignerLeaderElectionID:
		case strings.HasSuffix(l.Name, suffix):
			if shard := strings.TrimSuffix(l.Name, suffix); ValidateName(shard) == nil {
				served[shard] = true
			}
		}
	}
	return served
}
