package reconciler

import (
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"testing"

	"github.com/pkg/errors"
	"k8s.io/apimachinery/pkg/runtime"

	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/graph"
)

// testOutcome builds a summarized outcome from specs and their states, as runGraph would.
func testOutcome(specs []*nodeSpec, states []kdagv1alpha1.NodeState) *outcome {
	r := &outcome{nodes: make([]nodeResult, len(specs))}
	for i, s := range specs {
		r.nodes[i] = nodeResult{spec: s, state: states[i]}
		switch states[i] {
		case kdagv1alpha1.NodeWaiting:
			r.nodes[i].message = "waiting for " + s.id.String()
		case kdagv1alpha1.NodeFailed:
			r.nodes[i].err = errors.Errorf("%s: boom", s.id)
		case kdagv1alpha1.NodeBlocked:
			r.nodes[i].message = "waiting for " + specs[s.blockers[0].index].id.String()
		}
	}
	r.summarize()
	return r
}

// testSpecs links specs by blocker indices, as Graph.Add does.
func testSpecs(ids []graph.NodeID, blockers [][]int) []*nodeSpec {
	specs := make([]*nodeSpec, len(ids))
	for i, id := range ids {
		specs[i] = &nodeSpec{id: id}
		for _, b := range blockers[i] {
			specs[i].blockers = append(specs[i].blockers, Node{id: ids[b], index: b})
		}
	}
	return specs
}

func TestGraphSummary_NodesWithStatesAndBlockers(t *testing.T) {
	specs := testSpecs([]graph.NodeID{
		{Kind: "Secret", Namespace: "ns", Name: "s0"},
		{Kind: "Service", Namespace: "ns", Name: "svc1"},
		{Group: "gitea.kdag.dev", Kind: "PostgreSQL", Namespace: "ns", Name: "db2"},
		{Group: "apps", Kind: "Deployment", Namespace: "ns", Name: "app3"},
		{Group: "rbac.authorization.k8s.io", Kind: "ClusterRoleBinding", Name: "crb4"},
	}, [][]int{nil, nil, {0}, {2, 1}, {3}})
	states := []kdagv1alpha1.NodeState{kdagv1alpha1.NodeReady, kdagv1alpha1.NodeReady, kdagv1alpha1.NodeWaiting, kdagv1alpha1.NodeBlocked, kdagv1alpha1.NodeBlocked}
	r := testOutcome(specs, states)

	g := r.graphSummary()
	want := []kdagv1alpha1.GraphNode{
		{Kind: "Secret", Namespace: "ns", Name: "s0", State: kdagv1alpha1.NodeReady},
		{Kind: "Service", Namespace: "ns", Name: "svc1", State: kdagv1alpha1.NodeReady},
		{Group: "gitea.kdag.dev", Kind: "PostgreSQL", Namespace: "ns", Name: "db2", State: kdagv1alpha1.NodeWaiting, Blockers: "0"},
		{Group: "apps", Kind: "Deployment", Namespace: "ns", Name: "app3", State: kdagv1alpha1.NodeBlocked, Blockers: "2,1"},
		{Group: "rbac.authorization.k8s.io", Kind: "ClusterRoleBinding", Name: "crb4", State: kdagv1alpha1.NodeBlocked, Blockers: "3"},
	}
	if !reflect.DeepEqual(g.Nodes, want) {
		t.Errorf("nodes:\n got %+v\nwant %+v", g.Nodes, want)
	}
	if g.Truncated {
		t.Error("truncated = true for 5 nodes")
	}
	if g.Total != 5 || g.Ready != 2 || g.Waiting != 1 || g.Blocked != 2 || len(g.NotReady) != 3 {
		t.Errorf("counts %+v, want 5 total, 2 ready, 1 waiting, 2 blocked, 3 not ready", g)
	}

	// The same outcome gives the same status, so writing it does not trigger another write.
	again := testOutcome(specs, states).graphSummary()
	if !reflect.DeepEqual(g, again) {
		t.Errorf("summary is not stable:\n%+v\n%+v", g, again)
	}

	// The JSON shape tools read: state names, blockers as one string of indices, no empty fields.
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(g)
	if err != nil {
		t.Fatal(err)
	}
	nodes := u["nodes"].([]any)
	first, last := nodes[0].(map[string]any), nodes[4].(map[string]any)
	if _, ok := first["group"]; ok {
		t.Errorf("core-group node has a group field: %v", first)
	}
	if _, ok := first["blockerIndices"]; ok {
		t.Errorf("node without blockers has a blockerIndices field: %v", first)
	}
	if _, ok := last["namespace"]; ok {
		t.Errorf("cluster-scoped node has a namespace field: %v", last)
	}
	if last["blockerIndices"] != "3" || last["state"] != "Blocked" {
		t.Errorf("last node %v, want blockerIndices \"3\" and state Blocked", last)
	}
	if app := nodes[3].(map[string]any); app["blockerIndices"] != "2,1" {
		t.Errorf("node app3 %v, want blockerIndices \"2,1\" (its blockers in the order they were added)", app)
	}
	if _, ok := u["truncated"]; ok {
		t.Errorf("truncated field set: %v", u)
	}
}

