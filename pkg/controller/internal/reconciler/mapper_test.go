package reconciler

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// countingMapper counts the RESTMapping calls that reach it.
type countingMapper struct {
	meta.RESTMapper
	calls int
}

func (m *countingMapper) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	m.calls++
	return m.RESTMapper.RESTMapping(gk, versions...)
}

func TestMappingCache_RemembersFoundMappingsOnly(t *testing.T) {
	widgets := schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}
	base := meta.NewDefaultRESTMapper([]schema.GroupVersion{widgets.GroupVersion()})
	counting := &countingMapper{RESTMapper: base}
	m := newMappingCache(counting)

	// Not known yet: the failure reaches the mapper every time, so a CRD installed later is found.
	for range 2 {
		if _, err := m.RESTMapping(widgets.GroupKind(), widgets.Version); !meta.IsNoMatchError(err) {
			t.Fatalf("RESTMapping of an unknown kind: got %v, want a no-match error", err)
		}
	}
	if counting.calls != 2 {
		t.Fatalf("failed look-ups reached the mapper %d times, want 2 (failures are not remembered)", counting.calls)
	}

	base.Add(widgets, meta.RESTScopeNamespace)
	for range 3 {
		mapping, err := m.RESTMapping(widgets.GroupKind(), widgets.Version)
		if err != nil {
			t.Fatal(err)
		}
		if mapping.Scope.Name() != meta.RESTScopeNameNamespace || mapping.Resource.Resource != "widgets" {
			t.Fatalf("mapping = %s %s, want the namespaced resource widgets", mapping.Resource, mapping.Scope.Name())
		}
	}
	if counting.calls != 3 {
		t.Fatalf("the mapper was asked %d times in all, want 3: the found mapping is remembered", counting.calls)
	}

	// Several versions: not remembered, answered by the mapper.
	if _, err := m.RESTMapping(widgets.GroupKind()); err != nil {
		t.Fatal(err)
	}
	if counting.calls != 4 {
		t.Fatalf("a look-up without one version reached the mapper %d times in all, want 4", counting.calls)
	}
	if newMappingCache(m) != m {
		t.Fatal("newMappingCache wrapped a mapping cache again")
	}
}
