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
	metadatafake "k8s.io/client-go/metadata/fake"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// forbiddenReader answers every read with 403, as an API server does to a manager that may not
// list namespaces.
type forbiddenReader struct{ client.Reader }

func (forbiddenReader) List(context.Context, client.ObjectList, ...client.ListOption) error {
	return apierrors.NewForbidden(schema.GroupResource{Resource: "namespaces"}, "", errors.New("test"))
}

// TestReferences_FirstInformerOfAKindCostsNoPoll: the first reference of a kind starts an
// informer and waits until it has synced, and no longer. client-go's WaitForCacheSync looks
// every 100 ms, which made the reference sample's PostgreSQL and GiteaServer wait 200 ms before
// their first write (issue 32). Run in a synctest bubble: its clock moves only when every
// goroutine waits, so the informer's list and the wait take no time unless something polls.
func TestReferences_FirstInformerOfAKindCostsNoPoll(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
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
		r := NewFrom(metadatafake.NewSimpleMetadataClient(scheme, secret), mapper, forbiddenReader{}, nil, false)
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
