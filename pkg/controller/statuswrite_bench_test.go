package controller_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/testing/testapi"
)

// BenchmarkStatusApply measures what one server-side apply of an owner's status costs the API
// server as a function of the status's shape: the Ready status of a width 50 × depth 2 graph
// (the widest shape of BenchmarkConverge: 50 nodes, then 50 that each wait for all of the first
// 50), applied to a fresh Widget per iteration (created untimed) through the uncached client.
//
//   - graph=none: conditions and counts only, as the raw SSA floor writes;
//   - graph=W50xD2/blockers=none: the 100 nodes without their blockers;
//   - graph=W50xD2/blockers=indices: as kdag writes it, each node's blockers one string ("0-49");
//   - graph=W50xD2/blockers=integers: as kdag wrote it before, each node's blockers a list of
//     integers (the deprecated field): 2,500 list elements.
//
// ns/op is the apply's round trip. Run the shapes alternately (-test.count) for a comparison.
func BenchmarkStatusApply(b *testing.B) {
	quietLogs()
	f := startFixture(b, fixtureConfig{}, convergeRM(1, 1))
	created := 0 // Widgets so far: the testing package runs each sub-benchmark more than once
	for _, shape := range []string{"none", "W50xD2/blockers=none", "W50xD2/blockers=indices", "W50xD2/blockers=integers"} {
		b.Run("graph="+shape, func(b *testing.B) {
			status, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&testapi.WidgetStatus{Status: wideStatus(f.ns, shape)})
			if err != nil {
				b.Fatal(err)
			}
			prefix := strings.NewReplacer("/", "-", "=", "-").Replace(strings.ToLower(shape)) + "-"
			for range b.N {
				b.StopTimer()
				created++
				name := prefix + strconv.Itoa(created)
				f.widget(name, testapi.WidgetSpec{MaxReplicas: 1})
				u := &unstructured.Unstructured{Object: map[string]any{
					"apiVersion": testapi.GroupVersion.String(), "kind": "Widget",
					"metadata": map[string]any{"namespace": f.ns, "name": name}, "status": status,
				}}
				b.StartTimer()
				if err := f.cl.Status().Apply(context.Background(), client.ApplyConfigurationFromUnstructured(u),
					client.FieldOwner(f.fieldManager), client.ForceOwnership); err != nil {
					b.Fatalf("apply the status of %s: %v", name, err)
				}
			}
		})
	}
}

// wideStatus is the Ready status of the W50×D2 graph in the shape BenchmarkStatusApply names.
func wideStatus(ns, shape string) kdagv1alpha1.Status {
	st := kdagv1alpha1.Status{ObservedGeneration: 1, Conditions: []metav1.Condition{{
		Type: "Ready", Status: metav1.ConditionTrue, Reason: "Ready", Message: "all 100 nodes are ready",
		LastTransitionTime: metav1.Now(), ObservedGeneration: 1,
	}}, Graph: &kdagv1alpha1.GraphSummary{Total: 100, Ready: 100}}
	if shape == "none" {
		return st
	}
	first := make([]int32, 50)
	for i := range first {
		first[i] = int32(i)
	}
	for i := range 100 {
		n := kdagv1alpha1.GraphNode{Kind: "ConfigMap", Namespace: ns, Name: fmt.Sprintf("widget-l%d-%d", i/50, i%50), State: kdagv1alpha1.NodeReady}
		if i >= 50 {
			switch shape {
			case "W50xD2/blockers=indices":
				n.Blockers = kdagv1alpha1.FormatNodeIndices(first)
			case "W50xD2/blockers=integers":
				n.DeprecatedBlockers = first
			}
		}
		st.Graph.Nodes = append(st.Graph.Nodes, n)
	}
	return st
}
