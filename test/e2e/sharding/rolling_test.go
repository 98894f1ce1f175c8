package sharding

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	giteav1alpha1 "github.com/kdag-dev/kdag/apis/gitea/v1alpha1"
	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/shard"
	"github.com/kdag-dev/kdag/pkg/testing/poll"
)

const (
	// rollLease is the member Lease duration (--shard-lease-duration) of TestRollingRestart:
	// the default, what users run. With 10 s, a live replica on a 2-core machine shared with
	// other test runs missed its renew deadline (two thirds of it) whenever the API server
	// stalled for 7 s, and stopped (fencing): restarted, it worked, but each stall moved every
	// owner twice.
	rollLease = shard.DefaultLeaseDuration
	// rollFirst is how many Valkeys run before the rollout; rollNew are created and rollDeleted
	// deleted during it, rollUpdated get a new spec during it. rollFirst + rollNew = 300 owners
	// in all.
	rollFirst, rollNew, rollDeleted, rollUpdated = 200, 100, 100, 60
)

// labelAt is an owner's shard label as the test's sampler saw it at a time.
type labelAt struct {
	at    time.Time
	shard string
}

// ownerTrack is what the sampler saw of one owner: its shard labels over time, when the test
// deleted it, and when the sampler first saw it gone after that.
type ownerTrack struct {
	labels        []labelAt
	deleted, gone time.Time
}

// shardAt returns the owner's shard label at t as sampled: the last sample at or before t.
func (o *ownerTrack) shardAt(t time.Time) string {
	shard := ""
	for _, l := range o.labels {
		if l.at.After(t) {
			break
		}
		shard = l.shard
	}
	return shard
}

// sampler lists the Valkeys' metadata of one namespace and the member Leases every interval,
// and keeps, per owner, its shard labels, when the test deleted it and when it was first seen
// gone; and the member Leases' counts over time.
type sampler struct {
	mu     sync.Mutex
	owners map[string]*ownerTrack
	leases []leaseCount
}

// leaseCount is the number of member Leases at a time.
type leaseCount struct {
	at time.Time
	n  int
}

// run samples ns's Valkeys and leaseNS's member Leases until ctx is done.
func (s *sampler) run(ctx context.Context, ns, leaseNS string, interval time.Duration) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		s.sample(ctx, ns, leaseNS)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func (s *sampler) sample(ctx context.Context, ns, leaseNS string) {
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(giteav1alpha1.GroupVersion.WithKind("ValkeyList"))
	listErr := cl.List(ctx, list, client.InNamespace(ns))
	leases := &coordinationv1.LeaseList{}
	leaseErr := cl.List(ctx, leases, client.InNamespace(leaseNS), client.HasLabels{kdagv1alpha1.LabelShardMember})
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if leaseErr == nil {
		s.leases = append(s.leases, leaseCount{at: now, n: len(leases.Items)})
	}
	if listErr != nil {
		return
	}
	seen := map[string]bool{}
	for _, v := range list.Items {
		key := v.Name
		seen[key] = true
		o := s.owners[key]
		if o == nil {
			o = &ownerTrack{}
			s.owners[key] = o
		}
		shard := v.Labels[kdagv1alpha1.LabelShard]
		if len(o.labels) == 0 || o.labels[len(o.labels)-1].shard != shard {
			o.labels = append(o.labels, labelAt{at: now, shard: shard})
		}
	}
	for key, o := range s.owners {
		if !seen[key] && !o.deleted.IsZero() && o.gone.IsZero() && now.After(o.deleted) {
			o.gone = now
		}
	}
}

// deleted records that the test's delete of owner name returned at t.
func (s *sampler) deleted(name string, t time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o := s.owners[name]
	if o == nil {
		o = &ownerTrack{}
		s.owners[name] = o
	}
	o.deleted = t
}

