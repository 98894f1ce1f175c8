package plan

import (
	"slices"
	"testing"
)

func TestChangedFields(t *testing.T) {
	container := func(name, image string) map[string]any { return map[string]any{"name": name, "image": image} }
	for _, tc := range []struct {
		name          string
		before, after map[string]any
		want          []string
	}{
		{"equal", map[string]any{"a": 1}, map[string]any{"a": 1}, nil},
		{"scalar", map[string]any{"spec": map[string]any{"replicas": 1}}, map[string]any{"spec": map[string]any{"replicas": 2}}, []string{"spec.replicas"}},
		{"added and removed", map[string]any{"spec": map[string]any{"a": 1}}, map[string]any{"spec": map[string]any{"b": 1}}, []string{"spec.a", "spec.b"}},
		{"bracketed key", map[string]any{"metadata": map[string]any{"annotations": map[string]any{"kdag.dev/desired-hash": "x"}}},
			map[string]any{"metadata": map[string]any{"annotations": map[string]any{"kdag.dev/desired-hash": "y"}}},
			[]string{"metadata.annotations[kdag.dev/desired-hash]"}},
		{"named items", map[string]any{"containers": []any{container("web", "a:1"), container("side", "b:1")}},
			map[string]any{"containers": []any{container("web", "a:2"), container("side", "b:1")}},
			[]string{"containers[name=web].image"}},
		{"numbered items", map[string]any{"args": []any{"a", "b"}}, map[string]any{"args": []any{"a", "c"}}, []string{"args[1]"}},
		{"a list that grows", map[string]any{"args": []any{"a"}}, map[string]any{"args": []any{"a", "b"}}, []string{"args"}},
		{"a type that changes", map[string]any{"x": map[string]any{}}, map[string]any{"x": "s"}, []string{"x"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := changedFields(tc.before, tc.after); !slices.Equal(got, tc.want) {
				t.Errorf("changedFields = %q, want %q", got, tc.want)
			}
		})
	}
}
