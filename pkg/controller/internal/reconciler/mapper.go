package reconciler

import (
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
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

// MappingCache returns m remembering the mappings it finds (controller.MapperProvider's mapper,
// and each reconciler's); m itself when it already does.
func MappingCache(m meta.RESTMapper) meta.RESTMapper { return newMappingCache(m) }
