package envtest

import (
	"net/http"
	"time"

	"k8s.io/client-go/rest"
)

// readTries is how many times the test client sends a read whose request fails in the transport.
const readTries = 3

// readRetryWait is the pause before the second try; it doubles before each later one.
const readRetryWait = 50 * time.Millisecond

// clientConfig returns a copy of cfg for Environment.Client whose transport sends a read (GET or
// HEAD: a get, a list, the start of a watch) again, up to readTries times in all, when the
// request fails before any response arrives: an HTTP/2 stream the API server reset ("stream
// error: ...; PROTOCOL_ERROR; received from peer", seen once in CI after some 160,000 requests on
// one connection), a connection reset. client-go itself retries a GET only on a reset or lost
// connection (rest.Request's IsConnectionReset, IsProbableEOF, IsHTTP2ConnectionLost), not on a
// reset stream. A response with any status, a write, and a request whose context has ended are
// never sent again. cfg itself is left as it is: the operators a test starts from
// Environment.Config see every error, as they would in a cluster.
func clientConfig(cfg *rest.Config) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.Wrap(retryReads)
	return c
}

// retryReads wraps next as clientConfig describes.
func retryReads(next http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		resp, err := next.RoundTrip(req)
		if req.Method != http.MethodGet && req.Method != http.MethodHead {
			return resp, err
		}
		wait := readRetryWait
		for try := 2; err != nil && try <= readTries && req.Context().Err() == nil; try++ {
			t := time.NewTimer(wait)
			select {
			case <-req.Context().Done():
				t.Stop()
				return resp, err
			case <-t.C:
			}
			wait *= 2
			resp, err = next.RoundTrip(req)
		}
		return resp, err
	})
}

// roundTripFunc is an http.RoundTripper from a function.
type roundTripFunc func(*http.Request) (*http.Response, error)

// RoundTrip calls f.
func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }
