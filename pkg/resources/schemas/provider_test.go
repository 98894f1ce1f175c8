package schemas

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pkg/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/openapi"
)

var thingGV = schema.GroupVersion{Group: "example.com", Version: "v1"}

// thingDoc is the OpenAPI v3 document of example.com/v1 with one kind, Thing, whose spec has
// the given string fields.
func thingDoc(fields ...string) string {
	props := make([]string, len(fields))
	for i, f := range fields {
		props[i] = `"` + f + `":{"type":"string"}`
	}
	return `{"openapi":"3.0.0","info":{"title":"t","version":"v1"},"paths":{},"components":{"schemas":{
		"com.example.v1.Thing":{"type":"object",
			"x-kubernetes-group-version-kind":[{"group":"example.com","version":"v1","kind":"Thing"}],
			"properties":{"apiVersion":{"type":"string"},"kind":{"type":"string"},
				"metadata":{"type":"object","properties":{"name":{"type":"string"},"namespace":{"type":"string"}}},
				"spec":{"type":"object","properties":{` + strings.Join(props, ",") + `}}}}}}}`
}

// fakeServer serves OpenAPI v3 documents and counts the requests, like GET /openapi/v3 (index)
// and GET /openapi/v3/apis/<group>/<version>?hash=<hash> (document).
type fakeServer struct {
	mu      sync.Mutex
	docs    map[string]string // API path -> document
	version map[string]int    // API path -> hash, bumped on every change
	failing error             // every request fails with it when set
	release chan struct{}     // when set, document requests wait for it

	index, fetches atomic.Int32
}

func newFakeServer() *fakeServer {
	return &fakeServer{docs: map[string]string{}, version: map[string]int{}}
}

func (s *fakeServer) set(path, doc string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.docs[path] = doc
	s.version[path]++
}

func (s *fakeServer) Paths() (map[string]openapi.GroupVersion, error) {
	panic("the Provider must use PathsWithContext")
}

func (s *fakeServer) PathsWithContext(context.Context) (map[string]openapi.GroupVersionWithContext, error) {
	s.index.Add(1)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failing != nil {
		return nil, s.failing
	}
	out := map[string]openapi.GroupVersionWithContext{}
	for path, doc := range s.docs {
		out[path] = fakeDoc{s: s, doc: doc, url: "/openapi/v3/" + path + "?hash=" + strconv.Itoa(s.version[path])}
	}
	return out, nil
}

type fakeDoc struct {
	s        *fakeServer
	doc, url string
}

func (d fakeDoc) SchemaWithContext(ctx context.Context, _ string) ([]byte, error) {
	d.s.fetches.Add(1)
	d.s.mu.Lock()
	release := d.s.release
	d.s.mu.Unlock()
	if release != nil {
		select {
		case <-release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return []byte(d.doc), nil
}

func (d fakeDoc) ServerRelativeURL() string { return d.url }

func thing(spec map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.com/v1", "kind": "Thing",
		"metadata": map[string]any{"name": "t", "namespace": "ns"},
		"spec":     spec,
	}}
}

// TestProvider_ConcurrentCallersFetchOnce: callers that ask for one GroupVersion at the same time
// wait for one fetch; later callers use the cached converter without a request.
func TestProvider_ConcurrentCallersFetchOnce(t *testing.T) {
	s := newFakeServer()
	s.set("apis/example.com/v1", thingDoc("a"))
	s.release = make(chan struct{})
	p := NewProvider(s, Options{})

	const callers = 8
	var wg sync.WaitGroup
	errs := make([]error, callers)
	for i := range callers {
		wg.Go(func() {
			tc, err := p.TypeConverter(context.Background(), thingGV)
			if err == nil {
				_, err = tc.ObjectToTyped(thing(map[string]any{"a": "x"}))
			}
			errs[i] = err
		})
	}
	// Let every caller reach the provider before the one fetch returns.
	for s.fetches.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond)
	close(s.release)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("caller %d: %v", i, err)
		}
	}
	if _, err := p.TypeConverter(context.Background(), thingGV); err != nil {
		t.Fatal(err)
	}
	if got := s.fetches.Load(); got != 1 {
		t.Errorf("%d document fetches, want 1", got)
	}
	if got := s.index.Load(); got != 1 {
		t.Errorf("%d index reads, want 1", got)
	}
}

// TestProvider_FailedFetchIsNotRemembered: an error goes to the callers that waited for the
// fetch; the next call tries again.
func TestProvider_FailedFetchIsNotRemembered(t *testing.T) {
	s := newFakeServer()
	s.failing = errors.New("connection refused")
	p := NewProvider(s, Options{})
	_, err := p.TypeConverter(context.Background(), thingGV)
	if err == nil || !strings.Contains(err.Error(), "GroupVersion example.com/v1") || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("error = %v, want one naming GroupVersion example.com/v1 and the cause", err)
	}
	s.mu.Lock()
	s.failing = nil
	s.mu.Unlock()
	s.set("apis/example.com/v1", thingDoc("a"))
	if _, err := p.TypeConverter(context.Background(), thingGV); err != nil {
		t.Fatalf("second call: %v", err)
	}

	_, err = p.TypeConverter(context.Background(), schema.GroupVersion{Group: "other.example.com", Version: "v2"})
	if err == nil || !strings.Contains(err.Error(), "GroupVersion other.example.com/v2: the API server publishes no OpenAPI v3 document") {
		t.Errorf("error for an unserved GroupVersion = %v", err)
	}
}

