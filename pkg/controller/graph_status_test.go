package controller_test

import (
	"reflect"
	"slices"
	"testing"

	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/testing/testapi"
)

func TestStatus_GraphNodesThroughTheAPIServer(t *testing.T) {
	f := newFixture(t, widgetRM{readyDeployment: false})
	f.widget("app", testapi.WidgetSpec{MaxReplicas: 3})
	f.settle("app") // settles: writing nodes does not make the next reconcile write again

	g := f.status("app").Graph
	want := []kdagv1alpha1.GraphNode{
		{Kind: "ConfigMap", Namespace: f.ns, Name: "app-config", State: kdagv1alpha1.NodeReady},
		{Kind: "Secret", Namespace: f.ns, Name: "app-secret", State: kdagv1alpha1.NodeReady},
		{Kind: "Service", Namespace: f.ns, Name: "app", State: kdagv1alpha1.NodeReady},
		{Group: "apps", Kind: "Deployment", Namespace: f.ns, Name: "app", State: kdagv1alpha1.NodeWaiting, Blockers: "0-1"},
	}
	if g == nil || !reflect.DeepEqual(g.Nodes, want) || g.Truncated {
		t.Fatalf("status.graph %+v\nwant nodes %+v", g, want)
	}

	f.markDeploymentAvailable("app")
	f.settle("app")
	if g = f.status("app").Graph; g == nil || len(g.Nodes) != 4 || g.Nodes[3].State != kdagv1alpha1.NodeReady {
		t.Errorf("status.graph after the Deployment is available: %+v, want the Deployment Ready", g)
	}
}

// TestStatus_WideGraphBlockersThroughTheAPIServer writes the status of the widest converge shape
// (50 nodes, then 50 nodes that each wait for all of the first 50): the API server accepts each
// node's blockers as one string in NodeIndices' list format (its pattern and length), and they
// read back as the indices kdag added.
func TestStatus_WideGraphBlockersThroughTheAPIServer(t *testing.T) {
	f := newFixture(t, convergeRM(50, 2))
	f.widget("wide", testapi.WidgetSpec{MaxReplicas: 1})
	f.settle("wide")

	g := f.status("wide").Graph
	if g == nil || len(g.Nodes) != 100 || g.Ready != 100 {
		t.Fatalf("status.graph %+v, want 100 nodes listed and Ready", g)
	}
	first := make([]int32, 50)
	for i := range first {
		first[i] = int32(i)
	}
	for i, n := range g.Nodes {
		want := kdagv1alpha1.NodeIndices("")
		if i >= 50 {
			want = "0-49"
		}
		if n.Blockers != want || n.Inferred != "" {
			t.Fatalf("node %d (%s): blockerIndices %q, inferredIndices %q; want %q and none", i, n.Name, n.Blockers, n.Inferred, want)
		}
		if got, err := n.Blockers.Indices(); err != nil || (i >= 50 && !slices.Equal(got, first)) {
			t.Fatalf("node %d: blockers read back as %v, %v; want 0 to 49", i, got, err)
		}
	}
}
