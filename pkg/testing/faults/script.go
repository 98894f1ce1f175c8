package faults

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Script injects scripted faults: the next n requests with a given method and URL path fail
// with a given answer, or a function runs once a given request's response is back (to change
// the cluster between two requests of a reconcile). Where an Injector fails a share of all
// requests at random, a Script fails exactly the request a test names. The zero value injects
// nothing; it is safe for concurrent use. Wrap gives the http.RoundTripper.
type Script struct {
	mu     sync.Mutex
	faults []*scripted
}

// scripted is one fault of a Script: remaining requests with method and path get status (its
// code, reason, message and causes), or, when after is set, go through and run after.
type scripted struct {
	method, path string
	remaining    int
	status       metav1.Status
	after        func()
}

// FailNext makes the next n requests with method (GET, PATCH, ...) and URL path (such as
// /api/v1/namespaces/ns/configmaps/app) fail with HTTP 500 InternalError.
func (s *Script) FailNext(method, path string, n int) {
	s.FailNextWith(method, path, n, http.StatusInternalServerError, metav1.StatusReasonInternalError)
}

// FailNextWith makes the next n requests with method and path fail with HTTP code and reason.
func (s *Script) FailNextWith(method, path string, n, code int, reason metav1.StatusReason) {
	s.FailNextWithStatus(method, path, n, metav1.Status{Code: int32(code), Reason: reason, Message: Message})
}

// FailNextWithStatus makes the next n requests with method and path fail with st, as the API
// server would write it: its code (the HTTP status), reason, message and causes.
func (s *Script) FailNextWithStatus(method, path string, n int, st metav1.Status) {
	s.add(&scripted{method: method, path: path, remaining: n, status: st})
}

// AfterNext runs fn once the response to the next request with method and path is back, before
// the client sees it.
func (s *Script) AfterNext(method, path string, fn func()) {
	s.add(&scripted{method: method, path: path, remaining: 1, after: fn})
}

// Clear drops the faults not used up yet.
func (s *Script) Clear() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = nil
}

func (s *Script) add(f *scripted) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = append(s.faults, f)
}

// take returns the fault req meets, counting req against it, or nil.
func (s *Script) take(req *http.Request) *scripted {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, f := range s.faults {
		if f.remaining > 0 && f.method == req.Method && f.path == req.URL.Path {
			f.remaining--
			return f
		}
	}
	return nil
}

// Wrap returns a transport that sends requests to next unless the Script fails them. Its
// signature fits rest.Config.Wrap.
func (s *Script) Wrap(next http.RoundTripper) http.RoundTripper {
	return scriptTransport{next: next, script: s}
}

type scriptTransport struct {
	next   http.RoundTripper
	script *Script
}

func (t scriptTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	f := t.script.take(req)
	switch {
	case f == nil:
		return t.next.RoundTrip(req)
	case f.after != nil:
		resp, err := t.next.RoundTrip(req)
		f.after()
		return resp, err
	}
	if req.Body != nil {
		_ = req.Body.Close()
	}
	st := f.status
	st.Kind, st.APIVersion, st.Status = "Status", "v1", metav1.StatusFailure
	body, err := json.Marshal(st)
	if err != nil {
		return nil, err
	}
	code := int(st.Code)
	return &http.Response{
		StatusCode: code, Status: fmt.Sprintf("%d %s", code, http.StatusText(code)),
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:        http.Header{"Content-Type": {"application/json"}},
		Body:          io.NopCloser(bytes.NewReader(body)),
		ContentLength: int64(len(body)),
		Request:       req,
	}, nil
}
