package shard

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/controller"
	"github.com/kdag-dev/kdag/pkg/metrics"
	"github.com/kdag-dev/kdag/pkg/testing/poll"
	"github.com/kdag-dev/kdag/pkg/testing/running"
	"github.com/kdag-dev/kdag/pkg/testing/testapi"
)

// TestServedShards: which shards the Leases of the operator's namespace say are served.
func TestServedShards(t *testing.T) {
	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	o, err := newOptions([]Option{WithNamespace("ops")})
	if err != nil {
		t.Fatal(err)
	}
	member := map[string]string{kdagv1alpha1.LabelShardMember: "kdag"}
	lease := func(name, holder string, lbls map[string]string, renewed time.Duration) coordinationv1.Lease {
		return coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ops", Name: name, Labels: lbls},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(holder), LeaseDurationSeconds: ptr.To(int32(15)),
				RenewTime: ptr.To(metav1.NewMicroTime(now.Add(-renewed)))},
		}
	}
	for _, tc := range []struct {
		name  string
		lease coordinationv1.Lease
		want  []string
	}{
		{name: "a static shard's live leader election Lease", lease: lease("eu.kdag.kdag.dev", "pod-1", nil, 5*time.Second), want: []string{"eu"}},
		{name: "a static shard's expired Lease", lease: lease("eu.kdag.kdag.dev", "pod-1", nil, 20*time.Second)},
		{name: "a static shard's released Lease (no holder)", lease: lease("eu.kdag.kdag.dev", "", nil, time.Second)},
		{name: "the unsharded manager's Lease names no shard", lease: lease("kdag.kdag.dev", "pod-1", nil, time.Second)},
		{name: "the assigner's Lease names no shard", lease: lease(AssignerLeaderElectionID, "r1", nil, time.Second)},
		{name: "another operator's Lease", lease: lease("eu.other.example.com", "pod-1", nil, time.Second)},
		{name: "an invalid shard name before the ID", lease: lease("a.b.kdag.kdag.dev", "pod-1", nil, time.Second)},
		{name: "a live member Lease", lease: lease("kdag-shard-r1", "r1", member, time.Second), want: []string{"r1"}},
		{name: "an expired member Lease", lease: lease("kdag-shard-r1", "r1", member, 16*time.Second)},
		{name: "a member Lease of another group", lease: lease("kdag-shard-r1", "r1",
			map[string]string{kdagv1alpha1.LabelShardMember: "other"}, time.Second)},
		{name: "a member Lease whose holder is not its name's", lease: lease("kdag-shard-r1", "r2", member, time.Second)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := slices.Sorted(maps.Keys(servedShards([]coordinationv1.Lease{tc.lease}, o, now)))
			if !slices.Equal(got, tc.want) {
				t.Errorf("served = %v, want %v", got, tc.want)
			}
		})
	}
}

// countingRecorder counts the events recorded per regarding object's name and reason, and
// records them with the manager's recorder.
type countingRecorder struct {
	recorder.EventRecorder
	mu     sync.Mutex
	counts map[string]int // "name reason" → events
}

func (r *countingRecorder) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	if o, ok := regarding.(client.Object); ok {
		r.mu.Lock()
		r.counts[o.GetName()+" "+reason]++
		r.mu.Unlock()
	}
	r.EventRecorder.Eventf(regarding, related, eventtype, reason, action, note, args...)
}

func (r *countingRecorder) count(name string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.counts[name+" "+ReasonShardNotServed]
}

