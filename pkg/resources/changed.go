package resources

import (
	"slices"
	"strings"

	"github.com/pkg/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// ChangedFields returns the fields directly below the field at of desired (a dotted path of map
// keys, such as "spec") whose desired value live does not hold, as sorted dotted paths
// ("spec.volumeClaimTemplates"). Values compare as Drift compares them: numbers by value, a
// quantity in canonical form, a desired map is held by a live map that holds at least its keys
// with equal values (so what the API server defaults is no change), lists element by element.
//
// updatable are fields, relative to at, that are not reported ("replicas"); a field with an
// updatable field below it ("resources" for "resources.requests") is compared below it instead,
// by the same rules, and reported at that depth ("spec.resources.limits"). A field that live
// holds and desired leaves out is not reported: desired does not say whether it removes it.
//
// Operators use it to say which fields an update changes where the API server names only their
// parent (a StatefulSet's "spec" up to Kubernetes 1.36). It returns nil when desired has no map at
// at, and an error naming the object when live or desired is nil or live cannot be converted.
func ChangedFields(live Object, desired *unstructured.Unstructured, at string, updatable []string) ([]string, error) {
	if isNil(live) || desired == nil {
		return nil, errors.Errorf("compare %s with %s: nil object", describe(kindOf(desired), live), describeU(desired))
	}
	liveObj, err := lazyContent(live)()
	if err != nil {
		return nil, errors.Wrapf(err, "compare %s with the desired object", describe(kindOf(desired), live))
	}
	path := strings.Split(at, ".")
	want, _, _ := unstructured.NestedFieldNoCopy(desired.Object, path...)
	got, _, _ := unstructured.NestedFieldNoCopy(liveObj, path...)
	var changed []string
	changedBelow(want, got, at, updatable, &changed)
	slices.Sort(changed)
	return changed, nil
}

// changedBelow appends to changed the fields of the desired map whose values live does not hold,
// named below at, leaving out updatable and comparing below a field that has updatable ones below it.
func changedBelow(desired, live any, at string, updatable []string, changed *[]string) {
	want, ok := desired.(map[string]any)
	if !ok {
		return
	}
	got, _ := live.(map[string]any)
	for k, v := range want {
		if slices.Contains(updatable, k) {
			continue
		}
		var below []string
		for _, u := range updatable {
			if rest, ok := strings.CutPrefix(u, k+"."); ok {
				below = append(below, rest)
			}
		}
		lv, ok := got[k]
		switch {
		case len(below) > 0:
			changedBelow(v, lv, at+"."+k, below, changed)
		case !ok || !equalSemantic(v, lv):
			*changed = append(*changed, at+"."+k)
		}
	}
}
