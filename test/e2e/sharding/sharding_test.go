package sharding

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	giteav1alpha1 "github.com/kdag-dev/kdag/apis/gitea/v1alpha1"
	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/shard"
	"github.com/kdag-dev/kdag/pkg/testing/poll"
)

const (
	// owners is how many Valkeys the test spreads over the replicas.
	owners = 300
	// leaseDuration is the member Leases' duration (--shard-lease-duration). Twice pkg/shard's
	// default, so that the bound checked on a failover (2 × leaseDuration) leaves the fixed part
	// of a takeover (the assigner's pass, the new replicas' reconciles) room on a slow machine.
	leaseDuration = 30 * time.Second
)

// replica is one operator process with --shards=auto, run as a pod's container is: when it
// exits on its own (a replica that could not renew its member Lease in time stops, by design),
// it is started again with the same ID, as the kubelet restarts a container in the same pod.
type replica struct {
	id   string
	log  string
	args []string
	done chan struct{} // closed once the test stopped it and it exited

	mu       sync.Mutex
	proc     *os.Process // the running process
	stopping bool        // the test stopped it: no restart
	restarts int         // how many times it exited on its own and was started again
}

// startReplica runs the operator binary as the replica id of dynamic shards whose Leases go in
// leaseNS, logging every reconcile (debug level, JSON, nanosecond timestamps) to a file in dir.
// The test's cleanup kills it.
func startReplica(t *testing.T, dir, id, leaseNS string) *replica {
	t.Helper()
	return startReplicaLease(t, dir, id, leaseNS, leaseDuration)
}

// startReplicaLease is startReplica with the member Lease duration lease.
func startReplicaLease(t *testing.T, dir, id, leaseNS string, lease time.Duration) *replica {
	t.Helper()
	r := &replica{id: id, log: filepath.Join(dir, id+".log"), done: make(chan struct{}), args: []string{
		"--shards=auto", "--shard-id=" + id, "--leader-election-namespace=" + leaseNS,
		"--metrics-bind-address=0", "--health-probe-bind-address=0",
		"--shard-lease-duration=" + lease.String(),
		"--zap-log-level=debug", "--zap-encoder=json", "--zap-time-encoding=rfc3339nano",
	}}
	f, err := os.Create(r.log)
	if err != nil {
		t.Fatal(err)
	}
	cmd, err := r.start(f)
	if err != nil {
		t.Fatalf("start replica %s: %v", id, err)
	}
	go r.supervise(f, cmd)
	t.Cleanup(r.kill)
	return r
}

// start starts the replica's process, its output appended to f.
func (r *replica) start(f *os.File) (*exec.Cmd, error) {
	cmd := exec.Command(operator, r.args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = dieWithParent()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	r.mu.Lock()
	r.proc = cmd.Process
	r.mu.Unlock()
	return cmd, nil
}

// supervise waits for cmd, and starts the replica again (after a second, as a container's first
// restart) until the test stops it; then it closes f and done.
func (r *replica) supervise(f *os.File, cmd *exec.Cmd) {
	defer close(r.done)
	defer f.Close()
	for {
		err := cmd.Wait()
		r.mu.Lock()
		stopping := r.stopping
		if !stopping {
			r.restarts++
		}
		r.mu.Unlock()
		if stopping {
			return
		}
		fmt.Fprintf(f, "{\"level\":\"info\",\"ts\":%q,\"msg\":\"test: the replica exited on its own (%v); starting it again\"}\n",
			time.Now().UTC().Format(time.RFC3339Nano), err)
		time.Sleep(time.Second)
		r.mu.Lock()
		stopping = r.stopping
		r.mu.Unlock()
		if stopping {
			return
		}
		if cmd, err = r.start(f); err != nil {
			fmt.Fprintf(f, "{\"level\":\"error\",\"msg\":\"test: start again: %v\"}\n", err)
			return
		}
	}
}

// signal marks the replica stopped by the test (no restart) and sends sig to its process.
func (r *replica) signal(sig os.Signal) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stopping = true
	_ = r.proc.Signal(sig)
}

// restarted returns how many times the replica exited on its own and was started again.
func (r *replica) restarted() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.restarts
}

