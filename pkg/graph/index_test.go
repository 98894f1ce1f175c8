package graph

import (
	"fmt"
	"testing"
)

// TestIndex checks the index against a map over many IDs, starting from the
// smallest table so that it grows several times.
func TestIndex(t *testing.T) {
	tests := []struct {
		name string
		ids  func(i int) any
	}{
		{"int", func(i int) any { return i * 7919 }},
		{"string", func(i int) any { return fmt.Sprintf("ConfigMap default/cm-%d", i) }},
		{"struct", func(i int) any { return struct{ kind, name string }{"Secret", fmt.Sprint(i%97, "-", i)} }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var x index[any]
			x.init(0)
			var ids []any
			want := map[any]int32{}
			for i := range 5000 {
				id := tt.ids(i)
				j, slot := x.find(ids, id)
				if j >= 0 {
					t.Fatalf("find(%v) = %d before it was inserted", id, j)
				}
				ids = append(ids, id)
				x.insert(ids, slot, int32(i))
				want[id] = int32(i)
			}
			if 2*x.n > len(x.slots) || x.n != len(ids) {
				t.Errorf("%d IDs in %d slots, counted %d", len(ids), len(x.slots), x.n)
			}
			for id, i := range want {
				if got, ok := x.lookup(ids, id); !ok || got != i {
					t.Errorf("lookup(%v) = %d, %v; want %d", id, got, ok, i)
				}
			}
			if got, ok := x.lookup(ids, tt.ids(-1)); ok {
				t.Errorf("lookup of an absent ID = %d, true", got)
			}
		})
	}
	var empty index[int]
	if _, ok := empty.lookup(nil, 1); ok {
		t.Error("the zero index finds an ID")
	}
}
