package shard

import (
	"fmt"
	"testing"
)

// keys returns n owners' keys, "ns-<i%7>/owner-<i>".
func keys(n int) []string {
	ks := make([]string, n)
	for i := range ks {
		ks[i] = fmt.Sprintf("ns-%d/owner-%d", i%7, i)
	}
	return ks
}

func assign(r Ring, ks []string) map[string]string {
	got := make(map[string]string, len(ks))
	for _, k := range ks {
		got[k] = r.Owner(k)
	}
	return got
}

// TestRing_Deterministic: the assignment depends on the set of members only, not on their order
// or duplicates, so every replica computes the same one.
func TestRing_Deterministic(t *testing.T) {
	a := assign(NewRing("r-a", "r-b", "r-c"), keys(300))
	b := assign(NewRing("r-c", "r-a", "r-b", "r-a", ""), keys(300))
	for k, m := range a {
		if b[k] != m {
			t.Errorf("%s: %s with one order of members, %s with another", k, m, b[k])
		}
	}
	if got := (Ring{}).Owner("ns/x"); got != "" {
		t.Errorf("a ring without members assigns %q, want \"\"", got)
	}
}

// TestRing_Balanced: each of 3 members gets about a third of 300 owners.
func TestRing_Balanced(t *testing.T) {
	count := map[string]int{}
	for _, m := range assign(NewRing("r-a", "r-b", "r-c"), keys(300)) {
		count[m]++
	}
	for _, m := range []string{"r-a", "r-b", "r-c"} {
		if count[m] < 70 || count[m] > 130 {
			t.Errorf("member %s has %d of 300 owners, want about 100: %v", m, count[m], count)
		}
	}
}

// TestRing_Movement: a member that joins takes about 1/N of the owners, all from the others, and
// a member that leaves gives away only its own owners.
func TestRing_Movement(t *testing.T) {
	ks := keys(300)
	for _, tc := range []struct {
		name               string
		before, after      []string
		minMoved, maxMoved float64
		onlyTo, onlyFrom   string // every moved owner goes to onlyTo / comes from onlyFrom
	}{
		{name: "a 4th member joins", before: []string{"r-a", "r-b", "r-c"}, after: []string{"r-a", "r-b", "r-c", "r-d"},
			minMoved: 0.15, maxMoved: 0.35, onlyTo: "r-d"},
		{name: "a 2nd member joins", before: []string{"r-a"}, after: []string{"r-a", "r-b"},
			minMoved: 0.35, maxMoved: 0.65, onlyTo: "r-b"},
		{name: "one of 4 members dies", before: []string{"r-a", "r-b", "r-c", "r-d"}, after: []string{"r-a", "r-c", "r-d"},
			minMoved: 0.15, maxMoved: 0.35, onlyFrom: "r-b"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before, after := assign(NewRing(tc.before...), ks), assign(NewRing(tc.after...), ks)
			moved := 0
			for _, k := range ks {
				if before[k] == after[k] {
					continue
				}
				moved++
				if tc.onlyTo != "" && after[k] != tc.onlyTo {
					t.Errorf("%s moved from %s to %s, want only moves to %s", k, before[k], after[k], tc.onlyTo)
				}
				if tc.onlyFrom != "" && before[k] != tc.onlyFrom {
					t.Errorf("%s moved from %s to %s, want only moves from %s", k, before[k], after[k], tc.onlyFrom)
				}
			}
			if f := float64(moved) / float64(len(ks)); f < tc.minMoved || f > tc.maxMoved {
				t.Errorf("%d of %d owners moved (%.0f%%), want between %.0f%% and %.0f%%", moved, len(ks), 100*f, 100*tc.minMoved, 100*tc.maxMoved)
			}
		})
	}
}

func TestSanitizeID(t *testing.T) {
	long := "kdag-" + fmt.Sprintf("%070d", 7)
	for _, tc := range []struct{ in, want string }{
		{"kdag-7c9f5d-x2x4z", "kdag-7c9f5d-x2x4z"},
		{"Node_1.example.com", "node-1-example-com"},
		{"-kdag-", "kdag"},
		{"...", ""},
		{long, long[:54] + "-"}, // + 8 hex digits, checked below
	} {
		got := SanitizeID(tc.in)
		if len(tc.in) > 63 {
			if len(got) != 63 || got[:55] != tc.want || SanitizeID(tc.in + "x")[:55] != tc.want || SanitizeID(tc.in+"x") == got {
				t.Errorf("SanitizeID(%q) = %q, want %q and 8 hex digits that tell it apart", tc.in, got, tc.want)
			}
			continue
		}
		if got != tc.want {
			t.Errorf("SanitizeID(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
