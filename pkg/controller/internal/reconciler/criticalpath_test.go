package reconciler

import (
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/graph"
)

// pathOutcome builds an outcome of nodes named by letter; blockers by index; times in ms as
// (runnable, started, ended), all zero for a node that did not run.
type pathNode struct {
	name     string
	blockers []int
	times    [3]int
	state    kdagv1alpha1.NodeState // NodeReady when empty
}

func pathOutcome(nodes ...pathNode) *outcome {
	r := &outcome{}
	for _, n := range nodes {
		s := &nodeSpec{id: graph.NodeID{Kind: "ConfigMap", Namespace: "ns", Name: n.name}}
		for _, b := range n.blockers {
			s.blockers = append(s.blockers, Node{id: graph.NodeID{Kind: "ConfigMap", Namespace: "ns", Name: nodes[b].name}, index: b})
		}
		ms := func(v int) time.Duration { return time.Duration(v) * time.Millisecond }
		if n.state == "" {
			n.state = kdagv1alpha1.NodeReady
		}
		r.nodes = append(r.nodes, nodeResult{spec: s, state: n.state,
			wait: ms(n.times[0]), started: ms(n.times[1]), ended: ms(n.times[2])})
	}
	return r
}

func TestCriticalPath(t *testing.T) {
	tests := []struct {
		name  string
		nodes []pathNode
		want  []string
	}{
		{name: "nothing ran", nodes: []pathNode{{name: "a", state: kdagv1alpha1.NodeBlocked}}},
		{name: "one node", nodes: []pathNode{{name: "a", times: [3]int{0, 0, 5}}}, want: []string{"a"}},
		{name: "the chain that ended last, through the blocker that ended last",
			nodes: []pathNode{
				{name: "a", times: [3]int{0, 0, 10}},
				{name: "b", times: [3]int{0, 1, 30}},
				{name: "c", blockers: []int{0, 1}, times: [3]int{30, 31, 40}},
				{name: "d", times: [3]int{0, 2, 35}}, // independent, ends before c
				{name: "e", blockers: []int{2}, times: [3]int{40, 45, 60}},
			},
			want: []string{"b", "c", "e"}},
		{name: "a blocked node is not on it",
			nodes: []pathNode{
				{name: "a", times: [3]int{0, 0, 10}, state: kdagv1alpha1.NodeWaiting},
				{name: "b", blockers: []int{0}, state: kdagv1alpha1.NodeBlocked},
			},
			want: []string{"a"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := pathOutcome(tt.nodes...)
			var got []string
			for _, i := range r.criticalPath() {
				got = append(got, r.nodes[i].spec.id.Name)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("critical path %v, want %v", got, tt.want)
			}
		})
	}
}

func TestReconcileSummary_TimesOfThePath(t *testing.T) {
	r := pathOutcome(
		pathNode{name: "a", times: [3]int{0, 0, 10}},
		pathNode{name: "b", blockers: []int{0}, times: [3]int{10, 14, 50}, state: kdagv1alpha1.NodeWaiting},
	)
	sum := r.reconcileSummary(t.Context())
	want := []kdagv1alpha1.PathNode{
		{Kind: "ConfigMap", Namespace: "ns", Name: "a", State: kdagv1alpha1.NodeReady, RunMillis: 10},
		{Kind: "ConfigMap", Namespace: "ns", Name: "b", State: kdagv1alpha1.NodeWaiting, WaitMillis: 4, RunMillis: 36},
	}
	if !slices.Equal(sum.CriticalPath, want) || sum.DurationMillis != 50 || sum.TraceID != "" {
		t.Errorf("summary %+v, want path %+v, 50 ms, no trace ID (no span)", sum, want)
	}
}

func TestWaitingFor(t *testing.T) {
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	earlier := metav1.NewTime(now.Add(-42 * time.Second))
	r := pathOutcome(
		pathNode{name: "a", times: [3]int{0, 0, 10}},
		pathNode{name: "slow", times: [3]int{0, 0, 20}, state: kdagv1alpha1.NodeWaiting},
		pathNode{name: "other", times: [3]int{0, 0, 5}, state: kdagv1alpha1.NodeWaiting},
		pathNode{name: "behind", blockers: []int{1}, state: kdagv1alpha1.NodeBlocked},
	)
	got := r.waitingFor(nil, now)
	if got == nil || got.Name != "slow" || got.State != kdagv1alpha1.NodeWaiting || !got.Since.Time.Equal(now) {
		t.Fatalf("waitingFor = %+v, want the waiting node on the critical path, since now", got)
	}
	kept := r.waitingFor(&kdagv1alpha1.WaitingFor{Kind: "ConfigMap", Namespace: "ns", Name: "slow", Since: earlier}, now)
	if !kept.Since.Equal(&earlier) {
		t.Errorf("same node: since %v, want the earlier %v kept", kept.Since, earlier)
	}
	moved := r.waitingFor(&kdagv1alpha1.WaitingFor{Kind: "ConfigMap", Namespace: "ns", Name: "a", Since: earlier}, now)
	if !moved.Since.Time.Equal(now) {
		t.Errorf("another node: since %v, want now", moved.Since)
	}
	offPath := pathOutcome(
		pathNode{name: "done", times: [3]int{0, 0, 30}},
		pathNode{name: "failed", times: [3]int{0, 0, 5}, state: kdagv1alpha1.NodeFailed},
	)
	if got := offPath.waitingFor(nil, now); got == nil || got.Name != "failed" || got.State != kdagv1alpha1.NodeFailed {
		t.Errorf("waitingFor = %+v, want the failed node off the critical path", got)
	}
	if got := pathOutcome(pathNode{name: "a", times: [3]int{0, 0, 1}}).waitingFor(nil, now); got != nil {
		t.Errorf("all ready: waitingFor = %+v, want nil", got)
	}
}
