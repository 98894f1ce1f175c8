package observability

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// envSkipJaeger set to 1 skips the trace test (and runs the rest with tracing off); unset, a missing
// Jaeger binary fails it.
const envSkipJaeger = "KDAG_SKIP_JAEGER"

// errJaegerSkipped is jaegerErr when KDAG_SKIP_JAEGER=1.
var errJaegerSkipped = errors.New(envSkipJaeger + "=1: no Jaeger, trace test skipped")

// jaeger is a Jaeger process of this test binary: hack/jaeger/config.yaml with every loopback port
// moved to a free one, so that a developer's Jaeger on the usual ports is neither hit nor in the way.
type jaeger struct {
	cmd     *exec.Cmd
	cancel  context.CancelFunc
	done    chan struct{} // closed once cmd.Wait returned
	waitErr error         // cmd.Wait's error, set before done closes
	dir     string        // temporary directory: the config and the log
	logPath string

	// otlpGRPC and otlpHTTP are the OTLP gRPC and HTTP endpoints (http://127.0.0.1:<port>),
	// queryURL the query HTTP base URL.
	otlpGRPC, otlpHTTP, queryURL string
}

// Ports of hack/jaeger/config.yaml the tests need to find in the moved configuration.
const (
	configOTLPGRPCPort = "4317"
	configOTLPHTTPPort = "4318"
	configQueryPort    = "16686"
	configHealthPort   = "13133"
)

// startJaeger starts Jaeger and waits until it is healthy and answers queries. It returns an error
// saying how to build the binary when there is none, errJaegerSkipped when KDAG_SKIP_JAEGER=1.
func startJaeger(ctx context.Context) (*jaeger, error) {
	if os.Getenv(envSkipJaeger) == "1" {
		return nil, errJaegerSkipped
	}
	bins, _ := filepath.Glob(filepath.Join(repoRoot, "bin", "jaeger-*", "jaeger"))
	if len(bins) == 0 {
		return nil, fmt.Errorf("no Jaeger binary at %s: `make test` builds it; set %s=1 to skip the trace test",
			filepath.Join(repoRoot, "bin", "jaeger-<version>", "jaeger"), envSkipJaeger)
	}
	slices.Sort(bins)
	bin := bins[len(bins)-1] // the newest version, if several are built

	raw, err := os.ReadFile(filepath.Join(repoRoot, "hack", "jaeger", "config.yaml"))
	if err != nil {
		return nil, err
	}
	config, ports, err := movePorts(string(raw))
	if err != nil {
		return nil, err
	}
	for _, p := range []string{configOTLPGRPCPort, configOTLPHTTPPort, configQueryPort, configHealthPort} {
		if ports[p] == "" {
			return nil, fmt.Errorf("hack/jaeger/config.yaml has no 127.0.0.1:%s any more: update %s", p, "test/e2e/observability")
		}
	}

	dir, err := os.MkdirTemp("", "kdag-e2e-jaeger-")
	if err != nil {
		return nil, err
	}
	j := &jaeger{
		dir:      dir,
		logPath:  filepath.Join(dir, "jaeger.log"),
		done:     make(chan struct{}),
		otlpGRPC: "http://127.0.0.1:" + ports[configOTLPGRPCPort],
		otlpHTTP: "http://127.0.0.1:" + ports[configOTLPHTTPPort],
		queryURL: "http://127.0.0.1:" + ports[configQueryPort],
	}
	configPath := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(configPath, []byte(config), 0o600); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	logFile, err := os.Create(j.logPath)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	defer logFile.Close() // the child has its own descriptor

	jctx, cancel := context.WithCancel(context.Background())
	j.cancel = cancel
	cmd := exec.CommandContext(jctx, bin, "--config", configPath)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) } // a graceful stop
	cmd.WaitDelay = 15 * time.Second                                         // then SIGKILL
	cmd.SysProcAttr = dieWithParent()                                        // even if the test binary is killed
	if err := cmd.Start(); err != nil {
		cancel()
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	j.cmd = cmd
	go func() {
		j.waitErr = cmd.Wait()
		close(j.done)
	}()

	health := "http://127.0.0.1:" + ports[configHealthPort] + "/status"
	if err := j.waitReady(ctx, health, j.queryURL+"/api/services"); err != nil {
		_ = j.stop()
		return nil, fmt.Errorf("jaeger %s not ready: %w\n%s", bin, err, j.logTail(4096))
	}
	fmt.Fprintf(os.Stderr, "jaeger %s: OTLP gRPC %s, OTLP HTTP %s, query %s, log %s\n", bin, j.otlpGRPC, j.otlpHTTP, j.queryURL, j.logPath)
	return j, nil
}

