package reconciler

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kdag-dev/kdag/pkg/graph"
	"github.com/kdag-dev/kdag/pkg/testing/testapi"
)

// BenchmarkRenderCreate measures the client CPU kdag spends rendering one node the first time
// (no memo yet), without any API request: the desired object (apply.Desired: conversion,
// owner reference, labels, desired hash), its content hash, the fingerprint of the author's
// object and the dependencies' hash of 10 blockers. It is the per-node render work of a first
// deploy (BenchmarkConverge), measured alone so that a busy machine does not blur it.
func BenchmarkRenderCreate(b *testing.B) {
	owner := &testapi.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "w", UID: types.UID("8a1c7f2e-0000-4000-8000-000000000001")}}
	widget := &testapi.Widget{}
	c := &Reconciler{name: "bench", scheme: scheme, ownerGVK: testapi.GroupVersion.WithKind("Widget")}
	layers := testapi.ConvergeLayers(widget, 10, 2)
	specs := make([]*nodeSpec, 0, 20)
	results := make([]nodeResult, 20)
	var prev []Node
	for d, layer := range layers {
		var cur []Node
		for i, obj := range layer {
			obj.SetName("w-" + obj.GetName())
			idx := d*10 + i
			gvk := corev1.SchemeGroupVersion.WithKind("Secret")
			if _, ok := obj.(*corev1.ConfigMap); ok {
				gvk.Kind = "ConfigMap"
			}
			s := &nodeSpec{id: graph.NodeID{Kind: gvk.Kind, Namespace: "ns", Name: obj.GetName()}, gvk: gvk, obj: obj, blockers: prev}
			s.obj.SetNamespace("ns")
			specs = append(specs, s)
			results[idx] = nodeResult{spec: s, contentHash: "0123456789abcdef0123456789abcdef"}
			cur = append(cur, Node{id: s.id, index: idx})
		}
		prev = cur
	}
	b.ReportAllocs()
	for b.Loop() {
		c.renders.forgetOwner(owner.UID)
		for i, s := range specs[10:] {
			if _, _, err := c.render(owner, s, results, false); err != nil {
				b.Fatal(err)
			}
			_ = i
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*10), "ns/node")
}
