package shard

import (
	"cmp"
	"context"
	"maps"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/pkg/errors"
	"golang.org/x/sync/errgroup"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/controller"
)

// retryAfter is how soon the assigner looks again at owners it could not move (a write refused,
// a Lease that looked expired in its cache but was renewed on the API server).
const retryAfter = time.Second

// Assigner gives every dynamically sharded owner to one live member: the member the Ring of
// live member Leases assigns its "namespace/name" to. It watches the metadata of the owners of
// every component type (all shards, in a cache of its own, since the manager's cache holds one
// shard) and the member Leases, and after any change looks at every owner again:
//
//   - an owner without a kdag.dev/shard label is labelled with its member;
//   - an owner of a shard whose Lease expired is relabelled to its member (after a read of the
//     Lease from the API server confirms the expiry);
//   - an owner of a live shard that is not its member gets kdag.dev/shard-next naming its
//     member, and its current replica hands it over (pkg/controller's Reconcile);
//   - an owner being deleted is left to its replica while that replica lives (it tears the owner
//     down; no hand-over is asked), and relabelled as above when its shard has no live Lease (or
//     it has no shard), so that a live replica runs its teardown;
//   - statically sharded owners (a kdag.dev/shard label without a matching
//     kdag.dev/shard-assigned annotation) are left alone, and so are child owners (they carry
//     kdag.dev/controller: their parent's apply sets their shard) while the cache holds their
//     parent and they are not being deleted; an orphaned child (its parent gone) is placed as a
//     dynamic owner, its label counting as assigned when it has no kdag.dev/shard-assigned
//     (its parent set it), and so is a child being deleted whose parent is dynamic (no apply of
//     the parent moves it any more).
//
// Every write is a merge patch conditional on the owner's resourceVersion. A pass writes
// moveWorkers owners at once, the most urgent first: owners being deleted that no live replica
// serves, then the other owners no live replica serves, then the hand-overs. It is a
// manager.Runnable for one replica at a time (NeedLeaderElection is true): run the replicas'
// managers with leader election.
type Assigner struct {
	cfg        *rest.Config
	httpClient *http.Client
	scheme     *runtime.Scheme
	mapper     meta.RESTMapper
	writer     client.Client // patches owners
	reader     client.Reader // reads Leases from the API server
	gvks       []schema.GroupVersionKind
	// controllers maps each component's name (the kdag.dev/controller label of what it applies)
	// to its owner type: the kind of a child owner's parent.
	controllers map[string]schema.GroupVersionKind
	o           options
	log         logr.Logger
}

// NewAssigner returns the Assigner of the owners of components, for mgr's API server, scheme and
// REST mapper. It returns an error when an option is invalid or a component's owner type is not
// in mgr's scheme.
func NewAssigner(mgr ctrl.Manager, components []controller.Component, opts ...Option) (*Assigner, error) {
	o, err := newOptions(opts)
	if err != nil {
		return nil, err
	}
	a := &Assigner{
		cfg: mgr.GetConfig(), httpClient: mgr.GetHTTPClient(), scheme: mgr.GetScheme(), mapper: mgr.GetRESTMapper(),
		writer: mgr.GetClient(), reader: mgr.GetAPIReader(), o: o, log: mgr.GetLogger(),
		controllers: map[string]schema.GroupVersionKind{},
	}
	seen := map[schema.GroupVersionKind]bool{}
	for _, comp := range components {
		gvk, err := apiutil.GVKForObject(comp.NewOwner(), mgr.GetScheme())
		if err != nil {
			return nil, errors.Wrapf(err, "shard: owner type of component %s", comp.Name())
		}
		a.controllers[comp.Name()] = gvk
		if !seen[gvk] {
			seen[gvk] = true
			a.gvks = append(a.gvks, gvk)
		}
	}
	return a, nil
}

// NeedLeaderElection implements manager.LeaderElectionRunnable: one assigner at a time.
func (a *Assigner) NeedLeaderElection() bool { return true }

