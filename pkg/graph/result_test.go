package graph_test

import (
	"encoding/json"
	"testing"

	"github.com/kdag-dev/kdag/pkg/graph"
)

func TestOutcomeText(t *testing.T) {
	want := []string{"succeeded", "failed", "blocked", "canceled"}
	for k, o := range graph.Outcomes() {
		text, err := o.MarshalText()
		if o.String() != want[k] || err != nil || string(text) != want[k] {
			t.Errorf("outcome %d: String() = %q, MarshalText() = %q, %v; want %q", k, o, text, err, want[k])
		}
		var back graph.Outcome
		if err := back.UnmarshalText(text); err != nil || back != o {
			t.Errorf("UnmarshalText(%q) = %v, %v", text, back, err)
		}
	}
	var zero graph.Outcome
	if text, err := zero.MarshalText(); err != nil || len(text) != 0 || zero.String() != "" {
		t.Errorf("zero outcome: String() = %q, MarshalText() = %q, %v; want empty", zero, text, err)
	}
	bogus := graph.Outcome(9)
	if _, err := bogus.MarshalText(); err == nil || bogus.String() != "Outcome(9)" {
		t.Errorf("Outcome(9): String() = %q, MarshalText error %v", bogus, err)
	}
	if err := zero.UnmarshalText([]byte("done")); err == nil {
		t.Error(`UnmarshalText("done") succeeded`)
	}
	b, err := json.Marshal(map[string]graph.Outcome{"db": graph.Blocked})
	if err != nil || string(b) != `{"db":"blocked"}` {
		t.Errorf("json.Marshal = %s, %v", b, err)
	}
}
