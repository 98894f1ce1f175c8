package envtest

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// TestClientConfig_ReadSentAgainAfterAResetStream serves a ConfigMap over HTTP/2 from a server
// that resets the stream of the first resets requests (RST_STREAM before any response, as
// the API server did once in CI), and checks which requests the test client's config sends
// again: reads up to readTries times, never writes; the config it was made from not at all.
func TestClientConfig_ReadSentAgainAfterAResetStream(t *testing.T) {
	for _, tc := range []struct {
		name     string
		create   bool // a write (POST) instead of a read (GET)
		raw      bool // the Environment's Config, which operators under test use
		resets   int32
		wantErr  bool
		wantSent int32
	}{
		{name: "read, one reset", resets: 1, wantSent: 2},
		{name: "read, two resets", resets: 2, wantSent: 3},
		{name: "read, a reset on every try", resets: readTries, wantErr: true, wantSent: readTries},
		{name: "read, no reset", resets: 0, wantSent: 1},
		{name: "write, one reset", create: true, resets: 1, wantErr: true, wantSent: 1},
		{name: "read by the raw config, one reset", raw: true, resets: 1, wantErr: true, wantSent: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var sent atomic.Int32
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if sent.Add(1) <= tc.resets {
					panic(http.ErrAbortHandler) // HTTP/2: RST_STREAM, no response
				}
				w.Header().Set("Content-Type", "application/json")
				_ = json.NewEncoder(w).Encode(&corev1.ConfigMap{
					TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
					ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cm"},
				})
			}))
			srv.EnableHTTP2 = true
			srv.StartTLS()
			defer srv.Close()

			raw := &rest.Config{Host: srv.URL, Transport: srv.Client().Transport}
			cfg := clientConfig(raw)
			if raw.WrapTransport != nil {
				t.Fatal("clientConfig changed the config it copied: operators under test would have their reads retried")
			}
			if tc.raw {
				cfg = raw
			}
			cs, err := kubernetes.NewForConfig(cfg)
			if err != nil {
				t.Fatal(err)
			}
			cms := cs.CoreV1().ConfigMaps("ns")
			if tc.create {
				_, err = cms.Create(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm"}}, metav1.CreateOptions{})
			} else {
				_, err = cms.Get(context.Background(), "cm", metav1.GetOptions{})
			}
			if gotErr := err != nil; gotErr != tc.wantErr {
				t.Errorf("error %v, want an error: %v", err, tc.wantErr)
			}
			if err != nil && !strings.Contains(err.Error(), "INTERNAL_ERROR") {
				t.Errorf("error %v, want the reset stream's", err)
			}
			if got := sent.Load(); got != tc.wantSent {
				t.Errorf("the server received %d requests, want %d", got, tc.wantSent)
			}
		})
	}
}

// TestRetryReads_EndedContextNotSentAgain: a read whose context has ended when its first try
// fails is not sent again.
func TestRetryReads_EndedContextNotSentAgain(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var sent int
	rt := retryReads(roundTripFunc(func(*http.Request) (*http.Response, error) {
		sent++
		cancel()
		return nil, context.Canceled
	}))
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://example.invalid/api", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rt.RoundTrip(req); err == nil || sent != 1 {
		t.Errorf("RoundTrip: error %v after %d tries, want context.Canceled after 1", err, sent)
	}
}
