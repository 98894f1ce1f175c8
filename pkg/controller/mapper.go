package controller

import (
	"net/http"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/kdag-dev/kdag/pkg/controller/internal/reconciler"
)

// MapperProvider is a ctrl.Options.MapperProvider: controller-runtime's dynamic RESTMapper
// (apiutil.NewDynamicRESTMapper with cfg and httpClient) with the mapping of each group, kind
// and version remembered once found, as the reconciler does for its own look-ups. Use it when the
// manager's cache is limited to namespaces (ctrl.Options.Cache.DefaultNamespaces): that cache asks
// the manager's mapper whether a kind is namespaced on every read, and the dynamic mapper walks
// every API group for each answer, which made a cached read of an owned object cost about as
// much CPU as kdag's whole check of an unchanged node (docs/benchmarks.md section 3).
//
// Failures are not remembered (a kind whose CRD is installed later is found then); a found
// mapping is kept for the process's life, so a CRD deleted and re-created with another scope
// needs a restart. It returns apiutil.NewDynamicRESTMapper's error.
func MapperProvider(cfg *rest.Config, httpClient *http.Client) (meta.RESTMapper, error) {
	m, err := apiutil.NewDynamicRESTMapper(cfg, httpClient)
	if err != nil {
		return nil, err
	}
	return reconciler.MappingCache(m), nil
}
