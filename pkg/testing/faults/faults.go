package faults

import (
	"bytes"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Kind is one way a request fails. Its value reads well in logs and test output.
type Kind string

// The kinds of faults an Injector injects.
const (
	// InternalError answers HTTP 500 with reason InternalError.
	InternalError Kind = "InternalError"
	// ServiceUnavailable answers HTTP 503 with reason ServiceUnavailable and no Retry-After, so
	// the failure reaches the caller.
	ServiceUnavailable Kind = "ServiceUnavailable"
	// TooManyRequests answers HTTP 429 with reason TooManyRequests and a Retry-After header (see
	// RetryAfter), as API Priority and Fairness does; client-go waits and retries by itself.
	TooManyRequests Kind = "TooManyRequests"
	// Conflict answers HTTP 409 with reason Conflict.
	Conflict Kind = "Conflict"
	// Timeout fails the request with an i/o timeout error (a net.Error whose Timeout is true).
	Timeout Kind = "Timeout"
	// ConnectionReset fails the request with "connection reset by peer" (syscall.ECONNRESET),
	// which client-go retries for GET requests.
	ConnectionReset Kind = "ConnectionReset"
)

// AllKinds returns every Kind, in a fixed order.
func AllKinds() []Kind {
	return []Kind{InternalError, ServiceUnavailable, TooManyRequests, Conflict, Timeout, ConnectionReset}
}

// Message is the message of every injected HTTP error response, so that a test can tell
// injected failures from real ones in conditions, events and logs.
const Message = "injected fault"

// Option configures New.
type Option func(*options)

type options struct {
	share, lost  float64
	seed         uint64
	kinds        []Kind
	filter       func(*http.Request) bool
	retryAfter   int
	breakWatches bool
	disabled     bool
}

// Share sets the share of eligible requests that fail, from 0 (none) to 1 (all). Default: 0.1.
func Share(p float64) Option { return func(o *options) { o.share = p } }

// Seed sets the seed of the decisions, so that a failing run can be replayed. Default: 1.
func Seed(n uint64) Option { return func(o *options) { o.seed = n } }

// Kinds sets the kinds of faults, each chosen with the same probability. Default: AllKinds().
func Kinds(kinds ...Kind) Option { return func(o *options) { o.kinds = append([]Kind(nil), kinds...) } }

// Filter makes only the requests for which f returns true eligible for a fault; others always
// reach the API server. Default: every request is eligible.
func Filter(f func(*http.Request) bool) Option { return func(o *options) { o.filter = f } }

// RetryAfter sets the Retry-After header, in seconds, of TooManyRequests responses. Default: 1.
func RetryAfter(seconds int) Option { return func(o *options) { o.retryAfter = seconds } }

// LostResponses sets the share of Timeout and ConnectionReset faults that are injected after
// the API server served the request (its effect happened; the response is lost) instead of
// before it reached the server. Default: 0 (always before).
func LostResponses(p float64) Option { return func(o *options) { o.lost = p } }

// BreakWatches makes a watch request chosen for a fault reach the API server and then cuts its
// stream with a connection reset after the first read, instead of failing it before the stream
// starts. Default: off.
func BreakWatches() Option { return func(o *options) { o.breakWatches = true } }

// StartDisabled creates the Injector disabled: no fault until Enable. Default: enabled.
func StartDisabled() Option { return func(o *options) { o.disabled = true } }

// NotEvents is a Filter that leaves Event requests (core/v1 and events.k8s.io) alone. Events are
// best effort in Kubernetes (a recorder drops an event the API server rejects), so tests that
// check failures are reported through events use it to keep that channel reliable.
func NotEvents(req *http.Request) bool { return !IsEvent(req) }

// IsEvent reports whether req is about Events: a path under /apis/events.k8s.io/ or a core/v1
// events resource.
func IsEvent(req *http.Request) bool {
	path := req.URL.Path
	if strings.HasPrefix(path, "/apis/events.k8s.io/") {
		return true
	}
	parts := strings.Split(strings.Trim(path, "/"), "/")
	// api/v1/events or api/v1/namespaces/<ns>/events[/<name>]
	return len(parts) >= 3 && parts[0] == "api" &&
		(parts[2] == "events" || len(parts) >= 5 && parts[2] == "namespaces" && parts[4] == "events")
}

// IsWatch reports whether req is a watch request (query watch=true or watch=1).
func IsWatch(req *http.Request) bool {
	w := req.URL.Query().Get("watch")
	return w == "true" || w == "1"
}

// Stats counts what an Injector saw and did since it was created.
type Stats struct {
	// Requests is every request that went through the Injector, enabled or not.
	Requests int
	// Eligible is the requests that could have failed: seen while enabled and let through by
	// the Filter.
	Eligible int
	// Injected counts the faults injected, by kind.
	Injected map[Kind]int
	// AfterServer counts the injected faults that reached the API server first: lost responses
	// and broken watch streams (they are in Injected too).
	AfterServer int
	// BrokenWatches counts the watch streams cut midway (BreakWatches); they are in Injected as
	// ConnectionReset and in AfterServer too.
	BrokenWatches int
}

// Total returns the number of injected faults of every kind.
func (s Stats) Total() int {
	n := 0
	for _, v := range s.Injected {
		n += v
	}
	return n
}

// Injector decides which requests fail and keeps the counts. Wrap gives the http.RoundTripper
// that injects; every Transport an Injector wraps shares its switch, seed and counters. It is
// safe for concurrent use.
type Injector struct {
	opts    options
	enabled atomic.Bool

	mu    sync.Mutex
	seen  map[string]uint64 // occurrences per method and path
	stats Stats
}

// New returns an Injector configured by opts (defaults: 10% of all requests fail, every kind,
// seed 1, enabled). It panics on a share outside [0, 1] or an unknown Kind: a test setup mistake.
func New(opts ...Option) *Injector {
	o := options{share: 0.1, seed: 1, kinds: AllKinds(), retryAfter: 1}
	for _, opt := range opts {
		opt(&o)
	}
	if o.share < 0 || o.share > 1 || o.lost < 0 || o.lost > 1 {
		panic(fmt.Sprintf("faults: Share %v and LostResponses %v must be within [0, 1]", o.share, o.lost))
	}
	if len(o.kinds) == 0 {
		panic("faults: Kinds needs at least one kind")
	}
	for _, k := range o.kinds {
		if !validKind(k) {
			panic(fmt.Sprintf("faults: unknown kind %q", k))
		}
	}
	inj := &Injector{opts: o, seen: map[string]uint64{}, stats: Stats{Injected: map[Kind]int{}}}
	inj.enabled.Store(!o.disabled)
	return inj
}

func validKind(k Kind) bool {
	for _, known := range AllKinds() {
		if k == known {
			return true
		}
	}
	return false
}

// Wrap returns a Transport that sends requests to next unless the Injector fails them. Its
// signature fits rest.Config.Wrap and rest.Config.WrapTransport.
func (inj *Injector) Wrap(next http.RoundTripper) http.RoundTripper {
	return &Transport{next: next, inj: inj}
}

// Enable turns injection on.
func (inj *Injector) Enable() { inj.enabled.Store(true) }

// Disable turns injection off: from now on every request reaches the API server. Requests
// already failed stay failed.
func (inj *Injector) Disable() { inj.enabled.Store(false) }

// Enabled reports whether injection is on.
func (inj *Injector) Enabled() bool { return inj.enabled.Load() }

// Stats returns a copy of the counts.
func (inj *Injector) Stats() Stats {
	inj.mu.Lock()
	defer inj.mu.Unlock()
	s := inj.stats
	s.Injected = make(map[Kind]int, len(inj.stats.Injected))
	for k, v := range inj.stats.Injected {
		s.Injected[k] = v
	}
	return s
}

// decision is what happens to one request.
type decision struct {
	fail        bool
	kind        Kind
	afterServer bool
}

// decide draws the fate of req from the seed, its method and path, and the number of earlier
// requests with the same method and path, and counts it.
func (inj *Injector) decide(req *http.Request) decision {
	key := req.Method + " " + req.URL.Path
	inj.mu.Lock()
	defer inj.mu.Unlock()
	n := inj.seen[key]
	inj.seen[key] = n + 1
	inj.stats.Requests++
	if !inj.enabled.Load() || inj.opts.filter != nil && !inj.opts.filter(req) {
		return decision{}
	}
	inj.stats.Eligible++
	h := fnv.New64a()
	_, _ = h.Write([]byte(key))
	rng := rand.New(rand.NewPCG(inj.opts.seed, h.Sum64()^(n*0x9e3779b97f4a7c15)))
	if rng.Float64() >= inj.opts.share {
		return decision{}
	}
	d := decision{fail: true, kind: inj.opts.kinds[rng.IntN(len(inj.opts.kinds))]}
	lost := rng.Float64() < inj.opts.lost
	switch {
	case IsWatch(req) && inj.opts.breakWatches:
		d.kind, d.afterServer = ConnectionReset, true
		inj.stats.BrokenWatches++
	case IsWatch(req):
		// A lost watch response is a stream that never starts: fail it before the server.
	case d.kind == Timeout || d.kind == ConnectionReset:
		d.afterServer = lost
	}
	inj.stats.Injected[d.kind]++
	if d.afterServer {
		inj.stats.AfterServer++
	}
	return d
}

// Transport is the http.RoundTripper an Injector's Wrap returns.
type Transport struct {
	next http.RoundTripper
	inj  *Injector
}

var _ http.RoundTripper = (*Transport)(nil)

// RoundTrip sends req to the wrapped RoundTripper, or fails it as the Injector decides: with an
// HTTP error response (a metav1.Status body), or with a transport error before or after the
// request reached the server.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	d := t.inj.decide(req)
	switch {
	case !d.fail:
		return t.next.RoundTrip(req)
	case IsWatch(req) && d.afterServer:
		resp, err := t.next.RoundTrip(req)
		if err != nil || resp.StatusCode != http.StatusOK {
			return resp, err
		}
		resp.Body = &brokenStream{ReadCloser: resp.Body}
		return resp, nil
	case d.afterServer:
		resp, err := t.next.RoundTrip(req)
		if err != nil {
			return nil, err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		return nil, transportError(d.kind)
	}
	if req.Body != nil {
		_ = req.Body.Close()
	}
	switch d.kind {
	case InternalError:
		return t.statusResponse(req, http.StatusInternalServerError, metav1.StatusReasonInternalError), nil
	case ServiceUnavailable:
		return t.statusResponse(req, http.StatusServiceUnavailable, metav1.StatusReasonServiceUnavailable), nil
	case TooManyRequests:
		return t.statusResponse(req, http.StatusTooManyRequests, metav1.StatusReasonTooManyRequests), nil
	case Conflict:
		return t.statusResponse(req, http.StatusConflict, metav1.StatusReasonConflict), nil
	}
	return nil, transportError(d.kind)
}

// statusResponse is the API server's error response with code and reason.
func (t *Transport) statusResponse(req *http.Request, code int, reason metav1.StatusReason) *http.Response {
	st := metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusFailure,
		Message:  fmt.Sprintf("%s: %s", Message, reason),
		Reason:   reason,
		Code:     int32(code),
	}
	header := http.Header{"Content-Type": {"application/json"}}
	if code == http.StatusTooManyRequests {
		header.Set("Retry-After", strconv.Itoa(t.inj.opts.retryAfter))
		st.Details = &metav1.StatusDetails{RetryAfterSeconds: int32(t.inj.opts.retryAfter)}
	}
	body, err := json.Marshal(st)
	if err != nil {
		panic(err) // a metav1.Status always marshals
	}
	return &http.Response{
		StatusCode: code, Status: fmt.Sprintf("%d %s", code, http.StatusText(code)),
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:        header,
		Body:          io.NopCloser(bytes.NewReader(body)),
		ContentLength: int64(len(body)),
		Request:       req,
	}
}

// transportError is the error a dropped connection gives: an i/o timeout or a reset.
func transportError(k Kind) error {
	if k == Timeout {
		return &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}
	}
	return &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}
}

// brokenStream passes the first read of a watch stream through and fails every later one
// with a connection reset.
type brokenStream struct {
	io.ReadCloser
	reads atomic.Int32
}

func (b *brokenStream) Read(p []byte) (int, error) {
	if b.reads.Add(1) > 1 {
		return 0, transportError(ConnectionReset)
	}
	return b.ReadCloser.Read(p)
}