// TestGraphSummary_BlockersNamedTwiceListedOnce: an operator may name a blocker more than once
// (DependsOn and After of the same node, or a loop that repeats itself). The status lists each
// index once, in the order first named, so that the string stays within the CRD's maxLength
// (512) and reads back within NodeIndices' bound, whatever was declared.
func TestGraphSummary_BlockersNamedTwiceListedOnce(t *testing.T) {
	n := kdagv1alpha1.MaxGraphNodes
	ids := make([]graph.NodeID, n)
	blockers := make([][]int, n)
	for i := range ids {
		ids[i] = graph.NodeID{Kind: "ConfigMap", Namespace: "ns", Name: fmt.Sprintf("cm-%d", i)}
	}
	var want []int32
	for round := 0; round < 5; round++ {
		for j := 0; j < n-1; j += 2 {
			blockers[n-1] = append(blockers[n-1], j)
			if round == 0 {
				want = append(want, int32(j))
			}
		}
	}
	blockers[n-1] = append(blockers[n-1], 1, 0, 1)
	want = append(want, 1)
	states := make([]kdagv1alpha1.NodeState, n)
	for i := range states {
		states[i] = kdagv1alpha1.NodeReady
	}
	last := testOutcome(testSpecs(ids, blockers), states).graphSummary().Nodes[n-1]
	if got, err := last.Blockers.Indices(); err != nil || !slices.Equal(got, want) {
		t.Fatalf("blockerIndices %q read back as %v, %v; want %v", last.Blockers, got, err, want)
	}
	if len(last.Blockers) > 512 {
		t.Errorf("blockerIndices is %d bytes, over the CRD's maxLength 512", len(last.Blockers))
	}
}

func TestGraphSummary_CapsNodes(t *testing.T) {
	build := func(n int) *outcome {
		specs := make([]*nodeSpec, n)
		states := make([]kdagv1alpha1.NodeState, n)
		for i := range specs {
			specs[i] = &nodeSpec{id: graph.NodeID{Kind: "ConfigMap", Namespace: "ns", Name: fmt.Sprintf("cm-%03d", i)}}
			if i > 0 {
				specs[i].blockers = []Node{{id: specs[i-1].id, index: i - 1}}
			}
			states[i] = kdagv1alpha1.NodeReady
		}
		states[n-1] = kdagv1alpha1.NodeWaiting
		return testOutcome(specs, states)
	}

	g := build(kdagv1alpha1.MaxGraphNodes).graphSummary()
	if g.Truncated || len(g.Nodes) != kdagv1alpha1.MaxGraphNodes {
		t.Fatalf("%d nodes: truncated %v, %d listed; want all listed", kdagv1alpha1.MaxGraphNodes, g.Truncated, len(g.Nodes))
	}
	last := g.Nodes[kdagv1alpha1.MaxGraphNodes-1]
	if last.Name != fmt.Sprintf("cm-%03d", kdagv1alpha1.MaxGraphNodes-1) || last.State != kdagv1alpha1.NodeWaiting ||
		last.Blockers != kdagv1alpha1.NodeIndices(strconv.Itoa(kdagv1alpha1.MaxGraphNodes-2)) {
		t.Errorf("last node %+v", last)
	}

	g = build(kdagv1alpha1.MaxGraphNodes + 1).graphSummary()
	if !g.Truncated || g.Nodes != nil {
		t.Fatalf("%d nodes: truncated %v, %d listed; want truncated and none listed", kdagv1alpha1.MaxGraphNodes+1, g.Truncated, len(g.Nodes))
	}
	if g.Total != int32(kdagv1alpha1.MaxGraphNodes+1) || g.Ready != int32(kdagv1alpha1.MaxGraphNodes) || g.Waiting != 1 || len(g.NotReady) != 1 {
		t.Errorf("counts of a truncated graph %+v, want them all", g)
	}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(g)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := u["nodes"]; ok || u["truncated"] != true {
		t.Errorf("truncated summary %v, want truncated: true and no nodes", u)
	}
}

func TestGraphSummary_NodeWithoutSpecListsNoNodes(t *testing.T) {
	// runGraph's "add to graph" failure leaves later slots without a spec.
	s := &nodeSpec{id: graph.NodeID{Kind: "ConfigMap", Namespace: "ns", Name: "a"}}
	r := &outcome{nodes: []nodeResult{{spec: s, state: kdagv1alpha1.NodeFailed, err: errors.New("add to graph")}, {}}}
	r.summarize()
	g := r.graphSummary()
	if g.Nodes != nil || g.Truncated {
		t.Errorf("summary %+v, want no nodes and not truncated", g)
	}
}
