package faults_test

import (
	"net/http"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kdag-dev/kdag/pkg/testing/faults"
)

func TestScript(t *testing.T) {
	const path = "/api/v1/namespaces/ns/configmaps/c"
	st := metav1.Status{Code: http.StatusUnprocessableEntity, Reason: metav1.StatusReasonInvalid, Message: "spec.x: Invalid value",
		Details: &metav1.StatusDetails{Causes: []metav1.StatusCause{{Field: "spec.x", Message: "Invalid value"}}}}
	tests := []struct {
		name     string
		script   func(s *faults.Script, after func())
		want     []func(error) bool // each Get in turn
		wantHits int32
		wantRun  int
	}{{
		name:     "FailNext fails the next n with 500, then lets requests through",
		script:   func(s *faults.Script, _ func()) { s.FailNext(http.MethodGet, path, 2) },
		want:     []func(error) bool{apierrors.IsInternalError, apierrors.IsInternalError, isNil},
		wantHits: 1,
	}, {
		name: "FailNextWith answers with the code and reason",
		script: func(s *faults.Script, _ func()) {
			s.FailNextWith(http.MethodGet, path, 1, http.StatusConflict, metav1.StatusReasonConflict)
		},
		want:     []func(error) bool{apierrors.IsConflict, isNil},
		wantHits: 1,
	}, {
		name:     "FailNextWithStatus answers with the whole status",
		script:   func(s *faults.Script, _ func()) { s.FailNextWithStatus(http.MethodGet, path, 1, st) },
		want:     []func(error) bool{func(err error) bool { return apierrors.IsInvalid(err) && err.Error() == st.Message }, isNil},
		wantHits: 1,
	}, {
		name: "another method or path is not failed",
		script: func(s *faults.Script, _ func()) {
			s.FailNext(http.MethodDelete, path, 1)
			s.FailNext(http.MethodGet, path+"x", 1)
		},
		want:     []func(error) bool{isNil},
		wantHits: 1,
	}, {
		name:     "Clear drops the faults left",
		script:   func(s *faults.Script, _ func()) { s.FailNext(http.MethodGet, path, 5); s.Clear() },
		want:     []func(error) bool{isNil},
		wantHits: 1,
	}, {
		name:     "AfterNext runs once, after the server answered",
		script:   func(s *faults.Script, after func()) { s.AfterNext(http.MethodGet, path, after) },
		want:     []func(error) bool{isNil, isNil},
		wantHits: 2,
		wantRun:  1,
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv, hits := apiServer(t)
			s := &faults.Script{}
			ran := 0
			tc.script(s, func() {
				if hits.Load() == 0 {
					t.Error("AfterNext ran before the server answered")
				}
				ran++
			})
			cfg := &rest.Config{Host: srv.URL}
			cfg.Wrap(s.Wrap)
			cs, err := kubernetes.NewForConfig(cfg)
			if err != nil {
				t.Fatal(err)
			}
			for i, want := range tc.want {
				_, err := cs.CoreV1().ConfigMaps("ns").Get(t.Context(), "c", metav1.GetOptions{})
				if !want(err) {
					t.Errorf("Get %d: unexpected error %v", i+1, err)
				}
			}
			if got := hits.Load(); got != tc.wantHits {
				t.Errorf("requests that reached the server = %d, want %d", got, tc.wantHits)
			}
			if ran != tc.wantRun {
				t.Errorf("AfterNext ran %d times, want %d", ran, tc.wantRun)
			}
		})
	}
}

func isNil(err error) bool { return err == nil }