// TestRollingRestart is issue 29's acceptance run on the local cluster: 3 replicas with
// --shards=auto (member Lease duration rollLease) run 200 Valkeys; then a rolling restart
// replaces each replica by one with a new ID (started first and live before the old one goes,
// as a Deployment's rollout with maxSurge 1 does), while 100 Valkeys are created, 60 get a new
// spec and 100 are deleted, each batch sent just before an old replica dies, half the
// deletions just after. Two old replicas
// stop with SIGTERM, as a rollout stops them; the one that runs the assigner goes last, with
// SIGKILL, as on a node's crash. In the end: every Valkey Ready for its generation on the new
// replica the ring gives it, or gone; no deleted Valkey Terminating longer than 2 × rollLease
// after the replica it was on died; no object with a dead replica's shard label; no two replicas
// reconciling one owner at the same time (their logs' reconcile spans); at most live replicas + 1
// member Leases 3 × rollLease after the last death, and as many as live replicas in the end.
func TestRollingRestart(t *testing.T) {
	begin := time.Now()
	ns := local.Namespace(t)
	leaseNS := local.Namespace(t)
	dir := logDir(t, "kdag-sharding-rolling-logs-")
	var all []*replica
	t.Cleanup(func() {
		if t.Failed() {
			logTail(t, all...)
		}
	})
	old := map[string]*replica{}
	for _, id := range []string{"a1", "a2", "a3"} {
		old[id] = startReplicaLease(t, dir, id, leaseNS, rollLease)
		all = append(all, old[id])
	}
	waitMembers(t, leaseNS, "a1", "a2", "a3")

	name := func(i int) string { return fmt.Sprintf("v%03d", i) }
	do := func(what string, n int, f func(ctx context.Context, i int) error) {
		t.Helper()
		g, ctx := errgroup.WithContext(t.Context())
		g.SetLimit(8)
		for i := range n {
			g.Go(func() error { return f(ctx, i) })
		}
		if err := g.Wait(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	create := func(ctx context.Context, i int) error {
		return cl.Create(ctx, &giteav1alpha1.Valkey{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name(i)}})
	}
	do("create Valkeys", rollFirst, create)
	start := time.Now()
	live := []string{"a1", "a2", "a3"}
	poll.Until(t, "200 Valkeys on a1, a2, a3 and Ready", 5*time.Minute, every(time.Second, func(ctx context.Context) string {
		_, why := assignmentOf(ctx, ns, live, rollFirst)
		return why
	}))
	t.Logf("%d Valkeys Ready in %s", rollFirst, time.Since(start).Round(time.Second))

	s := &sampler{owners: map[string]*ownerTrack{}}
	sctx, stopSampler := context.WithCancel(t.Context())
	var sampling sync.WaitGroup
	sampling.Go(func() { s.run(sctx, ns, leaseNS, 500*time.Millisecond) })
	stopSampling := sync.OnceFunc(func() { stopSampler(); sampling.Wait() })
	t.Cleanup(stopSampling)

	// The replica that runs the assigner is the only one that logged a move; it goes last.
	assigner := assignerOf(t, leaseNS, all...)
	order := slices.DeleteFunc([]string{"a1", "a2", "a3"}, func(id string) bool { return id == assigner })
	order = append(order, assigner)
	t.Logf("rollout order %v (%s runs the assigner)", order, assigner)

	died := map[string]time.Time{}
	rollout := time.Now()
	created, deleted, updated := 0, 0, 0
	for step, id := range order {
		next := "b" + id[1:]
		all = append(all, startReplicaLease(t, dir, next, leaseNS, rollLease))
		waitMembers(t, leaseNS, append(slices.Clone(live), next)...)
		live = append(live, next)

		// A third of the deploys and deletions, sent just before the old replica goes: some of
		// the owners being deleted are its own.
		batch := func(total int) (from, n int) {
			from = total * step / len(order)
			return from, total*(step+1)/len(order) - from
		}
		from, n := batch(rollNew)
		do("create Valkeys", n, func(ctx context.Context, i int) error { return create(ctx, rollFirst+from+i) })
		created += n
		from, n = batch(rollUpdated)
		do("update Valkeys", n, func(ctx context.Context, i int) error {
			v := &giteav1alpha1.Valkey{}
			if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: name(rollDeleted + from + i)}, v); err != nil {
				return err
			}
			before := v.DeepCopy()
			v.Spec.Config = map[string]giteav1alpha1.ValkeyConfigValue{"maxmemory": giteav1alpha1.ValkeyConfigValue(fmt.Sprintf("%dmb", 64+step))}
			return cl.Patch(ctx, v, client.MergeFrom(before))
		})
		updated += n
		from, n = batch(rollDeleted)
		del := func(from, n int) {
			do("delete Valkeys", n, func(ctx context.Context, i int) error {
				if err := cl.Delete(ctx, &giteav1alpha1.Valkey{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name(from + i)}}); err != nil {
					return err
				}
				s.deleted(name(from+i), time.Now())
				return nil
			})
		}
		// Half the deletions before the old replica goes, half once it is gone: those of its
		// owners stay Terminating until the assigner relabels them for a live replica.
		del(from, n/2)
		died[id] = time.Now()
		if id == assigner {
			old[id].kill()
		} else {
			old[id].stop(time.Minute)
		}
		del(from+n/2, n-n/2)
		deleted += n
		live = slices.DeleteFunc(live, func(l string) bool { return l == id })
		t.Logf("step %d: %s replaced by %s at %s; %d created, %d updated, %d deleted so far", step+1, id, next,
			time.Since(rollout).Round(100*time.Millisecond), created, updated, deleted)
	}
	lastDeath := died[order[len(order)-1]]

	// Member Leases 3 Lease durations after the last death: at most the live replicas' + 1.
	time.Sleep(time.Until(lastDeath.Add(3 * rollLease)))
	leasesAt3 := memberLeases(t, leaseNS)
	t.Logf("3 × Lease duration after the last death: member Leases %v", leasesAt3)
	if len(leasesAt3) > len(live)+1 {
		t.Errorf("%d member Leases %v 3 × the Lease duration after the last replica died, want at most %d (live %v, + 1)",
			len(leasesAt3), leasesAt3, len(live)+1, live)
	}

	var assigned map[string]string
	poll.Until(t, "the Valkeys on b1, b2, b3 and Ready, the deleted ones gone", 5*time.Minute,
		every(time.Second, func(ctx context.Context) string {
			var why string
			assigned, why = assignmentOf(ctx, ns, live, rollFirst+rollNew-rollDeleted)
			return why
		}))
	settled := time.Since(lastDeath)
	for i := range rollDeleted {
		if _, ok := assigned[ns+"/"+name(i)]; ok {
			t.Errorf("%s was deleted and is still there", name(i))
		}
	}
	t.Logf("rollout: settled %s after the last death, %s after the first step; owners per replica %v",
		settled.Round(100*time.Millisecond), time.Since(rollout).Round(100*time.Millisecond), perReplica(assigned))

	// No object with a dead replica's label: the owners, and what kdag applied for them (the
	// garbage collector deletes the deleted owners' objects; wait for it).
	poll.Until(t, "no object labelled with a dead shard", 2*time.Minute, every(time.Second, func(ctx context.Context) string {
		return deadLabels(ctx, ns, live)
	}))

	// Leases: as many as live replicas once the last dead one's is collected.
	poll.Until(t, "one member Lease per live replica", 3*rollLease, every(time.Second, func(ctx context.Context) string {
		if got := memberLeases(t, leaseNS); !slices.Equal(got, slices.Sorted(slices.Values(live))) {
			return fmt.Sprintf("member Leases %v, live %v", got, live)
		}
		return ""
	}))
	stopSampling()

	// No deleted owner stayed Terminating longer than 2 Lease durations after its replica died.
	var worst time.Duration
	worstOwner, worstShard := "", ""
	var longest time.Duration
	onDead := 0
	for i := range rollDeleted {
		o := s.owners[name(i)]
		if o == nil || o.deleted.IsZero() || o.gone.IsZero() {
			t.Errorf("%s: not seen deleted and gone (%+v)", name(i), o)
			continue
		}
		longest = max(longest, o.gone.Sub(o.deleted))
		for id, at := range died {
			if !o.gone.After(at) || o.shardAt(at) != id {
				continue
			}
			onDead++
			if d := o.gone.Sub(maxTime(at, o.deleted)); d > worst {
				worst, worstOwner, worstShard = d, name(i), id
			}
		}
	}
	t.Logf("deleted owners: %d Terminating when their replica died; the longest Terminating after its replica died: %s (%s on %s); "+
		"the longest Terminating in all: %s", onDead, worst.Round(100*time.Millisecond), worstOwner, worstShard, longest.Round(100*time.Millisecond))
	if worst > 2*rollLease {
		t.Errorf("%s stayed Terminating %s after its replica %s died, want at most 2 × the Lease duration (%s)", worstOwner, worst, worstShard, 2*rollLease)
	}
	// How long the owners of each dead replica kept its label after it died (the sampler's
	// precision): the Lease duration, the assigner's takeover when it died with it, its pass.
	s.mu.Lock()
	relabelled := map[string]time.Duration{}
	for _, o := range s.owners {
		for i, l := range o.labels {
			at, ok := died[l.shard]
			if !ok {
				continue
			}
			until := o.gone
			if i+1 < len(o.labels) {
				until = o.labels[i+1].at
			}
			if !until.IsZero() && until.After(at) {
				relabelled[l.shard] = max(relabelled[l.shard], until.Sub(at).Round(100*time.Millisecond))
			}
		}
	}
	s.mu.Unlock()
	t.Logf("the last owner of each dead replica left it (relabelled or gone) this long after the replica died: %v", relabelled)
	s.mu.Lock()
	peak := 0
	for _, c := range s.leases {
		if c.at.After(lastDeath.Add(3 * rollLease)) {
			peak = max(peak, c.n)
		}
	}
	s.mu.Unlock()
	t.Logf("member Leases after 3 × the Lease duration past the last death: at most %d (live %d)", peak, len(live))
	if peak > len(live)+1 {
		t.Errorf("%d member Leases sampled more than 3 × the Lease duration after the last death, want at most %d", peak, len(live)+1)
	}

	// One replica at a time per owner, over the whole run.
	spans := reconciles(t, ns, all...)
	n := 0
	for _, ss := range spans {
		n += len(ss)
	}
	checkNoOverlap(t, spans)
	t.Logf("overlap check: %d reconciles of %d owners by %d replicas, none of one owner at once", n, len(spans), len(all))
	// Each remaining owner's last reconcile was by its replica.
	for owner, shard := range assigned {
		ss := spans[owner]
		last := slices.MaxFunc(ss, func(a, b span) int { return a.end.Compare(b.end) })
		if last.replica != shard {
			t.Errorf("%s (shard %s) last reconciled by %s", owner, shard, last.replica)
		}
	}
	restarts := map[string]int{}
	for _, r := range all {
		if n := r.restarted(); n > 0 {
			restarts[r.id] = n
		}
	}
	t.Logf("replicas that exited on their own (a member Lease not renewed in time) and were started again: %v", restarts)
	t.Logf("TestRollingRestart took %s", time.Since(begin).Round(time.Second))
}