// TestProvider_CanceledWaiter: a caller waiting for another's fetch stops when its context ends.
func TestProvider_CanceledWaiter(t *testing.T) {
	s := newFakeServer()
	s.set("apis/example.com/v1", thingDoc("a"))
	s.release = make(chan struct{})
	p := NewProvider(s, Options{})
	done := make(chan error)
	go func() {
		_, err := p.TypeConverter(context.Background(), thingGV)
		done <- err
	}()
	for s.fetches.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := p.TypeConverter(ctx, thingGV); !errors.Is(err, context.Canceled) {
		t.Errorf("waiter's error = %v, want context.Canceled", err)
	}
	close(s.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestProvider_Refresh: a refresh reads the index only and keeps the converter while the document
// is unchanged, fetches it when its hash changed, and runs at most once per MinRefreshInterval.
func TestProvider_Refresh(t *testing.T) {
	s := newFakeServer()
	s.set("apis/example.com/v1", thingDoc("a"))
	now := time.Unix(1000, 0)
	p := NewProvider(s, Options{MinRefreshInterval: time.Minute, Now: func() time.Time { return now }})
	ctx := context.Background()

	if changed, err := p.Refresh(ctx, thingGV); changed || err != nil || s.index.Load() != 0 {
		t.Fatalf("Refresh before any fetch = %v, %v with %d reads; want false, nil, no read", changed, err, s.index.Load())
	}
	first, err := p.TypeConverter(ctx, thingGV)
	if err != nil {
		t.Fatal(err)
	}
	if changed, err := p.Refresh(ctx, thingGV); changed || err != nil || s.index.Load() != 1 {
		t.Fatalf("Refresh within the interval = %v, %v with %d index reads; want false, nil, no new read", changed, err, s.index.Load())
	}
	now = now.Add(time.Minute)
	if changed, err := p.Refresh(ctx, thingGV); changed || err != nil {
		t.Fatalf("Refresh of an unchanged document = %v, %v; want false, nil", changed, err)
	}
	if s.index.Load() != 2 || s.fetches.Load() != 1 {
		t.Fatalf("after a refresh of an unchanged document: %d index reads and %d fetches, want 2 and 1", s.index.Load(), s.fetches.Load())
	}

	s.set("apis/example.com/v1", thingDoc("a", "b"))
	if changed, _ := p.Refresh(ctx, thingGV); changed {
		t.Fatal("Refresh within the interval of the last check changed the converter")
	}
	now = now.Add(time.Minute)
	if changed, err := p.Refresh(ctx, thingGV); !changed || err != nil {
		t.Fatalf("Refresh of a changed document = %v, %v; want true, nil", changed, err)
	}
	second, err := p.TypeConverter(ctx, thingGV)
	if err != nil {
		t.Fatal(err)
	}
	withB := thing(map[string]any{"a": "x", "b": "y"})
	if _, err := first.ObjectToTyped(withB); err == nil {
		t.Error("the first converter knows field b")
	}
	if _, err := second.ObjectToTyped(withB); err != nil {
		t.Errorf("the refreshed converter: %v", err)
	}
}

// TestProvider_Invalidate: the next TypeConverter fetches again.
func TestProvider_Invalidate(t *testing.T) {
	s := newFakeServer()
	s.set("apis/example.com/v1", thingDoc("a"))
	p := NewProvider(s, Options{})
	ctx := context.Background()
	if _, err := p.TypeConverter(ctx, thingGV); err != nil {
		t.Fatal(err)
	}
	p.Invalidate(thingGV)
	if _, err := p.TypeConverter(ctx, thingGV); err != nil {
		t.Fatal(err)
	}
	if got := s.fetches.Load(); got != 2 {
		t.Errorf("%d fetches, want 2", got)
	}
}

// TestProvider_WithContext: the converter picks each object's GroupVersion, and an object that
// does not fit the cached schema makes it refresh and try again.
func TestProvider_WithContext(t *testing.T) {
	s := newFakeServer()
	s.set("apis/example.com/v1", thingDoc("a"))
	p := NewProvider(s, Options{MinRefreshInterval: -1})
	tc := p.WithContext(context.Background())

	if _, err := tc.ObjectToTyped(thing(map[string]any{"a": "x"})); err != nil {
		t.Fatal(err)
	}
	// The CRD gains field b.
	s.set("apis/example.com/v1", thingDoc("a", "b"))
	tv, err := tc.ObjectToTyped(thing(map[string]any{"a": "x", "b": "y"}))
	if err != nil {
		t.Fatalf("after the schema changed: %v", err)
	}
	if got := s.fetches.Load(); got != 2 {
		t.Errorf("%d fetches, want 2", got)
	}
	if _, err := tc.TypedToObject(tv); err != nil {
		t.Errorf("TypedToObject: %v", err)
	}

	// An object that fits no version of the schema: the document is unchanged, not fetched again.
	_, err = tc.ObjectToTyped(thing(map[string]any{"c": "z"}))
	if err == nil || !strings.Contains(err.Error(), "example.com/v1, Kind=Thing") {
		t.Errorf("error = %v, want one naming the kind", err)
	}
	if got := s.fetches.Load(); got != 2 {
		t.Errorf("%d fetches after a misfit with an unchanged schema, want still 2", got)
	}
	other := thing(nil)
	other.SetKind("Other")
	if _, err := tc.ObjectToTyped(other); err == nil {
		t.Error("an unknown kind converted")
	}
}
