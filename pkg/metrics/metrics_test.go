package metrics

import (
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/kdag-dev/kdag/pkg/testing/leak"
)

func TestMain(m *testing.M) {
	os.Exit(leak.Check(m.Run))
}

func TestCounters(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := Register(reg)

	m.ObserveNode("gitea", "Deployment", "applied", "Ready", 20*time.Millisecond)
	m.ObserveNode("gitea", "Service", "applied", "Ready", 5*time.Millisecond)
	m.ObserveNode("gitea", "ConfigMap", "skipped", "Ready", time.Millisecond)
	m.ObserveNode("gitea", "Job", "applied", "Failed", time.Second)
	m.DriftRepaired("gitea", "Deployment")
	m.DriftRepaired("gitea", "Deployment")
	m.DriftReported("gitea", "ConfigMap")
	m.Pruned("gitea", "Secret")
	m.NodePanicked("gitea")
	m.SetOwnersUnserved("Gitea", 2)
	m.SetOwnersUnserved("Gitea", 1) // a gauge: the last value counts
	m.SetOwnersUnserved("PostgreSQL", 0)

	expected := `
# HELP kdag_drift_repairs_total Objects re-applied because someone else changed fields kdag manages.
# TYPE kdag_drift_repairs_total counter
kdag_drift_repairs_total{controller="gitea",kind="Deployment"} 2
# HELP kdag_drift_reports_total Objects found changed by someone else in fields kdag manages and left as they are (drift policy report), once per new set of fields.
# TYPE kdag_drift_reports_total counter
kdag_drift_reports_total{controller="gitea",kind="ConfigMap"} 1
# HELP kdag_node_panics_total Panics recovered while processing a graph node.
# TYPE kdag_node_panics_total counter
kdag_node_panics_total{controller="gitea"} 1
# HELP kdag_nodes_total Graph nodes processed, by action (created, applied, skipped, adopted, refused, held, reported) and outcome (Ready, Waiting, Failed).
# TYPE kdag_nodes_total counter
kdag_nodes_total{action="applied",controller="gitea",outcome="Failed"} 1
kdag_nodes_total{action="applied",controller="gitea",outcome="Ready"} 2
kdag_nodes_total{action="skipped",controller="gitea",outcome="Ready"} 1
# HELP kdag_owners_unserved Owners whose kdag.dev/shard label names a shard that no running manager serves (no live leader election or member Lease), by kind.
# TYPE kdag_owners_unserved gauge
kdag_owners_unserved{kind="Gitea"} 1
kdag_owners_unserved{kind="PostgreSQL"} 0
# HELP kdag_prune_deletions_total Objects deleted because they left the desired graph.
# TYPE kdag_prune_deletions_total counter
kdag_prune_deletions_total{controller="gitea",kind="Secret"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(expected),
		"kdag_drift_repairs_total", "kdag_drift_reports_total", "kdag_node_panics_total", "kdag_nodes_total", "kdag_owners_unserved",
		"kdag_prune_deletions_total"); err != nil {
		t.Error(err)
	}
}

func TestHistograms(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := Register(reg)

	m.ObserveGraphRun("gitea", 300*time.Millisecond)
	m.ObserveGraphRun("gitea", 2*time.Second)
	m.ObserveNode("gitea", "Deployment", "applied", "Ready", 20*time.Millisecond)
	m.ObserveNode("gitea", "Deployment", "applied", "Ready", 30*time.Millisecond)

	expected := `
# HELP kdag_graph_run_duration_seconds Duration of one run of an owner's resource graph, from the first node to the last.
# TYPE kdag_graph_run_duration_seconds histogram
kdag_graph_run_duration_seconds_bucket{controller="gitea",le="0.005"} 0
kdag_graph_run_duration_seconds_bucket{controller="gitea",le="0.01"} 0
kdag_graph_run_duration_seconds_bucket{controller="gitea",le="0.025"} 0
kdag_graph_run_duration_seconds_bucket{controller="gitea",le="0.05"} 0
kdag_graph_run_duration_seconds_bucket{controller="gitea",le="0.1"} 0
kdag_graph_run_duration_seconds_bucket{controller="gitea",le="0.25"} 0
kdag_graph_run_duration_seconds_bucket{controller="gitea",le="0.5"} 1
kdag_graph_run_duration_seconds_bucket{controller="gitea",le="1"} 1
kdag_graph_run_duration_seconds_bucket{controller="gitea",le="2.5"} 2
kdag_graph_run_duration_seconds_bucket{controller="gitea",le="5"} 2
kdag_graph_run_duration_seconds_bucket{controller="gitea",le="10"} 2
kdag_graph_run_duration_seconds_bucket{controller="gitea",le="30"} 2
kdag_graph_run_duration_seconds_bucket{controller="gitea",le="60"} 2
kdag_graph_run_duration_seconds_bucket{controller="gitea",le="+Inf"} 2
kdag_graph_run_duration_seconds_sum{controller="gitea"} 2.3
kdag_graph_run_duration_seconds_count{controller="gitea"} 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(expected), "kdag_graph_run_duration_seconds"); err != nil {
		t.Error(err)
	}

	// The node histogram: count and sum of the one series.
	if n := testutil.CollectAndCount(m.nodeDuration); n != 1 {
		t.Errorf("node duration series = %d, want 1", n)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "kdag_node_duration_seconds" {
			continue
		}
		h := f.GetMetric()[0].GetHistogram()
		if h.GetSampleCount() != 2 || h.GetSampleSum() < 0.0499 || h.GetSampleSum() > 0.0501 {
			t.Errorf("node histogram count %d sum %v, want 2 and 0.05", h.GetSampleCount(), h.GetSampleSum())
		}
		labels := map[string]string{}
		for _, l := range f.GetMetric()[0].GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		if labels[LabelController] != "gitea" || labels[LabelKind] != "Deployment" || labels[LabelAction] != "applied" || len(labels) != 3 {
			t.Errorf("node histogram labels = %v", labels)
		}
		return
	}
	t.Error("kdag_node_duration_seconds not gathered")
}