// every returns cond, called at most once per d: in between, it returns the last answer, so that
// a poll.Until at its interval does not list hundreds of objects ten times a second.
func every(d time.Duration, cond func(ctx context.Context) string) func(ctx context.Context) string {
	var last time.Time
	answer := "not looked yet"
	return func(ctx context.Context) string {
		if time.Since(last) < d {
			return answer
		}
		last = time.Now()
		answer = cond(ctx)
		return answer
	}
}

// waitMembers waits until the member Leases of ids are in leaseNS.
func waitMembers(t *testing.T, leaseNS string, ids ...string) {
	t.Helper()
	poll.Until(t, fmt.Sprintf("member Leases of %v", ids), time.Minute, func(context.Context) string {
		got := memberLeases(t, leaseNS)
		for _, id := range ids {
			if !slices.Contains(got, id) {
				return fmt.Sprintf("member Leases of %v", got)
			}
		}
		return ""
	})
}

// memberLeases returns the holders of the member Leases in leaseNS, sorted.
func memberLeases(t *testing.T, leaseNS string) []string {
	t.Helper()
	leases := &coordinationv1.LeaseList{}
	if err := cl.List(t.Context(), leases, client.InNamespace(leaseNS), client.HasLabels{kdagv1alpha1.LabelShardMember}); err != nil {
		t.Fatalf("list member Leases: %v", err)
	}
	var out []string
	for _, l := range leases.Items {
		out = append(out, ptr.Deref(l.Spec.HolderIdentity, l.Name))
	}
	slices.Sort(out)
	return out
}