// Start runs the assigner until ctx is done (then it returns nil). It returns an error when its
// cache cannot be set up or stops on its own.
func (a *Assigner) Start(ctx context.Context) error {
	a.log = runLogger(ctx, a.log).WithName("shard-assigner")
	c, err := a.newCache()
	if err != nil {
		return err
	}
	objs := []client.Object{&coordinationv1.Lease{}}
	for _, gvk := range a.gvks {
		objs = append(objs, metadataOf(gvk))
	}
	return passLoop(ctx, c, objs, "assigner", 0, a.pass)
}

// newCache returns the assigner's cache: the member Leases of its group in its namespace, and
// the owners' metadata (added by Start) in the watched namespaces.
func (a *Assigner) newCache() (cache.Cache, error) {
	var namespaces map[string]cache.Config
	if len(a.o.watchNamespaces) > 0 {
		namespaces = map[string]cache.Config{}
		for _, ns := range a.o.watchNamespaces {
			namespaces[ns] = cache.Config{}
		}
	}
	c, err := cache.New(a.cfg, cache.Options{
		HTTPClient: a.httpClient, Scheme: a.scheme, Mapper: a.mapper, DefaultNamespaces: namespaces,
		ByObject: map[client.Object]cache.ByObject{&coordinationv1.Lease{}: {
			Namespaces: map[string]cache.Config{a.o.namespace: {}},
			Label:      labels.SelectorFromSet(labels.Set{kdagv1alpha1.LabelShardMember: a.o.group}),
		}},
	})
	return c, errors.Wrap(err, "shard: the assigner's cache")
}

// metadataOf returns an empty PartialObjectMetadata of gvk.
func metadataOf(gvk schema.GroupVersionKind) *metav1.PartialObjectMetadata {
	o := &metav1.PartialObjectMetadata{}
	o.SetGroupVersionKind(gvk)
	return o
}

// pass looks at every owner once, as c (the assigner's cache) lists them and the member Leases,
// and moves those not with their member; it deletes the member Leases expired for
// leaseCollectAfter of their durations (collect). It returns how soon to look again without an
// event: when the first live Lease expires or the first expired one may be deleted, or
// retryAfter when a move failed.
func (a *Assigner) pass(ctx context.Context, c client.Reader) time.Duration {
	now := a.o.now()
	next := time.Hour
	var leases coordinationv1.LeaseList
	if err := c.List(ctx, &leases, client.InNamespace(a.o.namespace)); err != nil {
		a.log.Info("could not list the member Leases", "error", err.Error())
		return retryAfter
	}
	var live []string
	for i := range leases.Items {
		l := &leases.Items[i]
		id := ptr.Deref(l.Spec.HolderIdentity, "")
		if l.Name != a.o.leaseName(id) || ValidateName(id) != nil || id == "" {
			continue // not a member's
		}
		exp := expiry(l)
		switch gone := exp.Add(leaseCollectAfter * time.Duration(ptr.Deref(l.Spec.LeaseDurationSeconds, 0)) * time.Second); {
		case exp.After(now):
			live = append(live, id)
			next = min(next, exp.Sub(now)+10*time.Millisecond)
		case exp.IsZero() || l.Labels[kdagv1alpha1.LabelShardMember] != a.o.group:
		case gone.After(now):
			next = min(next, gone.Sub(now)+10*time.Millisecond)
		default:
			a.collect(ctx, l)
		}
	}
	ring := NewRing(live...)
	lists := make([]*metav1.PartialObjectMetadataList, 0, len(a.gvks))
	byUID := map[types.UID]*metav1.PartialObjectMetadata{} // every owner, for the parent lookup
	complete := true
	for _, gvk := range a.gvks {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err := c.List(ctx, list); err != nil {
			a.log.Info("could not list owners", "kind", gvk.Kind, "error", err.Error())
			next = min(next, retryAfter)
			complete = false
			continue
		}
		for i := range list.Items {
			list.Items[i].SetGroupVersionKind(gvk)
			byUID[list.Items[i].UID] = &list.Items[i]
		}
		lists = append(lists, list)
	}
	parents := a.parents(byUID, now, &next)
	if !complete { // a parent may be in a list that failed: no child is taken for an orphan
		parents = func(metav1.Object) (metav1.Object, bool) { return nil, false }
	}
	var todo []pendingMove
	for _, list := range lists {
		for i := range list.Items {
			owner := &list.Items[i]
			if mv, ok := decide(owner, ring, parents); ok {
				todo = append(todo, pendingMove{owner: owner, mv: mv})
			}
		}
	}
	if a.runMoves(ctx, todo, now) {
		next = min(next, retryAfter)
	}
	return next
}