// TestUnserved_WarnsAndCounts: in a manager of shard "mine", Unserved records a Warning event
// ShardNotServed on the Widgets labelled with a shard that no live Lease serves (a typo, a
// static shard whose Lease expired), once each, and counts them in kdag_owners_unserved; not on
// the Widgets of a live static shard, of a live replica, of the manager's own shard, or without a
// label. A relabelled Widget leaves the count at once, and a new unserved label is warned
// about again.
func TestUnserved_WarnsAndCounts(t *testing.T) {
	env := api.Env(t)
	ns := env.Namespace(t)
	now := time.Now()
	for _, l := range []*coordinationv1.Lease{
		{ObjectMeta: metav1.ObjectMeta{Name: "served.kdag.kdag.dev"}, Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("pod-1"),
			LeaseDurationSeconds: ptr.To(int32(600)), RenewTime: ptr.To(metav1.NewMicroTime(now))}},
		{ObjectMeta: metav1.ObjectMeta{Name: "stale.kdag.kdag.dev"}, Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("pod-2"),
			LeaseDurationSeconds: ptr.To(int32(15)), RenewTime: ptr.To(metav1.NewMicroTime(now.Add(-10 * time.Minute)))}},
		{ObjectMeta: metav1.ObjectMeta{Name: "kdag-shard-r1", Labels: map[string]string{kdagv1alpha1.LabelShardMember: "kdag"}},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("r1"), LeaseDurationSeconds: ptr.To(int32(600)),
				RenewTime: ptr.To(metav1.NewMicroTime(now))}},
	} {
		l.Namespace = ns
		if err := env.Client.Create(t.Context(), l); err != nil {
			t.Fatal(err)
		}
	}
	shards := map[string]string{"w-typo": "tpyo", "w-stale": "stale", "w-served": "served", "w-member": "r1", "w-own": "mine", "w-none": ""}
	for name, shard := range shards {
		w := &testapi.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		if shard != "" {
			w.Labels = map[string]string{kdagv1alpha1.LabelShard: shard}
		}
		if err := env.Client.Create(t.Context(), w); err != nil {
			t.Fatal(err)
		}
	}

	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"}})
	if err != nil {
		t.Fatal(err)
	}
	comp := controller.For("widgets", widgetRM{})
	u, err := NewUnserved(mgr, []controller.Component{comp}, WithNamespace(ns), WithWatchNamespaces(ns), WithOwnShard("mine"))
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	if u.metrics, err = metrics.New(reg); err != nil {
		t.Fatal(err)
	}
	rec := &countingRecorder{EventRecorder: u.recorder, counts: map[string]int{}}
	u.recorder, u.grace = rec, 2*time.Second // the interval stays 30 s: the grace's end wakes it
	if err := mgr.Add(u); err != nil {
		t.Fatal(err)
	}
	started := time.Now()
	running.Manager(t, mgr)

	// unserved returns the gauge of Widgets.
	unserved := func() float64 {
		families, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range families {
			for _, m := range f.GetMetric() {
				if f.GetName() == "kdag_owners_unserved" && len(m.GetLabel()) == 1 && m.GetLabel()[0].GetValue() == "Widget" {
					return m.GetGauge().GetValue()
				}
			}
		}
		return -1
	}
	// warnings returns the Widgets with a ShardNotServed event on the API server, and the note of
	// w-typo's.
	warnings := func(ctx context.Context) (names []string, note string, err error) {
		var events eventsv1.EventList
		if err := env.Client.List(ctx, &events, client.InNamespace(ns)); err != nil {
			return nil, "", err
		}
		for _, e := range events.Items {
			if e.Reason == ReasonShardNotServed && e.Type == corev1.EventTypeWarning {
				names = append(names, e.Regarding.Name)
				if e.Regarding.Name == "w-typo" {
					note = e.Note
				}
			}
		}
		slices.Sort(names)
		return slices.Compact(names), note, nil
	}
	var note string
	poll.Until(t, "ShardNotServed on w-stale and w-typo, and 2 unserved Widgets", 30*time.Second, func(ctx context.Context) string {
		names, n, err := warnings(ctx)
		if err != nil {
			return err.Error()
		}
		if !slices.Equal(names, []string{"w-stale", "w-typo"}) || unserved() != 2 {
			return fmt.Sprintf("events on %v, gauge %v", names, unserved())
		}
		note = n
		return ""
	})
	took := time.Since(started)
	t.Logf("warned %s after the manager's start", took.Round(time.Millisecond))
	if took > time.Minute {
		t.Errorf("the warnings came %s after the start, want within a minute", took)
	}
	for _, want := range []string{"kdag.dev/shard=tpyo", ns + "/tpyo.kdag.kdag.dev", ns + "/kdag-shard-tpyo", "kubectl label widget w-typo -n " + ns} {
		if !strings.Contains(note, want) {
			t.Errorf("the event's note does not say %q: %s", want, note)
		}
	}

	// More looks (owner events) record no more events.
	for i := range 3 {
		touch(t.Context(), env.Client, ns, "w-typo", fmt.Sprint(i))
		time.Sleep(1200 * time.Millisecond)
	}
	for name := range shards {
		want := 0
		if name == "w-typo" || name == "w-stale" {
			want = 1
		}
		if got := rec.count(name); got != want {
			t.Errorf("%d ShardNotServed events recorded on %s, want %d", got, name, want)
		}
	}

	// Relabelled: w-typo is served, w-stale unserved with another label (warned about again).
	for name, shard := range map[string]string{"w-typo": "served", "w-stale": "stale-2"} {
		patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, kdagv1alpha1.LabelShard, shard)
		w := &testapi.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		if err := env.Client.Patch(t.Context(), w, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
			t.Fatal(err)
		}
	}
	poll.Until(t, "w-typo served, w-stale warned about again", 30*time.Second, func(context.Context) string {
		if got := unserved(); got != 1 || rec.count("w-stale") != 2 {
			return fmt.Sprintf("gauge %v, %d events on w-stale", got, rec.count("w-stale"))
		}
		return ""
	})
	if got := rec.count("w-typo"); got != 1 {
		t.Errorf("%d ShardNotServed events on w-typo, served now, want 1", got)
	}
}
