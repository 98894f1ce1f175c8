package controller

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// TestMergeOptions: Options merged in order: a later non-zero field wins, ReferenceNamespaces,
// ReadyWhen and Wrappers add up, WatchNamespaces is replaced, OwnerFilter asks every filter, and
// a zero Options changes nothing.
func TestMergeOptions(t *testing.T) {
	named := func(name string) client.Object { return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}} }
	filter := func(prefix string) func(client.Object) bool {
		return func(o client.Object) bool { return len(o.GetName()) > 0 && o.GetName()[0] == prefix[0] }
	}
	wrap := ReconcilerWrapper(func(_ string, _ client.Object, next reconcile.Reconciler) reconcile.Reconciler { return next })
	type got struct {
		FieldManager                         string
		MaxParallelNodes, DriftRepairLimit   int
		DriftBackoff                         time.Duration
		OrderedTeardown                      bool
		ReferenceNamespaces, WatchNamespaces []string
		ReadyWhen, Wrappers                  int
		// Passes: the names OwnerFilter lets through of "a1", "ab", "b1"; nil filter: all
		Passes []string
	}
	summarize := func(o Options) got {
		g := got{FieldManager: o.FieldManager, MaxParallelNodes: o.MaxParallelNodes, DriftRepairLimit: o.DriftRepairLimit,
			DriftBackoff: o.DriftBackoff, OrderedTeardown: o.OrderedTeardown, ReferenceNamespaces: o.ReferenceNamespaces,
			WatchNamespaces: o.WatchNamespaces, ReadyWhen: len(o.ReadyWhen), Wrappers: len(o.Wrappers)}
		for _, n := range []string{"a1", "ab", "b1"} {
			if o.OwnerFilter == nil || o.OwnerFilter(named(n)) {
				g.Passes = append(g.Passes, n)
			}
		}
		return g
	}
	for _, tc := range []struct {
		name string
		opts []Options
		want got
	}{
		{name: "none", want: got{Passes: []string{"a1", "ab", "b1"}}},
		{name: "a later non-zero field wins, a zero one changes nothing",
			opts: []Options{{FieldManager: "one", MaxParallelNodes: 8, DriftRepairLimit: -1}, {FieldManager: "two"}, {}},
			want: got{FieldManager: "two", MaxParallelNodes: 8, DriftRepairLimit: -1, Passes: []string{"a1", "ab", "b1"}}},
		{name: "a bool set once stays set",
			opts: []Options{{OrderedTeardown: true}, {DriftBackoff: time.Second}},
			want: got{OrderedTeardown: true, DriftBackoff: time.Second, Passes: []string{"a1", "ab", "b1"}}},
		{name: "reference namespaces, readiness rules and wrappers add up; watch namespaces are replaced",
			opts: []Options{
				{ReferenceNamespaces: []string{"a"}, WatchNamespaces: []string{"w1"}, ReadyWhen: []KindReadiness{{Kind: &corev1.ConfigMap{}}}, Wrappers: []ReconcilerWrapper{wrap}},
				{ReferenceNamespaces: []string{"b"}, WatchNamespaces: []string{"w2"}, ReadyWhen: []KindReadiness{{Kind: &corev1.Secret{}}}, Wrappers: []ReconcilerWrapper{wrap, nil}},
			},
			want: got{ReferenceNamespaces: []string{"a", "b"}, WatchNamespaces: []string{"w2"}, ReadyWhen: 2, Wrappers: 2, Passes: []string{"a1", "ab", "b1"}}},
		{name: "an owner passes every filter",
			opts: []Options{{OwnerFilter: filter("a")}, {}, {OwnerFilter: func(o client.Object) bool { return o.GetName() != "ab" }}},
			want: got{Passes: []string{"a1"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, summarize(mergeOptions(tc.opts...))); diff != "" {
				t.Errorf("merged (-want +got):\n%s", diff)
			}
		})
	}
}
