package testapi

import (
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ConvergePayload makes every object of the converge graph (ConvergeLayers) about as large as a
// small real ConfigMap: 256 bytes.
const ConvergePayload = "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx" +
	"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx" +
	"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx" +
	"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"

// ConvergeLayers returns the objects of the benchmarks' graph of an owner (BenchmarkConverge,
// BenchmarkRenderCreate): the objects of an owner's width × depth graph, layer by layer: layer d
// holds width objects named "<owner>-<d>-<i>", ConfigMaps in even columns and Secrets in odd
// ones. Every object of a layer depends on every object of the layer before, so the graph has
// exactly depth steps whatever the scheduler does.
func ConvergeLayers(w *Widget, width, depth int) [][]client.Object {
	layers := make([][]client.Object, depth)
	for d := range depth {
		layers[d] = make([]client.Object, width)
		for i := range width {
			om := metav1.ObjectMeta{Name: w.Name + "-" + strconv.Itoa(d) + "-" + strconv.Itoa(i)}
			data := map[string]string{"layer": strconv.Itoa(d), "column": strconv.Itoa(i), "payload": ConvergePayload}
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