// moveWorkers is how many owners the assigner moves at once. A pass after a replica dies or
// joins moves a third of the owners or more, one patch each: one at a time, a busy API server's
// latency adds up to minutes (300 owners at 0.5 s a patch), and an owner being deleted on a dead
// replica waits behind all of them.
const moveWorkers = 8

// pendingMove is one owner a pass moves.
type pendingMove struct {
	owner *metav1.PartialObjectMetadata
	mv    move
}

// urgency orders a pass's moves: first the owners no live replica serves that are being
// deleted (they block their namespace until a live replica tears them down), then the other
// owners no live replica serves (unlabelled, or of a dead replica), then the hand-overs asked of
// live replicas and their withdrawals, which only balance the load.
func (p pendingMove) urgency() int {
	switch {
	case p.mv.kind == moveLabel && p.owner.GetDeletionTimestamp() != nil:
		return 0
	case p.mv.kind == moveLabel:
		return 1
	default:
		return 2
	}
}

// runMoves writes todo, the most urgent first, moveWorkers at a time, and reports whether any
// failed (the pass then looks again after retryAfter). Before it takes owners from a shard
// without a live Lease, it reads that shard's Lease from the API server, once per shard, and
// leaves the shard's owners when the Lease is live after all.
func (a *Assigner) runMoves(ctx context.Context, todo []pendingMove, now time.Time) (failed bool) {
	slices.SortStableFunc(todo, func(x, y pendingMove) int { return cmp.Compare(x.urgency(), y.urgency()) })
	confirmed := map[string]error{} // shard → nil when its Lease is expired on the API server too
	for _, p := range todo {
		if p.mv.kind == moveLabel && p.mv.from != "" {
			if _, ok := confirmed[p.mv.from]; !ok {
				confirmed[p.mv.from] = a.confirmDead(ctx, p.mv.from, now)
			}
		}
	}
	var mu sync.Mutex
	var g errgroup.Group
	g.SetLimit(moveWorkers)
	for _, p := range todo {
		g.Go(func() error {
			err := confirmed[p.mv.from]
			if p.mv.kind != moveLabel || p.mv.from == "" {
				err = nil
			}
			if err == nil {
				err = a.move(ctx, p.owner, p.mv)
			}
			if err != nil {
				a.log.Info("could not move an owner", "kind", p.owner.GroupVersionKind().Kind,
					"owner", client.ObjectKeyFromObject(p.owner).String(), "from", p.mv.from, "to", p.mv.to, "error", err.Error())
				mu.Lock()
				failed = true
				mu.Unlock()
			}
			return nil
		})
	}
	_ = g.Wait()
	return failed
}

// parents returns the parentLookup of a pass over owners (every owner the assigner's cache
// holds, by UID). A child owner's parent is the owner whose UID the child's kdag.dev/owner-uid
// label names, of the owner type of the component its kdag.dev/controller label names: kdag
// sets both labels on everything it applies, owner reference or not (a kept child has none). A
// child whose parent is not in owners is an orphan (its parent was deleted with
// --cascade=orphan, or the child was detached) once it is older than the Lease duration; a
// younger one may be a new child whose parent the cache has not seen yet, so the lookup cannot
// tell, and lowers *next to when the child is old enough. It cannot tell either when a label is
// missing or names a controller that is not one of the assigner's components.
func (a *Assigner) parents(owners map[types.UID]*metav1.PartialObjectMetadata, now time.Time, next *time.Duration) parentLookup {
	return func(child metav1.Object) (metav1.Object, bool) {
		lbls := child.GetLabels()
		kind, ok := a.controllers[lbls[kdagv1alpha1.LabelController]]
		uid := lbls[kdagv1alpha1.LabelOwnerUID]
		if !ok || uid == "" {
			return nil, false
		}
		if p, ok := owners[types.UID(uid)]; ok && p.GroupVersionKind() == kind {
			return p, true
		}
		if old := child.GetCreationTimestamp().Add(a.o.leaseDuration); old.After(now) {
			*next = min(*next, old.Sub(now)+10*time.Millisecond)
			return nil, false
		}
		return nil, true
	}
}

