package controller_test

import (
	"context"
	"reflect"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

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

// TestStatus_OlderOperatorsBlockersList is the upgrade of the blockers' format: an older kdag
// wrote each node's blockers as a list of integers named blockers. With the CRD of this version
// such a status apply is accepted (an operator not upgraded yet keeps working; the API server
// refuses an apply that names a field its schema lacks), and the next reconcile of this version
// writes the nodes with blockerIndices and without the list.
func TestStatus_OlderOperatorsBlockersList(t *testing.T) {
	f := newFixture(t, widgetRM{readyDeployment: false})
	f.widget("app", testapi.WidgetSpec{MaxReplicas: 3})
	f.settle("app")

	var nodes []any
	for _, n := range f.status("app").Graph.Nodes {
		m := map[string]any{"kind": n.Kind, "namespace": n.Namespace, "name": n.Name, "state": string(n.State)}
		if n.Group != "" {
			m["group"] = n.Group
		}
		if n.Name == "app" && n.Kind == "Deployment" {
			m["blockers"] = []any{int64(0), int64(1)}
		}
		nodes = append(nodes, m)
	}
	older := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": testapi.GroupVersion.String(), "kind": "Widget",
		"metadata": map[string]any{"namespace": f.ns, "name": "app"},
		"status":   map[string]any{"graph": map[string]any{"total": int64(4), "ready": int64(3), "nodes": nodes}},
	}}
	if err := f.cl.Status().Apply(context.Background(), client.ApplyConfigurationFromUnstructured(older),
		client.FieldOwner(f.fieldManager), client.ForceOwnership); err != nil {
		t.Fatalf("an older operator's status apply with blockers as a list: %v; want it accepted", err)
	}
	if n := f.status("app").Graph.Nodes[3]; !slices.Equal(n.DeprecatedBlockers, []int32{0, 1}) || n.Blockers != "" {
		t.Fatalf("the Deployment's node after the older apply: %+v, want blockers [0 1] and no blockerIndices", n)
	}

	f.settle("app")
	if g := f.status("app").Graph; g == nil || len(g.Nodes) != 4 || g.Nodes[3].Blockers != "0-1" || g.Nodes[3].DeprecatedBlockers != nil {
		t.Errorf("status.graph after the next reconcile: %+v, want the Deployment's blockerIndices \"0-1\" and no blockers list", g)
	}
}
