package reconciler

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
)

// TestCacheBehind: after this process wrote an owner's status, a status computed from a cache
// that has not seen that write (Ready again, where NotReady was just written) is written, not
// skipped as unchanged; the same status as written, whatever its lastReconcile, is not behind;
// an owner this process never wrote trusts the cache. Found on the local cluster: a Gitea
// stayed NotReady for good after its pruned PostgreSQL was gone (test/e2e/gitea TestDataSafety_1).
func TestCacheBehind(t *testing.T) {
	status := func(ready metav1.ConditionStatus, lastReconcile string) *kdagv1alpha1.Status {
		st := &kdagv1alpha1.Status{ObservedGeneration: 2, Conditions: []metav1.Condition{{Type: kdagv1alpha1.ConditionReady, Status: ready}}}
		if lastReconcile != "" {
			st.LastReconcile = &kdagv1alpha1.ReconcileSummary{TraceID: lastReconcile}
		}
		return st
	}
	c := &Reconciler{}
	const uid = types.UID("u1")
	c.written.Store(uid, &writtenStatus{kdag: withoutLastReconcile(status(metav1.ConditionFalse, "t1")), resourceVersion: "7"})
	for _, tc := range []struct {
		name string
		uid  types.UID
		next *kdagv1alpha1.Status
		want bool
	}{
		{"another status than the one written", uid, status(metav1.ConditionTrue, ""), true},
		{"the status written, another lastReconcile", uid, status(metav1.ConditionFalse, "t2"), false},
		{"an owner never written", "u2", status(metav1.ConditionTrue, ""), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := c.cacheBehind(tc.uid, tc.next); got != tc.want {
				t.Errorf("cacheBehind = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestAheadOfCache: the last status write stands in for the cached owner's status only while
// the cached owner's resourceVersion is lower than the write's; an equal or later one, a
// resourceVersion that is not comparable (KEP-5504), a write whose response named none, and an
// owner never written trust the cache. Once the cache holds the write (an equal or later
// resourceVersion), the record of the write is dropped, by aheadOfCache and by the owner
// informer's handler (forgetWrittenOnceCached) alike; a record that cannot be compared stays, for
// cacheBehind.
func TestAheadOfCache(t *testing.T) {
	for _, tc := range []struct {
		name            string
		uid             types.UID
		resourceVersion string
		ahead, kept     bool
	}{
		{"cached before the write", "u1", "119", true, true},
		{"cached before the write, fewer digits", "u1", "99", true, true},
		{"cached at the write", "u1", "120", false, false},
		{"cached after the write", "u1", "1000", false, false},
		{"a resourceVersion that is not a number", "u1", "a17", false, true},
		{"a write whose response named no resourceVersion", "u3", "5", false, true},
		{"an owner never written", "u2", "5", false, false},
	} {
		for _, by := range []string{"aheadOfCache", "forgetWrittenOnceCached"} {
			t.Run(tc.name+"/"+by, func(t *testing.T) {
				c := &Reconciler{}
				c.written.Store(types.UID("u1"), &writtenStatus{kdag: &kdagv1alpha1.Status{ObservedGeneration: 2}, resourceVersion: "120"})
				c.written.Store(types.UID("u3"), &writtenStatus{kdag: &kdagv1alpha1.Status{ObservedGeneration: 2}})
				owner := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{UID: tc.uid, ResourceVersion: tc.resourceVersion}}
				if by == "aheadOfCache" {
					got := false
					if v, ok := c.written.Load(tc.uid); ok {
						got = c.aheadOfCache(owner, v.(*writtenStatus))
					}
					if got != tc.ahead {
						t.Errorf("aheadOfCache = %v, want %v", got, tc.ahead)
					}
				} else {
					c.forgetWrittenOnceCached(owner)
				}
				if _, kept := c.written.Load(tc.uid); kept != tc.kept {
					t.Errorf("the record of the write kept: %v, want %v", kept, tc.kept)
				}
				want := 2 // u1's and u3's
				if tc.uid != "u2" && !tc.kept {
					want--
				}
				if n := c.WrittenStatuses(); n != want {
					t.Errorf("%d records left, want %d: another owner's record went too", n, want)
				}
			})
		}
	}
}
