package controller

import (
	"net/http"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// mappingCache is the reconciler's RESTMapper: the manager's, with the mappings it found for one
// group, kind and version remembered, since every node of every reconcile asks (whether a kind
// is namespaced) and the manager's mapper walks every API group for each answer. Failures are
// not remembered: a kind whose CRD is installed later is found then. A kind's resource and scope
// do not change while its CRD exists.
type mappingCache struct {
	meta.RESTMapper
	mappings sync.Map // mappingKey → *meta.RESTMapping
}

type mappingKey struct {
	gk      schema.GroupKind
	version string
}

// newMappingCache returns m remembering its mappings; m itself when it already does.
func newMappingCache(m meta.RESTMapper) *mappingCache {
	if c, ok := m.(*mappingCache); ok {
		return c
	}
	return &mappingCache{RESTMapper: m}
}

// RESTMapping implements meta.RESTMapper.
func (m *mappingCache) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	if len(versions) != 1 {
		return m.RESTMapper.RESTMapping(gk, versions...)
	}
	key := mappingKey{gk: gk, version: versions[0]}
	if v, ok := m.mappings.Load(key); ok {
		return v.(*meta.RESTMapping), nil
	}
	mapping, err := m.RESTMapper.RESTMapping(gk, versions...)
	if err != nil {
		return nil, err
	}
	m.mappings.Store(key, mapping)
	return mapping, nil
}

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
	return newMappingCache(m), nil
}