// assignerOf returns the replica that runs the assigner: the holder of the assigner's election
// Lease in leaseNS (controller-runtime's identity, a host name and a UUID) is the one whose log
// says it became leader. It fails t unless exactly one did.
func assignerOf(t *testing.T, leaseNS string, replicas ...*replica) string {
	t.Helper()
	l := &coordinationv1.Lease{}
	if err := cl.Get(t.Context(), client.ObjectKey{Namespace: leaseNS, Name: shard.AssignerLeaderElectionID}, l); err != nil {
		t.Fatalf("the assigner's election Lease: %v", err)
	}
	holder := ptr.Deref(l.Spec.HolderIdentity, "")
	var found []string
	for _, r := range replicas {
		b, err := os.ReadFile(r.log)
		if err != nil {
			t.Fatal(err)
		}
		if holder != "" && strings.Contains(string(b), `"msg":"`+holder+` became leader"`) {
			found = append(found, r.id)
		}
	}
	if len(found) != 1 {
		t.Fatalf("replicas whose logs say %q became leader: %v, want one", holder, found)
	}
	return found[0]
}

// deadLabels returns which objects of ns (the Valkeys, and the ConfigMaps, Services and
// Deployments kdag applies for them) carry a kdag.dev/shard label other than one of live, or ""
// when none does.
func deadLabels(ctx context.Context, ns string, live []string) string {
	lists := map[string]client.ObjectList{
		"Valkey": &giteav1alpha1.ValkeyList{}, "ConfigMap": &corev1.ConfigMapList{},
		"Service": &corev1.ServiceList{}, "Deployment": &appsv1.DeploymentList{},
		// The owners' revisions carry no shard label at all (one history across moves).
		"ControllerRevision": &appsv1.ControllerRevisionList{},
	}
	var bad []string
	for _, kind := range slices.Sorted(maps.Keys(lists)) {
		list := lists[kind]
		if err := cl.List(ctx, list, client.InNamespace(ns), client.HasLabels{kdagv1alpha1.LabelShard}); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return err.Error()
		}
		items, err := meta.ExtractList(list)
		if err != nil {
			return err.Error()
		}
		for _, item := range items {
			o, err := meta.Accessor(item)
			if err != nil {
				return err.Error()
			}
			if shard := o.GetLabels()[kdagv1alpha1.LabelShard]; !slices.Contains(live, shard) {
				bad = append(bad, fmt.Sprintf("%s %s (%s)", kind, o.GetName(), shard))
			}
		}
	}
	if len(bad) > 0 {
		return fmt.Sprintf("%d objects with a dead shard's label, e.g. %v", len(bad), bad[:min(5, len(bad))])
	}
	return ""
}

// maxTime returns the later of a and b.
func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
