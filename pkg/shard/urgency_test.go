package shard

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/testing/testapi"
)

// gatedWriter is the assigner's writer in TestAssigner_MovesTheUrgentFirstAndAtOnce: it records
// the order in which owners' patches start, and holds each patch until moveWorkers of them are
// in flight at once (or a second has passed, for an assigner that writes one at a time).
type gatedWriter struct {
	client.Client
	mu       sync.Mutex
	started  []string
	inFlight int
	most     int
	full     chan struct{}
	once     sync.Once
}

func (w *gatedWriter) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	w.mu.Lock()
	w.started = append(w.started, obj.GetName())
	w.inFlight++
	w.most = max(w.most, w.inFlight)
	if w.inFlight == moveWorkers {
		w.once.Do(func() { close(w.full) })
	}
	w.mu.Unlock()
	select {
	case <-w.full:
	case <-time.After(time.Second):
	}
	defer func() {
		w.mu.Lock()
		w.inFlight--
		w.mu.Unlock()
	}()
	return w.Client.Patch(ctx, obj, patch, opts...)
}

// TestAssigner_MovesTheUrgentFirstAndAtOnce: one pass of the assigner over 40 Widgets of live
// replica r1, half of which the ring gives to r2 (hand-overs to ask), 4 unlabelled Widgets,
// and one Widget being deleted on a dead replica, listed last: the Terminating Widget is among
// the first moveWorkers patches (it blocks its namespace until a live replica tears it down; a
// hand-over only balances the load), and moveWorkers patches are in flight at once (one at a
// time, a busy API server's latency adds up to minutes when a replica dies). Before, the pass
// wrote one owner at a time in list order, the Terminating one last.
func TestAssigner_MovesTheUrgentFirstAndAtOnce(t *testing.T) {
	env := api.Env(t)
	ns := env.Namespace(t)
	now := time.Now()
	for _, id := range []string{"r1", "r2"} {
		if err := env.Client.Create(t.Context(), &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kdag-shard-" + id, Labels: map[string]string{kdagv1alpha1.LabelShardMember: DefaultGroup}},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(id), LeaseDurationSeconds: ptr.To(int32(300)),
				RenewTime: ptr.To(metav1.NewMicroTime(now))},
		}); err != nil {
			t.Fatal(err)
		}
	}
	ring := NewRing("r1", "r2")
	on := func(shard string) (map[string]string, map[string]string) {
		return map[string]string{kdagv1alpha1.LabelShard: shard}, map[string]string{kdagv1alpha1.AnnotationShardAssigned: shard}
	}
	var asks []string
	for i := range 40 {
		name := fmt.Sprintf("a-%02d", i)
		lbls, anns := on("r1")
		if err := env.Client.Create(t.Context(), &testapi.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: lbls, Annotations: anns}}); err != nil {
			t.Fatal(err)
		}
		if ring.Owner(ns+"/"+name) == "r2" {
			asks = append(asks, name)
		}
	}
	for i := range 4 {
		if err := env.Client.Create(t.Context(), &testapi.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("u-%d", i)}}); err != nil {
			t.Fatal(err)
		}
	}
	lbls, anns := on("dead")
	doomed := &testapi.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "z-doomed", Labels: lbls, Annotations: anns,
		Finalizers: []string{kdagv1alpha1.Finalizer}}}
	if err := env.Client.Create(t.Context(), doomed); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.Client.Patch(context.Background(), &testapi.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "z-doomed"}},
			client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`)))
	})
	if err := env.Client.Delete(t.Context(), doomed); err != nil {
		t.Fatal(err)
	}
	if len(asks) < moveWorkers {
		t.Fatalf("the ring gives only %d of the 40 Widgets to r2: the test needs at least %d", len(asks), moveWorkers)
	}

	o, err := newOptions([]Option{WithNamespace(ns)})
	if err != nil {
		t.Fatal(err)
	}
	o.now = func() time.Time { return now }
	w := &gatedWriter{Client: env.Client, full: make(chan struct{})}
	a := &Assigner{writer: w, reader: env.Client, o: o, log: logr.Discard(),
		gvks: []schema.GroupVersionKind{testapi.GroupVersion.WithKind("Widget")}}
	a.pass(t.Context(), client.NewNamespacedClient(env.Client, ns)) // as the assigner's cache of watched namespaces

	if got := len(w.started); got != len(asks)+4+1 {
		t.Errorf("%d patches, want %d (%d hand-overs asked, 4 labels, 1 relabel of the Terminating Widget)", got, len(asks)+5, len(asks))
	}
	if i := slices.Index(w.started, "z-doomed"); i < 0 || i >= moveWorkers {
		t.Errorf("the Terminating Widget of the dead replica was patch %d of %v, want among the first %d", i+1, w.started, moveWorkers)
	}
	if w.most != moveWorkers {
		t.Errorf("at most %d patches in flight at once, want %d", w.most, moveWorkers)
	}
	got := &testapi.Widget{}
	if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(doomed), got); err != nil {
		t.Fatal(err)
	}
	if want := ring.Owner(ns + "/z-doomed"); got.Labels[kdagv1alpha1.LabelShard] != want {
		t.Errorf("Terminating Widget labelled %q, want %q", got.Labels[kdagv1alpha1.LabelShard], want)
	}
	for _, name := range asks {
		got := &testapi.Widget{}
		if err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, got); err != nil {
			t.Fatal(err)
		}
		if next := got.Annotations[kdagv1alpha1.AnnotationShardNext]; next != "r2" {
			t.Errorf("Widget %s: %s %q, want r2", name, kdagv1alpha1.AnnotationShardNext, next)
		}
	}
}