// leaseCollectAfter is how many of its own durations a member Lease stays expired before the
// assigner deletes it: long enough for every decision that reads it (the assigner's confirmation
// of an expiry reads a missing Lease as expired, too; a fenced replica stopped writing a third
// of a duration before its Lease expired), short enough that a replaced pod's Lease is gone
// within 3 Lease durations of its last renewal, as issue 29 asks (expiry after 1 duration,
// deletion after 1 more, and a duration's margin for the assigner's own takeover when it died
// with the replica).
const leaseCollectAfter = 1

// collect deletes the member Lease l, expired for leaseCollectAfter of its durations, on the
// condition that it is still the version the assigner read (a renewal since wins). A refused or
// failed delete is logged; the next pass tries again.
func (a *Assigner) collect(ctx context.Context, l *coordinationv1.Lease) {
	err := a.writer.Delete(ctx, l, client.Preconditions{UID: &l.UID, ResourceVersion: &l.ResourceVersion})
	switch {
	case apierrors.IsConflict(err) || apierrors.IsNotFound(err):
		a.log.V(1).Info("left a member Lease that changed or went since the cache read it", "lease", l.Name)
	case err != nil:
		a.log.Info("could not delete an expired member Lease", "lease", l.Namespace+"/"+l.Name, "error", err.Error())
	default:
		a.log.Info("deleted an expired member Lease", "lease", l.Namespace+"/"+l.Name, "shard", ptr.Deref(l.Spec.HolderIdentity, ""),
			"renewed", l.Spec.RenewTime.Time)
	}
}

// errStillLive says that a Lease that looked expired in the assigner's cache is live on the API
// server: the owner stays until the cache catches up.
var errStillLive = errors.New("the current shard's Lease is live on the API server")

// confirmDead reads the Lease of shard from the API server and returns nil when it is expired
// at now or missing, errStillLive when it is live after all (the assigner's cache was behind),
// or the read's error.
func (a *Assigner) confirmDead(ctx context.Context, shard string, now time.Time) error {
	l := &coordinationv1.Lease{}
	err := a.reader.Get(ctx, client.ObjectKey{Namespace: a.o.namespace, Name: a.o.leaseName(shard)}, l)
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return errors.Wrapf(err, "read the Lease of shard %s", shard)
	case expiry(l).After(now):
		return errStillLive
	}
	return nil
}

// move writes mv to owner: a merge patch conditional on the owner's resourceVersion. An owner
// deleted since is not an error.
func (a *Assigner) move(ctx context.Context, owner *metav1.PartialObjectMetadata, mv move) error {
	before := owner.DeepCopy()
	lbls, anns := maps.Clone(owner.Labels), maps.Clone(owner.Annotations)
	if lbls == nil {
		lbls = map[string]string{}
	}
	if anns == nil {
		anns = map[string]string{}
	}
	switch mv.kind {
	case moveLabel:
		lbls[kdagv1alpha1.LabelShard] = mv.to
		anns[kdagv1alpha1.AnnotationShardAssigned] = mv.to
		delete(anns, kdagv1alpha1.AnnotationShardNext)
	case moveAsk:
		anns[kdagv1alpha1.AnnotationShardNext] = mv.to
	case moveWithdraw:
		delete(anns, kdagv1alpha1.AnnotationShardNext)
	}
	owner.Labels, owner.Annotations = lbls, anns
	err := a.writer.Patch(ctx, owner, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))
	if apierrors.IsNotFound(err) {
		return nil // deleted since: nothing to move (an owner being deleted may go any moment)
	}
	if err != nil {
		return errors.Wrapf(err, "patch %s", mv.kind)
	}
	a.log.V(1).Info("moved an owner", "kind", owner.Kind, "owner", client.ObjectKeyFromObject(owner).String(),
		"action", string(mv.kind), "from", mv.from, "to", mv.to)
	return nil
}

