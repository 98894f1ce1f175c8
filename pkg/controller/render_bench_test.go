package controller

import (
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

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
	c := &reconciler{name: "bench", scheme: scheme, ownerGVK: testapi.GroupVersion.WithKind("Widget")}
	layers := convergeLayers(widget, 10, 2)
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

// convergePayload makes every object of the converge graph about as large as a small real
// ConfigMap.
var convergePayload = strings.Repeat("x", 256)

// convergeLayers returns the objects of an owner's width × depth graph, layer by layer: layer d
// holds width objects named "<owner>-<d>-<i>", ConfigMaps in even columns and Secrets in odd
// ones. Every object of a layer depends on every object of the layer before, so the graph has
// exactly depth steps whatever the scheduler does.
func convergeLayers(w *testapi.Widget, width, depth int) [][]client.Object {
	layers := make([][]client.Object, depth)
	for d := range depth {
		layers[d] = make([]client.Object, width)
		for i := range width {
			om := metav1.ObjectMeta{Name: w.Name + "-" + strconv.Itoa(d) + "-" + strconv.Itoa(i)}
			data := map[string]string{"layer": strconv.Itoa(d), "column": strconv.Itoa(i), "payload": convergePayload}
			if i%2 == 0 {
				layers[d][i] = &corev1.ConfigMap{ObjectMeta: om, Data: data}
				continue
			}
			bytes := make(map[string][]byte, len(data))
			for k, v := range data {
				bytes[k] = []byte(v)
			}
			layers[d][i] = &corev1.Secret{ObjectMeta: om, Data: bytes}
		}
	}
	return layers
}
