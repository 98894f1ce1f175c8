package referenced

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/pkg/errors"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	metadatafake "k8s.io/client-go/metadata/fake"
	clienttesting "k8s.io/client-go/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kdag-dev/kdag/pkg/graph"
)

// forbiddenReader answers every read with 403, as an API server does to a manager that may not
// list namespaces.
type forbiddenReader struct{ client.Reader }

func (forbiddenReader) List(context.Context, client.ObjectList, ...client.ListOption) error {
	return apierrors.NewForbidden(schema.GroupResource{Resource: "namespaces"}, "", errors.New("test"))
}

// secretCluster is a fake metadata client holding the Secret ns/db, and a RESTMapper that
// knows Secrets.
func secretCluster(t *testing.T) (schema.GroupVersionKind, meta.RESTMapper, *metadatafake.FakeMetadataClient) {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := metav1.AddMetaToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	secret := &metav1.PartialObjectMetadata{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "db"},
	}
	gvk := schema.GroupVersionKind{Version: "v1", Kind: "Secret"}
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(gvk, meta.RESTScopeNamespace)
	return gvk, mapper, metadatafake.NewSimpleMetadataClient(scheme, secret)
}

// TestReferences_FirstInformerOfAKindCostsNoPoll: the first reference of a kind starts an
// informer and waits until it has synced, and no longer. client-go's WaitForCacheSync looks
// every 100 ms, which made the reference sample's PostgreSQL and GiteaServer wait 200 ms before
// their first write (issue 32). Run in a synctest bubble: its clock moves only when every
// goroutine waits, so the informer's list and the wait take no time unless something polls.
func TestReferences_FirstInformerOfAKindCostsNoPoll(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		gvk, mapper, mc := secretCluster(t)
		r := NewFrom(mc, mapper, forbiddenReader{}, nil, false)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error)
		go func() { done <- r.Start(ctx) }()

		start := time.Now()
		got, err := r.Cached(ctx, gvk, "ns", "db")
		waited := time.Since(start)
		if err != nil || got == nil || got.GetName() != "db" {
			t.Fatalf("cached Secret ns/db = %v, %v; want it from the new informer", got, err)
		}
		if waited != 0 {
			t.Errorf("the first reference of Secrets waited %v of the bubble's clock for its informer, want 0 (no polling)", waited)
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Start: %v", err)
		}
	})
}

// TestReferences_TrackDoesNotWaitForTheList: Track starts the informer of a referenced kind and
// returns before its first list has come, so that the nodes of the graph that read no referenced
// object run meanwhile; Cached, which reads, waits for it (issue 32). The list is held by the
// fake client until released.
func TestReferences_TrackDoesNotWaitForTheList(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		gvk, mapper, mc := secretCluster(t)
		release := make(chan struct{})
		mc.PrependReactor("list", "secrets", func(clienttesting.Action) (bool, runtime.Object, error) {
			<-release
			return false, nil, nil
		})
		r := NewFrom(mc, mapper, forbiddenReader{}, nil, false)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error)
		go func() { done <- r.Start(ctx) }()

		owner := types.NamespacedName{Namespace: "ns", Name: "app"}
		tracked := make(chan error, 1)
		go func() {
			tracked <- r.Track(ctx, owner, []Watched{{ID: graph.NodeID{Kind: "Secret", Namespace: "ns", Name: "db"}, GVK: gvk}})
		}()
		synctest.Wait()
		select {
		case err := <-tracked:
			if err != nil {
				t.Fatalf("Track: %v", err)
			}
		default:
			t.Fatal("Track waited for the informer's first list")
		}
		type result struct {
			obj metav1.Object
			err error
		}
		cached := make(chan result, 1)
		go func() {
			m, err := r.Cached(ctx, gvk, "ns", "db")
			cached <- result{m, err}
		}()
		synctest.Wait()
		select {
		case <-cached:
			t.Fatal("Cached returned before the informer's first list")
		default:
		}
		close(release)
		if got := <-cached; got.err != nil || got.obj == nil || got.obj.GetName() != "db" {
			t.Errorf("cached Secret ns/db = %v, %v; want it once the list has come", got.obj, got.err)
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Start: %v", err)
		}
	})
}

// TestReferences_StoppedCacheSaysSo: once the manager has stopped the Cache (Start's context
// ended), a reference to a kind it has no informer for yet fails at once with ErrStopped, and
// Stopped says so: a factory that has shut down starts no informer, so waiting for one would wait
// for good, and the reconciler must not report the stop as the owner's failure. Run in a synctest
// bubble: a wait that never ends fails the test as a deadlock.
func TestReferences_StoppedCacheSaysSo(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		gvk, mapper, mc := secretCluster(t)
		r := NewFrom(mc, mapper, forbiddenReader{}, nil, false)
		if r.Stopped() {
			t.Fatal("Stopped before Start")
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error)
		go func() { done <- r.Start(ctx) }()
		synctest.Wait()
		if r.Stopped() {
			t.Fatal("Stopped while running")
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("Start: %v", err)
		}
		if !r.Stopped() {
			t.Fatal("not Stopped after Start returned")
		}
		if _, err := r.Cached(t.Context(), gvk, "ns", "db"); !errors.Is(err, ErrStopped) {
			t.Errorf("Cached after the stop: err = %v, want ErrStopped", err)
		}
		owner := types.NamespacedName{Namespace: "ns", Name: "app"}
		if err := r.Track(t.Context(), owner, []Watched{{ID: graph.NodeID{Kind: "Secret", Namespace: "ns", Name: "db"}, GVK: gvk}}); !errors.Is(err, ErrStopped) {
			t.Errorf("Track after the stop: err = %v, want ErrStopped", err)
		}
	})
}
