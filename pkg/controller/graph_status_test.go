package controller_test

import (
	"reflect"
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
		{Group: "apps", Kind: "Deployment", Namespace: f.ns, Name: "app", State: kdagv1alpha1.NodeWaiting, Blockers: []int32{0, 1}},
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
