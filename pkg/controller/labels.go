package controller

import (
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
)

// CacheByObject returns the manager cache settings that keep, for each given owned type, only
// the objects a kdag controller applied (those with kdagv1alpha1.LabelController), so the cache's memory
// follows what kdag owns rather than the cluster's size. Pass it as cache.Options.ByObject.
//
// Do not include a type that a kdag controller also reconciles as an owner (a child custom
// resource): its controller must see every object of its type, labelled or not.
func CacheByObject(owned ...client.Object) map[client.Object]cache.ByObject {
	req, err := labels.NewRequirement(kdagv1alpha1.LabelController, selection.Exists, nil)
	if err != nil {
		panic(err) // a constant, valid label key
	}
	sel := labels.NewSelector().Add(*req)
	out := make(map[client.Object]cache.ByObject, len(owned))
	for _, obj := range owned {
		out[obj] = cache.ByObject{Label: sel}
	}
	return out
}
