package requests

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
)

// replies answers each request with the status code its method maps to, or fails it.
type replies map[string]int

func (r replies) RoundTrip(req *http.Request) (*http.Response, error) {
	code, ok := r[req.Method]
	if !ok {
		return nil, errors.New("connection refused")
	}
	return &http.Response{StatusCode: code, Body: http.NoBody, Request: req}, nil
}

func TestRecorder_RecordsEachRequestWithItsCode(t *testing.T) {
	rec := &Recorder{}
	rt := rec.Wrap(replies{http.MethodGet: 200, http.MethodPatch: 409, http.MethodPost: 201})
	send := func(method, target string) {
		resp, err := rt.RoundTrip(httptest.NewRequest(method, target, nil))
		if err == nil {
			resp.Body.Close()
		}
	}
	send(http.MethodGet, "/api/v1/namespaces/a/configmaps?watch=true")
	send(http.MethodGet, "/api/v1/namespaces/a/configmaps/x")
	send(http.MethodPatch, "/api/v1/namespaces/a/configmaps/x")
	send(http.MethodPost, "/apis/events.k8s.io/v1/namespaces/a/events")
	send(http.MethodDelete, "/api/v1/namespaces/a/configmaps/x")

	want := []Request{
		{Method: "GET", Path: "/api/v1/namespaces/a/configmaps", Watch: true, Code: 200},
		{Method: "GET", Path: "/api/v1/namespaces/a/configmaps/x", Code: 200},
		{Method: "PATCH", Path: "/api/v1/namespaces/a/configmaps/x", Code: 409},
		{Method: "POST", Path: "/apis/events.k8s.io/v1/namespaces/a/events", Code: 201},
		{Method: "DELETE", Path: "/api/v1/namespaces/a/configmaps/x"},
	}
	got := rec.Requests()
	if !slices.Equal(got, want) {
		t.Fatalf("requests:\n%v\nwant:\n%v", got, want)
	}
	if got[1].Write() || !got[2].Write() || !got[2].Refused() || got[4].Refused() {
		t.Errorf("Write/Refused wrong for %v", got)
	}
	if !got[3].Event() || got[2].Event() {
		t.Errorf("Event wrong for %v", got)
	}
	if n := rec.Count("PATCH", "/api/v1/namespaces/a/configmaps/x"); n != 0 {
		t.Errorf("Count(PATCH) = %d, want 0 (the only PATCH was refused)", n)
	}
	if n := rec.CountRefused("PATCH", "/api/v1/namespaces/a/configmaps/x"); n != 1 {
		t.Errorf("CountRefused(PATCH) = %d, want 1", n)
	}
	if n := rec.Count("GET", "/api/v1/namespaces/a/configmaps"); n != 0 {
		t.Errorf("Count(GET list) = %d, want 0 (watches are left out)", n)
	}
	rec.Reset()
	if got := rec.Requests(); len(got) != 0 {
		t.Errorf("after Reset: %v", got)
	}
}

func TestRequest_Event(t *testing.T) {
	for path, want := range map[string]bool{
		"/api/v1/events":                     true,
		"/api/v1/namespaces/a/events/e1":     true,
		"/apis/events.k8s.io/v1/events":      true,
		"/api/v1/namespaces/events":          false, // the namespace named "events"
		"/api/v1/namespaces/a/configmaps/ev": false,
	} {
		if got := (Request{Path: path}).Event(); got != want {
			t.Errorf("Event(%s) = %v, want %v", path, got, want)
		}
	}
}
