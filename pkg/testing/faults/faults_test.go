package faults_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kdag-dev/kdag/pkg/testing/faults"
)

// apiServer is a fake API server that answers every request with a ConfigMap (a watch gets a
// stream of two events) and counts the requests that reached it.
func apiServer(t *testing.T) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Header().Set("Content-Type", "application/json")
		const cm = `{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"c","namespace":"ns","resourceVersion":"1"}}`
		if faults.IsWatch(r) {
			_, _ = io.WriteString(w, `{"type":"ADDED","object":`+cm+"}\n")
			w.(http.Flusher).Flush()
			_, _ = io.WriteString(w, `{"type":"MODIFIED","object":`+cm+"}\n")
			return
		}
		if r.Method == http.MethodPost {
			w.WriteHeader(http.StatusCreated)
		}
		_, _ = io.WriteString(w, cm)
	}))
	t.Cleanup(srv.Close)
	return srv, &hits
}

// clientset returns a client-go clientset for srv whose transport inj wraps.
func clientset(t *testing.T, srv *httptest.Server, inj *faults.Injector) *kubernetes.Clientset {
	t.Helper()
	cfg := &rest.Config{Host: srv.URL}
	cfg.Wrap(inj.Wrap)
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

func TestTransport_EachKindAsClientGoSeesIt(t *testing.T) {
	isTimeout := func(err error) bool {
		var ne net.Error
		return errors.As(err, &ne) && ne.Timeout()
	}
	tests := []struct {
		kind    faults.Kind
		lost    bool
		want    func(error) bool
		wantHit int32 // requests that reached the server
	}{
		{kind: faults.InternalError, want: apierrors.IsInternalError},
		{kind: faults.ServiceUnavailable, want: apierrors.IsServiceUnavailable},
		// client-go waits Retry-After and retries up to 10 times; every attempt fails here.
		{kind: faults.TooManyRequests, want: apierrors.IsTooManyRequests},
		{kind: faults.Conflict, want: apierrors.IsConflict},
		{kind: faults.Timeout, want: isTimeout},
		{kind: faults.ConnectionReset, want: func(err error) bool { return errors.Is(err, syscall.ECONNRESET) }},
		{kind: faults.Timeout, lost: true, want: isTimeout, wantHit: 1},
		{kind: faults.ConnectionReset, lost: true, want: func(err error) bool { return errors.Is(err, syscall.ECONNRESET) }, wantHit: 1},
	}
	for _, tt := range tests {
		name := string(tt.kind)
		if tt.lost {
			name += "/lost response"
		}
		t.Run(name, func(t *testing.T) {
			srv, hits := apiServer(t)
			opts := []faults.Option{faults.Share(1), faults.Kinds(tt.kind), faults.RetryAfter(0)}
			if tt.lost {
				opts = append(opts, faults.LostResponses(1))
			}
			inj := faults.New(opts...)
			// A create (POST) is not retried by client-go on a reset, so one request, one fault.
			_, err := clientset(t, srv, inj).CoreV1().ConfigMaps("ns").Create(context.Background(),
				&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c"}}, metav1.CreateOptions{})
			if err == nil || !tt.want(err) {
				t.Fatalf("create: got error %v, want a %s error", err, tt.kind)
			}
			if got := hits.Load(); got != tt.wantHit {
				t.Errorf("requests that reached the server = %d, want %d", got, tt.wantHit)
			}
			st := inj.Stats()
			if st.Injected[tt.kind] == 0 || st.Total() != st.Injected[tt.kind] {
				t.Errorf("Stats().Injected = %v, want only %s", st.Injected, tt.kind)
			}
			if tt.lost && st.AfterServer != st.Total() {
				t.Errorf("Stats().AfterServer = %d, want %d", st.AfterServer, st.Total())
			}
		})
	}
}

func TestTransport_ErrorResponseIsAStatus(t *testing.T) {
	srv, _ := apiServer(t)
	inj := faults.New(faults.Share(1), faults.Kinds(faults.TooManyRequests), faults.RetryAfter(3))
	client := &http.Client{Transport: inj.Wrap(http.DefaultTransport)}
	resp, err := client.Get(srv.URL + "/api/v1/namespaces/ns/configmaps/c")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "3" {
		t.Errorf("status %d, Retry-After %q; want 429 and 3", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	for _, want := range []string{`"kind":"Status"`, `"reason":"TooManyRequests"`, `"code":429`, faults.Message} {
		if !strings.Contains(string(body), want) {
			t.Errorf("body %s does not contain %s", body, want)
		}
	}
}

func TestInjector_ShareAndSwitch(t *testing.T) {
	tests := []struct {
		name           string
		opts           []faults.Option
		disable        bool
		path           string
		wantMin, wantN int // injected faults out of 1000 requests: at least wantMin, at most wantN
	}{
		{name: "none", opts: []faults.Option{faults.Share(0)}, path: "/api/v1/namespaces/ns/configmaps/c", wantMin: 0, wantN: 0},
		{name: "ten percent", opts: []faults.Option{faults.Share(0.1)}, path: "/api/v1/namespaces/ns/configmaps/c", wantMin: 70, wantN: 130},
		{name: "all", opts: []faults.Option{faults.Share(1)}, path: "/api/v1/namespaces/ns/configmaps/c", wantMin: 1000, wantN: 1000},
		{name: "disabled", opts: []faults.Option{faults.Share(1)}, disable: true, path: "/api/v1/namespaces/ns/configmaps/c", wantMin: 0, wantN: 0},
		{name: "started disabled", opts: []faults.Option{faults.Share(1), faults.StartDisabled()}, path: "/api/v1/namespaces/ns/configmaps/c", wantMin: 0, wantN: 0},
		{name: "events filtered out", opts: []faults.Option{faults.Share(1), faults.Filter(faults.NotEvents)},
			path: "/apis/events.k8s.io/v1/namespaces/ns/events", wantMin: 0, wantN: 0},
		{name: "core events filtered out", opts: []faults.Option{faults.Share(1), faults.Filter(faults.NotEvents)},
			path: "/api/v1/namespaces/ns/events/e", wantMin: 0, wantN: 0},
		{name: "filter lets others through", opts: []faults.Option{faults.Share(1), faults.Filter(faults.NotEvents)},
			path: "/api/v1/namespaces/ns/configmaps/c", wantMin: 1000, wantN: 1000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inj := faults.New(append(tt.opts, faults.Kinds(faults.InternalError))...)
			if tt.disable {
				inj.Disable()
			}
			rt := inj.Wrap(okTransport{})
			failed := 0
			for range 1000 {
				resp, err := rt.RoundTrip(request(http.MethodPatch, tt.path))
				if err != nil {
					t.Fatal(err)
				}
				if resp.StatusCode != http.StatusOK {
					failed++
				}
				resp.Body.Close()
			}
			st := inj.Stats()
			if failed < tt.wantMin || failed > tt.wantN || st.Total() != failed || st.Requests != 1000 {
				t.Errorf("failed %d of 1000 (stats %+v), want %d..%d", failed, st, tt.wantMin, tt.wantN)
			}
		})
	}
}

func TestInjector_EnableDisable(t *testing.T) {
	inj := faults.New(faults.Share(1), faults.Kinds(faults.Conflict))
	rt := inj.Wrap(okTransport{})
	code := func() int {
		resp, err := rt.RoundTrip(request(http.MethodGet, "/api/v1/namespaces/ns/configmaps/c"))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := code(); got != http.StatusConflict || !inj.Enabled() {
		t.Fatalf("enabled: status %d, want 409", got)
	}
	inj.Disable()
	if got := code(); got != http.StatusOK || inj.Enabled() {
		t.Fatalf("disabled: status %d, want 200", got)
	}
	inj.Enable()
	if got := code(); got != http.StatusConflict {
		t.Fatalf("enabled again: status %d, want 409", got)
	}
	if st := inj.Stats(); st.Requests != 3 || st.Eligible != 2 || st.Injected[faults.Conflict] != 2 {
		t.Errorf("stats %+v, want 3 requests, 2 eligible, 2 conflicts", st)
	}
}

// TestInjector_DeterministicWhateverTheOrder sends the same requests per path in two different
// interleavings: the same occurrences fail, with the same kinds.
func TestInjector_DeterministicWhateverTheOrder(t *testing.T) {
	paths := []string{"/api/v1/namespaces/ns/configmaps/a", "/api/v1/namespaces/ns/secrets/b", "/apis/apps/v1/namespaces/ns/deployments/c"}
	run := func(seed uint64, pathMajor bool) map[string]int {
		inj := faults.New(faults.Share(0.3), faults.Seed(seed))
		rt := inj.Wrap(okTransport{})
		out := map[string]int{}
		send := func(p string, i int) {
			resp, err := rt.RoundTrip(request(http.MethodPatch, p))
			key := fmt.Sprintf("%s#%d", p, i)
			switch {
			case err != nil:
				out[key] = -1
			case resp.StatusCode != http.StatusOK:
				out[key] = resp.StatusCode
				resp.Body.Close()
			default:
				resp.Body.Close()
			}
		}
		if pathMajor {
			for _, p := range paths {
				for i := range 200 {
					send(p, i)
				}
			}
		} else {
			for i := range 200 {
				for j := len(paths) - 1; j >= 0; j-- {
					send(paths[j], i)
				}
			}
		}
		return out
	}
	a, b := run(7, true), run(7, false)
	if len(a) == 0 || fmt.Sprint(a) != fmt.Sprint(b) {
		t.Fatalf("seed 7: %d faults in path order, %d round robin; want the same non-empty set", len(a), len(b))
	}
	if c := run(8, true); fmt.Sprint(a) == fmt.Sprint(c) {
		t.Errorf("seeds 7 and 8 fail the same requests")
	}
}

func TestTransport_Watch(t *testing.T) {
	tests := []struct {
		name         string
		opts         []faults.Option
		wantStatus   int  // of the response; 0 for a transport error
		wantBroken   bool // the stream fails after its first read
		wantHit      int32
		wantInjected bool
	}{
		{name: "failed before the stream", opts: []faults.Option{faults.Share(1), faults.Kinds(faults.InternalError)},
			wantStatus: http.StatusInternalServerError, wantInjected: true},
		{name: "lost response is never a half stream", opts: []faults.Option{faults.Share(1), faults.Kinds(faults.ConnectionReset), faults.LostResponses(1)},
			wantStatus: 0, wantInjected: true},
		{name: "broken midway when asked", opts: []faults.Option{faults.Share(1), faults.BreakWatches()},
			wantStatus: http.StatusOK, wantBroken: true, wantHit: 1, wantInjected: true},
		{name: "no fault", opts: []faults.Option{faults.Share(0), faults.BreakWatches()}, wantStatus: http.StatusOK, wantHit: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, hits := apiServer(t)
			inj := faults.New(tt.opts...)
			client := &http.Client{Transport: inj.Wrap(http.DefaultTransport)}
			resp, err := client.Get(srv.URL + "/api/v1/namespaces/ns/configmaps?watch=true")
			if tt.wantStatus == 0 {
				if err == nil {
					resp.Body.Close()
					t.Fatal("watch succeeded, want a transport error")
				}
			} else {
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				if resp.StatusCode != tt.wantStatus {
					t.Fatalf("status %d, want %d", resp.StatusCode, tt.wantStatus)
				}
				if resp.StatusCode == http.StatusOK {
					buf := make([]byte, 1)
					if _, err := resp.Body.Read(buf); err != nil {
						t.Fatalf("first read: %v", err)
					}
					_, err := io.ReadAll(resp.Body)
					if broken := errors.Is(err, syscall.ECONNRESET); broken != tt.wantBroken {
						t.Fatalf("rest of the stream: error %v, want broken %v", err, tt.wantBroken)
					}
				}
			}
			if hits.Load() != tt.wantHit {
				t.Errorf("requests that reached the server = %d, want %d", hits.Load(), tt.wantHit)
			}
			st := inj.Stats()
			if got := st.Total() > 0; got != tt.wantInjected {
				t.Errorf("injected %v, want %v", st.Injected, tt.wantInjected)
			}
			if got := st.BrokenWatches == 1; got != tt.wantBroken {
				t.Errorf("Stats().BrokenWatches = %d, want broken %v", st.BrokenWatches, tt.wantBroken)
			}
		})
	}
}

func TestNew_RejectsBadOptions(t *testing.T) {
	for name, opts := range map[string][]faults.Option{
		"share above 1":  {faults.Share(1.5)},
		"negative lost":  {faults.LostResponses(-0.1)},
		"no kinds":       {faults.Kinds()},
		"unknown kind":   {faults.Kinds("Teapot")},
		"share below 0":  {faults.Share(-1)},
		"lost above one": {faults.LostResponses(2)},
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Error("New did not panic")
				}
			}()
			faults.New(opts...)
		})
	}
}

// okTransport answers every request with 200 and an empty body, without a network.
type okTransport struct{}

func (okTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: http.StatusOK, Body: io.NopCloser(strings.NewReader("")), Request: req}, nil
}

func request(method, path string) *http.Request {
	req, err := http.NewRequest(method, "http://api.invalid"+path, nil)
	if err != nil {
		panic(err)
	}
	return req
}
