package shard

import (
	"fmt"
	"strings"
	"testing"

	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
)

func TestValidateShard(t *testing.T) {
	for _, tc := range []struct {
		shard string
		ok    bool
	}{
		{"", true}, // no shard
		{"a", true},
		{"shard-1", true},
		{strings.Repeat("a", 63), true},
		{strings.Repeat("a", 64), false},
		{"A", false},   // a valid label value, not a Lease name part
		{"a_b", false}, // the same
		{"a.b", false},
		{"-a", false},
		{"a-", false},
		{"a b", false},
	} {
		t.Run(fmt.Sprintf("%q", tc.shard), func(t *testing.T) {
			err := ValidateName(tc.shard)
			if (err == nil) != tc.ok {
				t.Fatalf("ValidateName(%q) = %v, want ok %v", tc.shard, err, tc.ok)
			}
			if err != nil && (!strings.Contains(err.Error(), fmt.Sprintf("%q", tc.shard)) || !strings.Contains(err.Error(), kdagv1alpha1.LabelShard)) {
				t.Errorf("error %q names neither the shard nor the label", err)
			}
		})
	}
}

func TestLeaderElectionID(t *testing.T) {
	for _, tc := range []struct {
		name, id, shard string
		want            string // "": an error
	}{
		{"no shard: the ID as it is", "kdag.kdag.dev", "", "kdag.kdag.dev"},
		{"a shard: its own Lease", "kdag.kdag.dev", "a", "a.kdag.kdag.dev"},
		{"two shards never share one", "kdag.kdag.dev", "b", "b.kdag.kdag.dev"},
		{"invalid shard", "kdag.kdag.dev", "A_1", ""},
		{"too long for a Lease name", strings.Repeat("x", 250), "abcd", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := LeaderElectionID(tc.id, tc.shard)
			if tc.want == "" {
				if err == nil {
					t.Fatalf("LeaderElectionID(%q, %q) = %q, want an error", tc.id, tc.shard, got)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("LeaderElectionID(%q, %q) = %q, %v; want %q", tc.id, tc.shard, got, err, tc.want)
			}
		})
	}
}

// TestOptions_RefusesShardMistakes: a shard that cannot work stops the manager before it
// starts, naming the flag to fix.
func TestOptions_RefusesShardMistakes(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    Options
		want string
	}{
		{"invalid static shard", Options{Shard: "Shard_A"}, `--shard: shard "Shard_A" is not a valid shard name`},
		{"invalid replica ID", Options{Shards: "auto", ID: "a_b", Namespace: "ops"}, "--shard-id"},
		{"dynamic shards without a namespace", Options{Shards: "auto", ID: "a", podNamespace: func() (string, error) { return "", fmt.Errorf("not in a pod") }},
			"--leader-election-namespace"},
		{"a host name that makes no ID", Options{Shards: "auto", Namespace: "ops", hostname: func() (string, error) { return "", fmt.Errorf("no host name") }},
			"no host name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.o.Complete(); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Complete error = %v, want one containing %q", err, tc.want)
			}
		})
	}
	o := Options{Shards: "auto", Namespace: "ops", hostname: func() (string, error) { return "Kdag_7.pod", nil }}
	if err := o.Complete(); err != nil || o.ID != "kdag-7-pod" || !o.LeaderElect {
		t.Errorf("Complete from the host name: ID %q, leader election %v, error %v; want kdag-7-pod, true, nil", o.ID, o.LeaderElect, err)
	}
}
