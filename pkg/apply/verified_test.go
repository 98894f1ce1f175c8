package apply

import (
	"strconv"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

// TestVerifiedSet_StoresLoadsAndForgets: what is stored under a UID is loaded back until it is
// replaced or deleted, for UIDs in every shard, from goroutines at once (run with -race).
func TestVerifiedSet_StoresLoadsAndForgets(t *testing.T) {
	var s verifiedSet
	uid := func(i int) types.UID { return types.UID("7d1f7b8e-2d0c-4b8e-9a51-" + strconv.Itoa(100000000000+i)) }
	const n = 200
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := w; i < n; i += 4 {
				s.store(uid(i), verifiedAt{resourceVersion: "1", desiredHash: "h" + strconv.Itoa(i)})
				s.store(uid(i), verifiedAt{resourceVersion: strconv.Itoa(i), desiredHash: "h" + strconv.Itoa(i), entry: uint64(i + 1)})
				if i%3 == 0 {
					s.delete(uid(i))
				}
			}
		})
	}
	wg.Wait()
	for i := range n {
		got, ok := s.load(uid(i))
		if i%3 == 0 {
			if ok {
				t.Errorf("uid %s: deleted, still loads %+v", uid(i), got)
			}
			continue
		}
		want := verifiedAt{resourceVersion: strconv.Itoa(i), desiredHash: "h" + strconv.Itoa(i), entry: uint64(i + 1)}
		if !ok || got != want {
			t.Errorf("uid %s: load = %+v, %t; want the last stored %+v", uid(i), got, ok, want)
		}
	}
	if _, ok := s.load(""); ok {
		t.Error("the empty UID loads something never stored")
	}
	s.delete("never stored") // no panic on a shard never written
}

// TestVerifiedSet_SpreadsUIDs: UIDs as the API server makes them (lower-case hex) fall in all
// 16 parts, one part per last digit; other strings fall in a valid part.
func TestVerifiedSet_SpreadsUIDs(t *testing.T) {
	used := map[int]bool{}
	for _, d := range "0123456789abcdef" {
		used[shardOf(types.UID("7d1f7b8e-2d0c-4b8e-9a51-00000000000"+string(d)))] = true
	}
	if len(used) != verifiedShards {
		t.Errorf("16 UIDs with distinct last digits use %d parts, want %d", len(used), verifiedShards)
	}
	for _, uid := range []types.UID{"", "x", "Z", "owner-1", "\xff"} {
		if i := shardOf(uid); i < 0 || i >= verifiedShards {
			t.Errorf("shardOf(%q) = %d, want 0..%d", uid, i, verifiedShards-1)
		}
	}
}
