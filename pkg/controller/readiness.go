package controller

import (
	"github.com/pkg/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kdag-dev/kdag/pkg/api"
)

// ConditionReady is a ReadyFunc for custom resources whose controller follows the kstatus
// conventions, kdag owners among them: ready when status.observedGeneration equals
// metadata.generation and the Ready condition is True. Use it with ReadyWhen for child custom
// resources: kstatus alone calls a resource whose controller has not written any status yet
// Current, which would open the gate too early.
func ConditionReady(live client.Object) (bool, error) {
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(live)
	if err != nil {
		return false, errors.Wrap(err, "convert")
	}
	observed, _, _ := unstructured.NestedInt64(u, "status", "observedGeneration")
	if observed != live.GetGeneration() {
		return false, nil
	}
	conditions, _, _ := unstructured.NestedSlice(u, "status", "conditions")
	for _, c := range conditions {
		m, ok := c.(map[string]any)
		if ok && m["type"] == api.ConditionReady {
			return m["status"] == "True", nil
		}
	}
	return false, nil
}
