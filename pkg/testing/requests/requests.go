// Package requests records the HTTP requests a client sends to the API server, so that a test can
// say which API calls a controller made: how many writes a reconcile cost, that a second pass
// wrote nothing, that an object it did not create was never patched.
//
// A Recorder wraps the transport of a rest.Config and keeps one Request (method, path, watch,
// response code) per request, in the order the responses came back:
//
//	rec := &requests.Recorder{}
//	cfg := rest.CopyConfig(env.Config)
//	cfg.Wrap(rec.Wrap)
//	... // start a manager with cfg, reconcile
//	for _, r := range rec.Requests() {
//		if r.Write() && !r.Refused() {
//			t.Log(r) // "PATCH /api/v1/namespaces/test-1/configmaps/app"
//		}
//	}
package requests

import (
	"net/http"
	"slices"
	"strings"
	"sync"
)

// Request is one request a client sent, as a Recorder saw it.
type Request struct {
	// Method is the HTTP method: GET (reads, lists and watches), POST, PUT, PATCH, DELETE.
	Method string
	// Path is the URL path, such as /api/v1/namespaces/test-1/configmaps/app.
	Path string
	// Watch is true for a watch (?watch=true).
	Watch bool
	// Code is the response's HTTP status code; 0 when the request got no response.
	Code int
}

// String returns "METHOD path".
func (r Request) String() string { return r.Method + " " + r.Path }

// Write reports whether r can change something: any method but GET, HEAD and OPTIONS.
func (r Request) Write() bool {
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return false
	}
	return true
}

// Refused reports whether r is a write the API server refused with 409 Conflict (a failed
// precondition or an optimistic-lock conflict): it changed nothing.
func (r Request) Refused() bool { return r.Write() && r.Code == http.StatusConflict }

// Event reports whether r's path is in the events of core/v1 or events.k8s.io.
func (r Request) Event() bool {
	if strings.HasPrefix(r.Path, "/apis/events.k8s.io/") {
		return true
	}
	parts := strings.Split(strings.Trim(r.Path, "/"), "/")
	// api/v1/namespaces/<ns>/events[/<name>] or api/v1/events
	return len(parts) >= 3 && parts[0] == "api" &&
		(parts[2] == "events" || len(parts) >= 5 && parts[2] == "namespaces" && parts[4] == "events")
}

// Recorder records requests. The zero value is ready to use; it is safe for concurrent use.
type Recorder struct {
	mu       sync.Mutex
	requests []Request
}

// Wrap returns a transport that sends each request through next and records it once its
// response (or error) is back; pass it to rest.Config.Wrap.
func (r *Recorder) Wrap(next http.RoundTripper) http.RoundTripper {
	return transport{next: next, rec: r}
}

// Record records req with resp's status code (0 when resp is nil), for a transport of the
// caller's own that cannot use Wrap.
func (r *Recorder) Record(req *http.Request, resp *http.Response) {
	rq := Request{Method: req.Method, Path: req.URL.Path, Watch: req.URL.Query().Get("watch") == "true"}
	if resp != nil {
		rq.Code = resp.StatusCode
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.requests = append(r.requests, rq)
}

// Requests returns a copy of the requests recorded since the start or the last Reset, in order.
func (r *Recorder) Requests() []Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.requests)
}

// Count returns how many requests with method went to path since the start or the last Reset,
// leaving out watches and the writes the server refused (Request.Refused).
func (r *Recorder) Count(method, path string) int {
	return r.count(func(rq Request) bool { return rq.Method == method && rq.Path == path && !rq.Watch && !rq.Refused() })
}

// CountRefused returns how many writes with method to path the server refused with 409 Conflict
// since the start or the last Reset.
func (r *Recorder) CountRefused(method, path string) int {
	return r.count(func(rq Request) bool { return rq.Method == method && rq.Path == path && rq.Refused() })
}

func (r *Recorder) count(match func(Request) bool) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, rq := range r.requests {
		if match(rq) {
			n++
		}
	}
	return n
}

// Reset forgets the requests recorded so far.
func (r *Recorder) Reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.requests = nil
}

// transport records each request it carries.
type transport struct {
	next http.RoundTripper
	rec  *Recorder
}

func (t transport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	t.rec.Record(req, resp)
	return resp, err
}