func TestWaiting(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := Register(reg)
	gauge := func(controller string) float64 {
		t.Helper()
		families, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range families {
			if f.GetName() != "kdag_nodes_waiting" {
				continue
			}
			for _, metric := range f.GetMetric() {
				if metric.GetLabel()[0].GetValue() == controller {
					return metric.GetGauge().GetValue()
				}
			}
		}
		return -1 // no series
	}

	if got := gauge("gitea"); got != -1 {
		t.Errorf("before any report: %v, want no series", got)
	}
	m.SetWaiting("gitea", "ns/a", 3)
	m.SetWaiting("gitea", "ns/b", 2)
	m.SetWaiting("harbor", "ns/a", 7)
	if got := gauge("gitea"); got != 5 {
		t.Errorf("gitea = %v, want 5", got)
	}
	m.SetWaiting("gitea", "ns/a", 1)
	if got := gauge("gitea"); got != 3 {
		t.Errorf("after a drops to 1: %v, want 3", got)
	}
	m.ForgetOwner("gitea", "ns/b")
	m.ForgetOwner("gitea", "ns/unknown")
	m.ForgetOwner("unknown", "ns/b")
	if got := gauge("gitea"); got != 1 {
		t.Errorf("after forgetting b: %v, want 1", got)
	}
	m.SetWaiting("gitea", "ns/a", -4)
	if got := gauge("gitea"); got != 0 {
		t.Errorf("negative counts as 0: %v, want 0", got)
	}
	if got := gauge("harbor"); got != 7 {
		t.Errorf("harbor = %v, want 7", got)
	}

	expected := `
# HELP kdag_nodes_waiting Graph nodes waiting for readiness, summed over the controller's owners.
# TYPE kdag_nodes_waiting gauge
kdag_nodes_waiting{controller="gitea"} 0
kdag_nodes_waiting{controller="harbor"} 7
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(expected), "kdag_nodes_waiting"); err != nil {
		t.Error(err)
	}
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) != 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
}

func TestWaitingConcurrent(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := Register(reg)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			owner := string(rune('a' + i))
			for n := range 100 {
				m.SetWaiting("gitea", owner, n%5)
				_, _ = reg.Gather()
			}
			m.SetWaiting("gitea", owner, 2)
		})
	}
	wg.Wait()
	if got := testutil.ToFloat64(m.waiting); got != 16 {
		t.Errorf("waiting = %v, want 16", got)
	}
}

// TestRegisterTwice: a second Register on the same registry does not panic and shares the
// collectors, the waiting map included.
func TestRegisterTwice(t *testing.T) {
	reg := prometheus.NewRegistry()
	m1 := Register(reg)
	m2 := Register(reg)

	m1.DriftRepaired("gitea", "Deployment")
	m2.DriftRepaired("gitea", "Deployment")
	if got := testutil.ToFloat64(m1.driftRepairs.WithLabelValues("gitea", "Deployment")); got != 2 {
		t.Errorf("drift repairs = %v, want 2 (shared)", got)
	}
	m1.SetWaiting("gitea", "ns/a", 3)
	m2.SetWaiting("gitea", "ns/b", 4)
	m2.ForgetOwner("gitea", "ns/a")
	if got := testutil.ToFloat64(m1.waiting); got != 4 {
		t.Errorf("waiting = %v, want 4 (shared)", got)
	}
	if n, err := testutil.GatherAndCount(reg); err != nil || n != 2 {
		t.Errorf("series = %d (%v), want 2", n, err)
	}
}

// TestControllerRuntimeRegistry registers on controller-runtime's process-wide registry, twice.
func TestControllerRuntimeRegistry(t *testing.T) {
	m1 := Register(ctrlmetrics.Registry)
	m2 := Register(ctrlmetrics.Registry)
	m1.Pruned("crtest", "ConfigMap")
	m2.Pruned("crtest", "ConfigMap")
	if got := testutil.ToFloat64(m1.pruneDeletions.WithLabelValues("crtest", "ConfigMap")); got != 2 {
		t.Errorf("prune deletions = %v, want 2", got)
	}
}

func TestConflictingRegistration(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kdag_nodes_total", Help: "someone else's"}, []string{"x"}))
	if _, err := New(reg); err == nil {
		t.Error("New succeeded over a conflicting collector")
	}
	defer func() {
		if recover() == nil {
			t.Error("Register did not panic over a conflicting collector")
		}
	}()
	Register(reg)
}

func TestNilRegistererAndNilMetrics(t *testing.T) {
	m, err := New(nil)
	if err != nil {
		t.Fatal(err)
	}
	m.Pruned("gitea", "Secret")
	if got := testutil.ToFloat64(m.pruneDeletions.WithLabelValues("gitea", "Secret")); got != 1 {
		t.Errorf("unregistered metrics still record: %v, want 1", got)
	}

	var none *Metrics
	none.ObserveGraphRun("c", time.Second)
	none.ObserveNode("c", "k", "a", "o", time.Second)
	none.DriftRepaired("c", "k")
	none.DriftReported("c", "k")
	none.Pruned("c", "k")
	none.NodePanicked("c")
	none.SetWaiting("c", "o", 1)
	none.ForgetOwner("c", "o")
}
