package shard

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/controller"
	"github.com/kdag-dev/kdag/pkg/testing/poll"
	"github.com/kdag-dev/kdag/pkg/testing/running"
	"github.com/kdag-dev/kdag/pkg/testing/testapi"
)

// lines is a log sink's output, one line per entry.
type lines struct {
	mu  sync.Mutex
	all []string
}

func (l *lines) add(prefix, args string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.all = append(l.all, prefix+" "+args)
}

// len returns how many lines there are.
func (l *lines) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.all)
}

// find returns the first line that contains every one of parts, or "".
func (l *lines) find(parts ...string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, line := range l.all {
		if ok := func() bool {
			for _, p := range parts {
				if !strings.Contains(line, p) {
					return false
				}
			}
			return true
		}(); ok {
			return line
		}
	}
	return ""
}

// TestAdd_LogsToTheManagersLogger: the member, the assigner and the check of unserved shards
// log to the manager's logger (ctrl.Options.Logger, what main's --zap flags make), although
// controller-runtime starts them with a context that carries no logger: a replica's log says
// which owners the assigner moved. They logged nothing at all before (their loggers came only
// from the context).
func TestAdd_LogsToTheManagersLogger(t *testing.T) {
	env := api.Env(t)
	ns := "shard-logging"
	if err := env.Client.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	out := &lines{}
	logger := funcr.New(out.add, funcr.Options{Verbosity: 1})
	id := "logging-r1"
	comp := controller.For("widgets", widgetRM{replica: id, act: &activity{times: map[string]map[string][]time.Time{},
		held: map[string]chan struct{}{}, holding: make(chan string, 1)}})
	cacheOpts, err := SelectCache(controller.CacheOptions(scheme, comp), id)
	if err != nil {
		t.Fatal(err)
	}
	cacheOpts.DefaultNamespaces = map[string]cache.Config{ns: {}}
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme: scheme, Logger: logger, Metrics: metricsserver.Options{BindAddress: "0"}, Cache: cacheOpts,
		MapperProvider: controller.MapperProvider, LeaderElection: true, LeaderElectionID: "logging." + AssignerLeaderElectionID,
		LeaderElectionNamespace: ns, LeaderElectionReleaseOnCancel: true, LeaseDuration: ptr.To(testLease),
		RenewDeadline: ptr.To(testLease * 2 / 3), RetryPeriod: ptr.To(testLease / 10),
		Controller: config.Controller{SkipNameValidation: ptr.To(true), NeedLeaderElection: ptr.To(false)},
	})
	if err != nil {
		t.Fatal(err)
	}
	comps := []controller.Component{comp}
	layer := Options{Shards: "auto", ID: id, Namespace: ns, LeaseDuration: testLease}
	if err := layer.Complete(); err != nil {
		t.Fatal(err)
	}
	if err := controller.Setup(t.Context(), mgr, comps, layer.ControllerOptions(mgr), controller.Options{WatchNamespaces: []string{ns}}); err != nil {
		t.Fatal(err)
	}
	opts := []Option{WithNamespace(ns), WithLeaseDuration(testLease), WithWatchNamespaces(ns)}
	if err := Add(mgr, id, comps, opts...); err != nil {
		t.Fatal(err)
	}
	u, err := NewUnserved(mgr, comps, opts...)
	if err != nil {
		t.Fatal(err)
	}
	u.interval, u.grace = 100*time.Millisecond, 0
	if err := mgr.Add(u); err != nil {
		t.Fatal(err)
	}
	// A Lease that names a member that never renews: the assigner deletes it once it is expired
	// for leaseCollectAfter durations, and logs that.
	old := metav1.NewMicroTime(time.Now().Add(-time.Hour))
	stale := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kdag-shard-gone", Labels: map[string]string{kdagv1alpha1.LabelShardMember: DefaultGroup}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("gone"), LeaseDurationSeconds: ptr.To(int32(testLease / time.Second)),
			AcquireTime: &old, RenewTime: &old},
	}
	if err := env.Client.Create(t.Context(), stale); err != nil {
		t.Fatal(err)
	}
	stop := running.Manager(t, mgr)
	defer stop()
	// An owner for the assigner to label, and one of a shard nobody serves.
	if err := env.Client.Create(t.Context(), &testapi.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "w"}}); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Create(t.Context(), &testapi.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "typo",
		Labels: map[string]string{kdagv1alpha1.LabelShard: "tpyo"}}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			out.mu.Lock()
			t.Logf("the log:\n%s", strings.Join(out.all, "\n"))
			out.mu.Unlock()
		}
	})
	for _, want := range [][]string{
		{`shard-member `, `"holding the member Lease"`},
		{`shard-assigner `, `"moved an owner"`, `"owner"="shard-logging/w"`},
		{`shard-assigner `, `"deleted an expired member Lease"`},
		{`shard-unserved `, `"an owner's shard is served by no manager"`, `"owner"="shard-logging/typo"`},
	} {
		poll.Until(t, "a log line with "+strings.Join(want, ", "), time.Minute, func(context.Context) string {
			if out.find(want...) == "" {
				return fmt.Sprintf("none in %d lines", out.len())
			}
			return ""
		})
	}
}