// moveKind is what the assigner writes to an owner.
type moveKind string

const (
	// moveLabel sets the owner's shard label (and kdag.dev/shard-assigned) to the new shard and
	// removes kdag.dev/shard-next: for an owner without a shard, or of a shard without a live
	// Lease, which no replica reconciles.
	moveLabel moveKind = "label"
	// moveAsk sets kdag.dev/shard-next to the new shard: the replica of the live current shard
	// hands the owner over.
	moveAsk moveKind = "ask"
	// moveWithdraw removes a kdag.dev/shard-next that no longer names the owner's member (its
	// member is its current shard again).
	moveWithdraw moveKind = "withdraw"
)

// move is one write of the assigner: what, from which shard ("" none) to which.
type move struct {
	kind     moveKind
	from, to string
}

// parentLookup returns the owner that child's controller owner reference names, as the
// assigner's cache holds it, and true; nil and true when the cache holds no such owner (the
// parent is gone, or the child has no controller owner reference); false when it cannot tell.
type parentLookup func(child metav1.Object) (parent metav1.Object, known bool)

// decide returns what the assigner does with owner given the live members in ring and the
// owner's parent (parents, for a child owner), and false when it leaves the owner as it is (the
// rules are on Assigner).
func decide(owner metav1.Object, ring Ring, parents parentLookup) (move, bool) {
	lbls, anns := owner.GetLabels(), owner.GetAnnotations()
	current, labelled := lbls[kdagv1alpha1.LabelShard]
	assigned, dynamic := anns[kdagv1alpha1.AnnotationShardAssigned]
	deleting := owner.GetDeletionTimestamp() != nil
	if lbls[kdagv1alpha1.LabelController] != "" {
		if parents == nil {
			return move{}, false
		}
		parent, known := parents(owner)
		switch {
		case !known:
			return move{}, false
		case parent == nil:
			// An orphan: a parent set its label, and none will again; its label is the
			// assigner's, unless a user changed it after the assigner's last move.
			if labelled && !dynamic && current != "" {
				assigned, dynamic = current, true
			}
		case !deleting:
			return move{}, false // its parent's apply sets its shard
		case !isDynamic(parent):
			return move{}, false // a static shard: its manager tears the child down
		case labelled:
			// Being deleted, with a dynamic parent: no apply of the parent moves it any more,
			// so the assigner does when its replica is dead, as for the parent itself.
			assigned, dynamic = current, true
		}
	}
	if labelled && (!dynamic || assigned != current) {
		return move{}, false // a static shard
	}
	target := ring.Owner(owner.GetNamespace() + "/" + owner.GetName())
	if target == "" {
		return move{}, false // no live member
	}
	next, asked := anns[kdagv1alpha1.AnnotationShardNext]
	switch {
	case deleting && labelled && ring.Has(current):
		return move{}, false // its live replica tears it down; a deleting owner is never handed over
	case !labelled:
		return move{kind: moveLabel, to: target}, true
	case current == target:
		return move{kind: moveWithdraw, from: current, to: target}, asked
	case ring.Has(current):
		return move{kind: moveAsk, from: current, to: target}, next != target
	default:
		return move{kind: moveLabel, from: current, to: target}, true
	}
}

// isDynamic reports whether owner is the assigner's to place: it has no kdag.dev/shard label,
// or one equal to its kdag.dev/shard-assigned annotation.
func isDynamic(owner metav1.Object) bool {
	current, labelled := owner.GetLabels()[kdagv1alpha1.LabelShard]
	assigned, ok := owner.GetAnnotations()[kdagv1alpha1.AnnotationShardAssigned]
	return !labelled || ok && assigned == current
}
