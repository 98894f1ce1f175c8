package controller_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kdag-dev/kdag/pkg/controller"
	"github.com/kdag-dev/kdag/pkg/graph"
	"github.com/kdag-dev/kdag/pkg/internal/graphplan"
	"github.com/kdag-dev/kdag/pkg/plan"
	"github.com/kdag-dev/kdag/pkg/testing/testapi"
)

// TestGraph_OptionsReachTheNode checks the authoring surface over the reconciler's graph
// builder: each public node option, given to Graph.Add or Graph.Reference, is the node's as the
// plan (the same build a reconcile runs) shows it, and a nil NodeOption is left out, not a panic.
func TestGraph_OptionsReachTheNode(t *testing.T) {
	id := func(kind, name string) graph.NodeID {
		g := ""
		if kind == "Job" {
			g = "batch"
		}
		return graph.NodeID{Group: g, Kind: kind, Namespace: "ns", Name: name}
	}
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "backup"}}
	cases := []struct {
		name string
		add  func(b *controller.Graph)
		want graphplan.PlannedNode // the last node's
	}{
		{"no option", func(b *controller.Graph) { b.Add(cm("a")) }, graphplan.PlannedNode{ID: id("ConfigMap", "a")}},
		{"nil option", func(b *controller.Graph) { b.Add(cm("a"), nil, controller.Keep()) },
			graphplan.PlannedNode{ID: id("ConfigMap", "a"), Keep: true}},
		{"CreateOnly", func(b *controller.Graph) { b.Add(cm("a"), controller.CreateOnly()) },
			graphplan.PlannedNode{ID: id("ConfigMap", "a"), CreateOnly: true}},
		{"Adopt", func(b *controller.Graph) { b.Add(cm("a"), controller.Adopt()) },
			graphplan.PlannedNode{ID: id("ConfigMap", "a"), Adopt: true}},
		{"Finished", func(b *controller.Graph) { b.Add(cm("a"), controller.Finished()) },
			graphplan.PlannedNode{ID: id("ConfigMap", "a"), Finished: true}},
		{"Recreate", func(b *controller.Graph) { b.Add(cm("a"), controller.Recreate(metav1.DeletePropagationOrphan)) },
			graphplan.PlannedNode{ID: id("ConfigMap", "a"), Recreate: metav1.DeletePropagationOrphan}},
		{"DependsOn", func(b *controller.Graph) { b.Add(cm("b"), controller.DependsOn(b.Add(cm("a")))) },
			graphplan.PlannedNode{ID: id("ConfigMap", "b"), Blockers: []graph.NodeID{id("ConfigMap", "a")}}},
		{"After", func(b *controller.Graph) { b.Add(cm("b"), controller.After(b.Add(cm("a")))) },
			graphplan.PlannedNode{ID: id("ConfigMap", "b"), Blockers: []graph.NodeID{id("ConfigMap", "a")},
				OrderOnly: []graph.NodeID{id("ConfigMap", "a")}}},
		{"ProtectsData", func(b *controller.Graph) {
			b.Add(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "key"}}, controller.CreateOnly(), controller.ProtectsData(cm("data")))
		}, graphplan.PlannedNode{ID: id("Secret", "key"), CreateOnly: true, Protects: id("ConfigMap", "data")}},
		{"BeforeDelete", func(b *controller.Graph) { b.Add(job, controller.BeforeDelete(time.Minute)) },
			graphplan.PlannedNode{ID: id("Job", "backup"), BeforeDelete: time.Minute}},
		{"Reference with RequireKeys", func(b *controller.Graph) {
			b.Reference(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "db"}}, controller.RequireKeys("user", "password", "user"))
		}, graphplan.PlannedNode{ID: id("Secret", "db"), Reference: true, RequireKeys: []string{"password", "user"}}},
		{"inferred", func(b *controller.Graph) {
			b.Add(cm("app-config"))
			b.Add(webDeployment(&testapi.Widget{ObjectMeta: metav1.ObjectMeta{Name: "app"}}, 1))
		}, graphplan.PlannedNode{ID: graph.NodeID{Group: "apps", Kind: "Deployment", Namespace: "ns", Name: "app"},
			Blockers: []graph.NodeID{id("ConfigMap", "app-config")}, Inferred: []graph.NodeID{id("ConfigMap", "app-config")}}},
		{"NoInferredDependencies", func(b *controller.Graph) {
			b.Add(cm("app-config"))
			b.Add(webDeployment(&testapi.Widget{ObjectMeta: metav1.ObjectMeta{Name: "app"}}, 1), controller.NoInferredDependencies())
		}, graphplan.PlannedNode{ID: graph.NodeID{Group: "apps", Kind: "Deployment", Namespace: "ns", Name: "app"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rm := funcRM{add: func(_ *testapi.Widget, b *controller.Graph) error { tc.add(b); return nil }}.owning(&batchv1.Job{})
			owner := &testapi.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "w"}}
			p, err := plan.NewPlan(t.Context(), rm, owner, controller.SharedScheme, nil)
			if err != nil {
				t.Fatal(err)
			}
			got := p.Nodes[len(p.Nodes)-1]
			if diff := cmp.Diff(tc.want, got, cmpopts.IgnoreFields(graphplan.PlannedNode{}, "GVK", "Object"), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("last node (-want +got):\n%s", diff)
			}
		})
	}
}

// TestGraph_MistakesAreOneGraphError checks that the mistakes AddResources makes through the
// public Graph come back together as one *controller.GraphError, each naming its node.
func TestGraph_MistakesAreOneGraphError(t *testing.T) {
	rm := funcRM{add: func(_ *testapi.Widget, b *controller.Graph) error {
		b.Add(cm("a"))
		b.Add(cm("a"))                                          // twice
		b.Add(cm("b"), controller.RequireKeys("k"))             // RequireKeys on an owned object
		b.Reference(cm("c"), controller.Keep())                 // an option a Reference does not take
		b.Add(cm("d"), controller.DependsOn(controller.Node{})) // an unknown blocker
		return nil
	}}
	owner := &testapi.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "w"}}
	_, err := plan.NewPlan(t.Context(), rm, owner, controller.SharedScheme, nil)
	var ge *controller.GraphError
	if !errors.As(err, &ge) {
		t.Fatalf("NewPlan: %v, want a *controller.GraphError", err)
	}
	want := []string{"ConfigMap ns/a: added twice", "ConfigMap ns/b: RequireKeys applies to a Reference only",
		"ConfigMap ns/c: a Reference takes no option but RequireKeys", `Add ConfigMap ns/d: blocker`}
	if len(ge.Errs) != len(want) {
		t.Fatalf("%d mistakes, want %d: %v", len(ge.Errs), len(want), err)
	}
	for i, w := range want {
		if got := ge.Errs[i].Error(); !strings.Contains(got, w) {
			t.Errorf("mistake %d = %q, want it to contain %q", i, got, w)
		}
	}
}

// cm returns an empty ConfigMap named name.
func cm(name string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}
}
