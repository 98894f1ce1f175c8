// Package faults injects API server failures into a client: an Injector wraps the
// http.RoundTripper of a rest.Config (rest.Config.Wrap) and fails a configurable share of the
// requests the way a struggling API server or network does, so that tests can check what a
// controller does when its writes, reads, watches or status updates fail.
//
// Each failure is one Kind: HTTP 500 InternalError, 503 ServiceUnavailable, 429 TooManyRequests
// with a Retry-After header (client-go retries those by itself), 409 Conflict, a timeout (an
// i/o timeout error, as a deadline on the connection gives) or a connection reset by peer.
// Timeouts and resets can be injected before the request reaches the API server or after it
// was served, with the response lost (LostResponses): the write happened, the client does not
// know. A watch request is failed before its stream starts; its stream is never cut midway
// unless BreakWatches says so.
//
// Which requests fail is decided by a seeded hash of the request's method, path and how many
// times that method and path were seen before, not by arrival order: with the same seed, the
// same sequence of requests per object fails the same way however goroutines interleave.
// Stats counts the requests seen and the faults injected by kind, for assertions; Disable turns
// injection off (the period "afterwards") and Enable back on.
//
// Typical use, with envtest (pkg/testing/envtest): New with Share, Seed and Filter; pass
// Injector.Wrap to the manager's rest.Config.Wrap; let owners converge while a share of the
// manager's requests fail; Disable; assert on Stats. ExampleNew (example_test.go) runs it
// against an HTTP server.
//
// It follows the API conventions for error responses (a metav1.Status body with reason and
// code) so that client-go decodes injected failures as it would real ones.
package faults