// kill stops the replica at once (SIGKILL: no Lease released, no reconcile finished) and waits
// for it.
func (r *replica) kill() {
	r.signal(os.Kill)
	<-r.done
}

// stop asks the replica to stop as a pod's rollout does (SIGTERM: the manager ends its
// reconciles and releases its election) and waits until it has exited, at most grace; then it
// kills it.
func (r *replica) stop(grace time.Duration) {
	r.signal(syscall.SIGTERM)
	select {
	case <-r.done:
	case <-time.After(grace):
		r.kill()
	}
}

// span is one reconcile of an owner by a replica, from its log line.
type span struct {
	replica    string
	start, end time.Time
}

// reconciles reads the "reconciled" and "reconcile failed" lines of the replicas' logs and
// returns the reconciles of each owner ("namespace/name") of namespace ns.
func reconciles(t *testing.T, ns string, replicas ...*replica) map[string][]span {
	t.Helper()
	out := map[string][]span{}
	for _, r := range replicas {
		f, err := os.Open(r.log)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var line struct {
				Msg      string `json:"msg"`
				Owner    string `json:"owner"`
				TS       string `json:"ts"`
				Duration string `json:"duration"`
			}
			if json.Unmarshal(sc.Bytes(), &line) != nil || (line.Msg != "reconciled" && line.Msg != "reconcile failed") ||
				!strings.HasPrefix(line.Owner, ns+"/") {
				continue
			}
			end, err := time.Parse(time.RFC3339Nano, line.TS)
			if err != nil {
				t.Fatalf("replica %s: log time %q: %v", r.id, line.TS, err)
			}
			d, err := time.ParseDuration(line.Duration)
			if err != nil {
				t.Fatalf("replica %s: log duration %q: %v", r.id, line.Duration, err)
			}
			out[line.Owner] = append(out[line.Owner], span{replica: r.id, start: end.Add(-d), end: end})
		}
		f.Close()
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// checkNoOverlap fails t for every owner that two replicas reconciled at the same time.
func checkNoOverlap(t *testing.T, spans map[string][]span) {
	t.Helper()
	for owner, ss := range spans {
		for i, a := range ss {
			for _, b := range ss[i+1:] {
				if a.replica != b.replica && a.start.Before(b.end) && b.start.Before(a.end) {
					t.Errorf("%s reconciled by %s (%s to %s) and %s (%s to %s) at once", owner,
						a.replica, a.start.Format(time.StampMicro), a.end.Format(time.StampMicro),
						b.replica, b.start.Format(time.StampMicro), b.end.Format(time.StampMicro))
				}
			}
		}
	}
}

// assignment lists the Valkeys of ns and returns each one's shard label by "namespace/name", or
// why they are not all settled: the test's owners Valkeys, every one labelled with the member of
// live that the assigner's ring (shard.Ring) gives it, none with a pending hand-over, and each
// Ready for its generation.
func assignment(ctx context.Context, ns string, live []string) (map[string]string, string) {
	return assignmentOf(ctx, ns, live, owners)
}

// assignmentOf is assignment for want Valkeys (none being deleted) in ns.
func assignmentOf(ctx context.Context, ns string, live []string, want int) (map[string]string, string) {
	ring := shard.NewRing(live...)
	list := &giteav1alpha1.ValkeyList{}
	if err := cl.List(ctx, list, client.InNamespace(ns)); err != nil {
		return nil, err.Error()
	}
	if len(list.Items) != want {
		return nil, fmt.Sprintf("%d Valkeys, want %d", len(list.Items), want)
	}
	out := map[string]string{}
	notReady, unassigned, moving := 0, 0, 0
	var why []string
	for _, v := range list.Items {
		label := v.Labels[kdagv1alpha1.LabelShard]
		out[v.Namespace+"/"+v.Name] = label
		switch ready := meta.FindStatusCondition(v.Status.Conditions, kdagv1alpha1.ConditionReady); {
		case v.DeletionTimestamp != nil:
			return nil, fmt.Sprintf("%s on %s is being deleted", v.Name, label)
		case label != ring.Owner(v.Namespace+"/"+v.Name):
			unassigned++
		case v.Annotations[kdagv1alpha1.AnnotationShardNext] != "":
			moving++
		case ready == nil || ready.Status != metav1.ConditionTrue || v.Status.ObservedGeneration != v.Generation:
			notReady++
			if len(why) < 3 {
				why = append(why, fmt.Sprintf("%s on %s: generation %d observed %d, Ready %+v", v.Name, label, v.Generation,
					v.Status.ObservedGeneration, ready))
			}
		}
	}
	if unassigned+moving+notReady > 0 {
		return nil, fmt.Sprintf("%d not on their replica of %v yet, %d moving, %d not Ready %v", unassigned, live, moving, notReady, why)
	}
	return out, ""
}

// perReplica counts the owners of each shard.
func perReplica(assigned map[string]string) map[string]int {
	n := map[string]int{}
	for _, shard := range assigned {
		n[shard]++
	}
	return n
}

// TestDynamicShards is issue 17's acceptance test on the local cluster, with the operator's
// binary as separate processes (--shards=auto): 3 replicas share 300 Valkeys, each Ready and
// reconciled by exactly one replica (the reconciles in the replicas' logs); one replica is killed
// (SIGKILL) and its owners are reconciled by the two others within 2 × the Lease duration of the
// kill, no owner ever reconciled by two replicas at the same time; then the killed replica's
// replacement and a fourth replica start, and the fourth takes between 15 % and 35 % of the
// owners, handed over by their replicas.
func TestDynamicShards(t *testing.T) {
	ns := local.Namespace(t)
	leaseNS := local.Namespace(t)
	dir := logDir(t, "kdag-sharding-logs-")
	r1, r2, r3 := startReplica(t, dir, "r1", leaseNS), startReplica(t, dir, "r2", leaseNS), startReplica(t, dir, "r3", leaseNS)
	all := []*replica{r1, r2, r3}
	t.Cleanup(func() {
		if t.Failed() {
			logTail(t, all...)
		}
	})

	// Owners created before every replica is a member would move once the last one joins: wait
	// for the three member Leases, so that each owner has one replica from the start.
	poll.Until(t, "3 member Leases", time.Minute, func(ctx context.Context) string {
		leases := &coordinationv1.LeaseList{}
		if err := cl.List(ctx, leases, client.InNamespace(leaseNS), client.HasLabels{kdagv1alpha1.LabelShardMember}); err != nil {
			return err.Error()
		}
		if len(leases.Items) != 3 {
			return fmt.Sprintf("%d member Leases", len(leases.Items))
		}
		return ""
	})

	g, ctx := errgroup.WithContext(t.Context())
	g.SetLimit(8)
	for i := range owners {
		g.Go(func() error {
			return cl.Create(ctx, &giteav1alpha1.Valkey{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("v%03d", i)}})
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatalf("create Valkeys: %v", err)
	}
	start := time.Now()
	var assigned map[string]string
	live := []string{"r1", "r2", "r3"}
	poll.Until(t, "300 Valkeys assigned to r1, r2, r3 and Ready", 5*time.Minute, func(ctx context.Context) string {
		var why string
		assigned, why = assignment(ctx, ns, live)
		return why
	})
	t.Logf("300 Valkeys Ready in %s, owners per replica %v", time.Since(start).Round(time.Second), perReplica(assigned))
	spans := reconciles(t, ns, r1, r2, r3)
	for owner, shard := range assigned {
		var by []string
		for _, s := range spans[owner] {
			if !slices.Contains(by, s.replica) {
				by = append(by, s.replica)
			}
		}
		if !slices.Equal(by, []string{shard}) {
			t.Errorf("%s (shard %s) reconciled by %v, want by %s only", owner, shard, by, shard)
		}
	}
	for _, id := range live {
		if n := perReplica(assigned)[id]; n == 0 {
			t.Errorf("replica %s holds no owner", id)
		}
	}

	// A replica dies.
	var lost []string
	for owner, shard := range assigned {
		if shard == "r3" {
			lost = append(lost, owner)
		}
	}
	killed := time.Now()
	r3.kill()
	live = []string{"r1", "r2"}
	poll.Until(t, "r3's owners Ready and reconciled by r1 or r2", 3*leaseDuration, func(ctx context.Context) string {
		var why string
		if assigned, why = assignment(ctx, ns, live); why != "" {
			return why
		}
		spans = reconciles(t, ns, r1, r2)
		for _, owner := range lost {
			if !slices.ContainsFunc(spans[owner], func(s span) bool { return s.replica == assigned[owner] && s.end.After(killed) }) {
				return fmt.Sprintf("%s, now on %s, not reconciled there yet", owner, assigned[owner])
			}
		}
		return ""
	})
	// When each lost owner was first reconciled by its new replica, after the kill.
	var latest time.Duration
	for _, owner := range lost {
		for _, s := range spans[owner] {
			if s.replica == assigned[owner] && s.end.After(killed) {
				latest = max(latest, s.end.Sub(killed))
				break
			}
		}
	}
	t.Logf("r3 killed: its %d owners reconciled by r1 and r2 within %s of the kill (Lease duration %s), owners per replica %v",
		len(lost), latest.Round(100*time.Millisecond), leaseDuration, perReplica(assigned))
	if latest > 2*leaseDuration {
		t.Errorf("the last of r3's owners was reconciled %s after the kill, want within 2 × the Lease duration (%s)", latest, 2*leaseDuration)
	}

	// The killed replica is replaced, and a fourth replica joins.
	r3b, r4 := startReplica(t, dir, "r3b", leaseNS), startReplica(t, dir, "r4", leaseNS)
	all = append(all, r3b, r4)
	live = []string{"r1", "r2", "r3b", "r4"}
	joined := time.Now()
	poll.Until(t, "owners spread over r1, r2, r3b, r4 and Ready", 3*time.Minute, func(ctx context.Context) string {
		var why string
		if assigned, why = assignment(ctx, ns, live); why != "" {
			return why
		}
		return ""
	})
	n := perReplica(assigned)
	t.Logf("r3b and r4 joined: settled in %s, owners per replica %v", time.Since(joined).Round(100*time.Millisecond), n)
	if share := float64(n["r4"]) / owners; share < 0.15 || share > 0.35 {
		t.Errorf("r4 holds %d of %d owners (%.0f %%), want between 15 %% and 35 %%", n["r4"], owners, 100*share)
	}
	poll.Until(t, "the new replicas reconciled their owners", time.Minute, func(context.Context) string {
		spans = reconciles(t, ns, r1, r2, r3, r3b, r4)
		for owner, shard := range assigned {
			if !slices.ContainsFunc(spans[owner], func(s span) bool { return s.replica == shard && s.end.After(joined) }) &&
				(shard == "r3b" || shard == "r4") {
				return owner + " not reconciled by " + shard + " yet"
			}
		}
		return ""
	})
	checkNoOverlap(t, spans)

	// A move changes the objects' shard label and nothing else: no Deployment got a new
	// generation (a Deployment counts annotation changes too, and would look unavailable until
	// its controller caught up), none rolled its pods.
	deployments := &appsv1.DeploymentList{}
	if err := cl.List(t.Context(), deployments, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, d := range deployments.Items {
		if d.Generation != 1 {
			t.Errorf("Deployment %s has generation %d after the moves, want 1: moving its owner changed it", d.Name, d.Generation)
		}
	}
}

// logTail logs the last lines of each replica's log other than its reconciles, to explain a
// failure.
func logTail(t *testing.T, replicas ...*replica) {
	for _, r := range replicas {
		b, err := os.ReadFile(r.log)
		if err != nil {
			continue
		}
		var keep []string
		for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			if !strings.Contains(l, `"msg":"reconciled"`) {
				keep = append(keep, l)
			}
		}
		t.Logf("replica %s, last log lines but the reconciles:\n%s", r.id, strings.Join(keep[max(0, len(keep)-40):], "\n"))
	}
}

// logDir returns a new directory for the replicas' logs, removed after the test unless it failed
// (then the test's log names it).
func logDir(t *testing.T, prefix string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the replicas' logs are in %s", dir)
			return
		}
		_ = os.RemoveAll(dir)
	})
	return dir
}
