// Package latency puts a network between a client and an API server that run on the same
// machine. A Proxy is a loopback TCP proxy that holds every byte it forwards for half the
// configured round trip in each direction, so every request, response and watch event pays the
// round trip as it would to a managed cluster's API server, while the client and the server stay
// unchanged: TLS, HTTP/2 and client-go's connection pooling go through the proxy as they are.
//
// The delay is a pipeline, not a pause: data read at time t is written at t + RTT/2 whatever
// else is in flight, so ten requests sent at once take one round trip, not ten, as on a real
// network (bandwidth is the loopback's). It is not a sleep in the client (an http.RoundTripper
// that waits before each request would serialize nothing and delay no watch event).
//
// Main types: Proxy (Start, Close) and Options. Typical use, with envtest (pkg/testing/envtest):
//
//	p, err := latency.Start(env.Config.Host, latency.Options{RTT: 20 * time.Millisecond})
//	if err != nil { ... }
//	defer p.Close()
//	mgr, err := ctrl.NewManager(p.Config(env.Config), ctrl.Options{...})
//
// Close stops accepting, closes every connection and waits for the proxy's goroutines, so
// tests that use goleak stay clean.
//
// Cut and Restore make a network partition: Cut resets every connection and refuses new ones,
// Restore listens on the same address again (test/e2e/controlplane cuts the operator off its API
// server for 30 s this way).
package latency