// listenAddr matches the loopback listen addresses of the Jaeger configuration.
var listenAddr = regexp.MustCompile(`127\.0\.0\.1:(\d+)`)

// movePorts replaces every 127.0.0.1:<port> of config (comments included) with a free port, the
// same replacement for each occurrence of a port, and returns the old-to-new port map.
func movePorts(config string) (string, map[string]string, error) {
	var old []string
	for _, m := range listenAddr.FindAllStringSubmatch(config, -1) {
		if !slices.Contains(old, m[1]) {
			old = append(old, m[1])
		}
	}
	free, err := freePorts(len(old))
	if err != nil {
		return "", nil, err
	}
	ports := map[string]string{}
	for i, p := range old {
		ports[p] = strconv.Itoa(free[i])
	}
	config = listenAddr.ReplaceAllStringFunc(config, func(s string) string {
		return "127.0.0.1:" + ports[strings.TrimPrefix(s, "127.0.0.1:")]
	})
	return config, ports, nil
}

// freePorts returns n distinct loopback TCP ports that were free a moment ago. All are held open
// together while choosing, so that they differ.
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	var listeners []net.Listener
	defer func() {
		for _, l := range listeners {
			_ = l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		listeners = append(listeners, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// waitReady polls the health endpoint and the query API until both answer 200.
func (j *jaeger) waitReady(ctx context.Context, urls ...string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	client := newHTTPClient()
	defer client.CloseIdleConnections()
	var last error
	for {
		last = nil
		for _, u := range urls {
			if _, err := get(ctx, client, u); err != nil {
				last = err
				break
			}
		}
		if last == nil {
			return nil
		}
		select {
		case <-j.done:
			return fmt.Errorf("exited: %w", j.waitErr)
		case <-ctx.Done():
			return fmt.Errorf("%w: %w", ctx.Err(), last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// stop sends SIGTERM, waits for the process (SIGKILL after 15 s) and removes its files.
func (j *jaeger) stop() error {
	j.cancel()
	<-j.done
	err := j.waitErr
	if errors.Is(err, context.Canceled) { // exited after our SIGTERM, successfully
		err = nil
	}
	if err != nil {
		err = fmt.Errorf("jaeger: %w\n%s", err, j.logTail(4096))
	}
	_ = os.RemoveAll(j.dir)
	return err
}

// logTail returns the last n bytes of Jaeger's log.
func (j *jaeger) logTail(n int64) string {
	f, err := os.Open(j.logPath)
	if err != nil {
		return ""
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() > n {
		_, _ = f.Seek(st.Size()-n, io.SeekStart)
	}
	b, _ := io.ReadAll(f)
	return string(b)
}

// newHTTPClient returns a client of its own transport, whose idle connections the caller closes:
// nothing of the test's HTTP traffic outlives it.
func newHTTPClient() *http.Client {
	return &http.Client{Transport: &http.Transport{}, Timeout: 10 * time.Second}
}

// get returns the body of a 200 response to GET u.
func get(ctx context.Context, client *http.Client, u string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return body, fmt.Errorf("GET %s: %s: %.200s", u, resp.Status, body)
	}
	return body, nil
}

// Jaeger's query API (GET /api/traces, the JSON of the UI): an OpenTelemetry span's parent is a
// CHILD_OF reference and each of its links a FOLLOWS_FROM reference (the OTLP-to-Jaeger
// translation), which may point into another trace.
type jaegerResponse struct {
	Data   []jaegerTrace `json:"data"`
	Errors []struct {
		Code int    `json:"code"`
		Msg  string `json:"msg"`
	} `json:"errors"`
}

type jaegerTrace struct {
	TraceID string       `json:"traceID"`
	Spans   []jaegerSpan `json:"spans"`
}

type jaegerSpan struct {
	TraceID       string      `json:"traceID"`
	SpanID        string      `json:"spanID"`
	OperationName string      `json:"operationName"`
	References    []jaegerRef `json:"references"`
	Tags          []jaegerTag `json:"tags"`
	StartTime     int64       `json:"startTime"` // µs since the epoch
	Duration      int64       `json:"duration"`  // µs
}

type jaegerRef struct {
	RefType string `json:"refType"` // CHILD_OF or FOLLOWS_FROM
	TraceID string `json:"traceID"`
	SpanID  string `json:"spanID"`
}

type jaegerTag struct {
	Key   string `json:"key"`
	Type  string `json:"type"`
	Value any    `json:"value"`
}

const (
	refChildOf     = "CHILD_OF"
	refFollowsFrom = "FOLLOWS_FROM"
)

// tag returns the value of the span's tag key as a string ("" when absent).
func (s *jaegerSpan) tag(key string) string {
	for _, t := range s.Tags {
		if t.Key == key {
			return fmt.Sprint(t.Value)
		}
	}
	return ""
}

// parent returns the span's CHILD_OF reference's span ID, "" for a root span.
func (s *jaegerSpan) parent() string {
	for _, r := range s.References {
		if r.RefType == refChildOf {
			return r.SpanID
		}
	}
	return ""
}

// links returns the span's FOLLOWS_FROM references: its OpenTelemetry links.
func (s *jaegerSpan) links() []jaegerRef {
	var out []jaegerRef
	for _, r := range s.References {
		if r.RefType == refFollowsFrom {
			out = append(out, r)
		}
	}
	return out
}

// queryTraces polls GET /api/traces?service=<service> until it returns traces and their span
// count stopped growing (Jaeger's batch processor stores spans a little after it receives them),
// and returns them with the raw body.
func (j *jaeger) queryTraces(ctx context.Context, service string) ([]jaegerTrace, []byte, error) {
	u := j.queryURL + "/api/traces?" + url.Values{
		"service":  {service},
		"limit":    {"1000"},
		"lookback": {"1h"},
	}.Encode()
	client := newHTTPClient()
	defer client.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	lastCount, stable := -1, 0
	var (
		last    []jaegerTrace
		lastRaw []byte
		lastErr error
	)
	for {
		body, err := get(ctx, client, u)
		if err == nil {
			var resp jaegerResponse
			if err = json.Unmarshal(body, &resp); err == nil && len(resp.Errors) > 0 {
				err = fmt.Errorf("jaeger errors: %+v", resp.Errors)
			}
			if err == nil {
				count := 0
				for _, t := range resp.Data {
					count += len(t.Spans)
				}
				if count > 0 && count == lastCount {
					stable++
				} else {
					stable = 0
				}
				lastCount, last, lastRaw = count, resp.Data, body
				if stable >= 2 {
					return last, lastRaw, nil
				}
			}
		}
		if err != nil {
			lastErr = err
		}
		select {
		case <-ctx.Done():
			if lastCount > 0 { // still growing after 30 s: take what there is
				return last, lastRaw, nil
			}
			return nil, nil, fmt.Errorf("no trace of service %s in Jaeger (%s) within 30s: %w", service, u, lastErr)
		case <-time.After(300 * time.Millisecond):
		}
	}
}

func TestStartJaegerWithoutBinary(t *testing.T) {
	t.Setenv(envSkipJaeger, "")
	root := repoRoot
	repoRoot = t.TempDir()
	t.Cleanup(func() { repoRoot = root })
	j, err := startJaeger(t.Context())
	if j != nil || err == nil || !strings.Contains(err.Error(), "`make test` builds it") || !strings.Contains(err.Error(), envSkipJaeger) {
		t.Fatalf("startJaeger without a binary: %v, %v; want an error pointing at make test and %s", j, err, envSkipJaeger)
	}
	t.Setenv(envSkipJaeger, "1")
	if _, err := startJaeger(t.Context()); !errors.Is(err, errJaegerSkipped) {
		t.Fatalf("with %s=1: %v, want errJaegerSkipped", envSkipJaeger, err)
	}
}

func TestMovePorts(t *testing.T) {
	in := "# OTLP 127.0.0.1:4317\ngrpc:\n  endpoint: 127.0.0.1:4317\nhttp:\n  endpoint: 127.0.0.1:4318\nother: 0.0.0.0:1\n"
	out, ports, err := movePorts(in)
	if err != nil {
		t.Fatal(err)
	}
	if len(ports) != 2 || ports["4317"] == "" || ports["4318"] == "" || ports["4317"] == ports["4318"] {
		t.Fatalf("ports %v", ports)
	}
	want := strings.NewReplacer("127.0.0.1:4317", "127.0.0.1:"+ports["4317"], "127.0.0.1:4318", "127.0.0.1:"+ports["4318"]).Replace(in)
	if out != want {
		t.Errorf("got\n%s\nwant\n%s", out, want)
	}
}
