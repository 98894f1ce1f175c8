package latency

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/kdag-dev/kdag/pkg/testing/leak"
)

func TestMain(m *testing.M) { os.Exit(leak.Check(m.Run)) }

// echoServer accepts connections on loopback and writes back what it reads; it stops at cleanup.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Go(func() {
				_, _ = io.Copy(c, c)
				_ = c.Close()
			})
		}
	})
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

func startProxy(t *testing.T, target string, opts Options) *Proxy {
	t.Helper()
	p, err := Start(target, opts)
	if err != nil {
		t.Fatalf("Start(%q): %v", target, err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return p
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// TestProxy_RoundTrip sends messages through the proxy to an echo server: each message comes
// back intact and no sooner than the configured round trip, the first (which also pays the
// proxy's dial) as the later ones on the same connection.
func TestProxy_RoundTrip(t *testing.T) {
	for name, tc := range map[string]struct {
		rtt      time.Duration
		messages int
		size     int
	}{
		"no delay is a plain proxy":               {rtt: 0, messages: 3, size: 16},
		"10 ms round trip, small messages":        {rtt: 10 * time.Millisecond, messages: 3, size: 16},
		"40 ms round trip, small messages":        {rtt: 40 * time.Millisecond, messages: 3, size: 16},
		"20 ms round trip, a message of 1 MiB":    {rtt: 20 * time.Millisecond, messages: 1, size: 1 << 20},
		"odd round trip, the one-way half rounds": {rtt: 15*time.Millisecond + 1, messages: 2, size: 100},
	} {
		t.Run(name, func(t *testing.T) {
			p := startProxy(t, echoServer(t), Options{RTT: tc.rtt})
			if got := p.RTT(); got < tc.rtt-1 || got > tc.rtt {
				t.Errorf("RTT() = %s, want %s", got, tc.rtt)
			}
			c := dial(t, p.Addr())
			for i := range tc.messages {
				msg := make([]byte, tc.size)
				_, _ = rand.Read(msg)
				start := time.Now()
				var wg sync.WaitGroup
				wg.Go(func() { _, _ = c.Write(msg) })
				got := make([]byte, len(msg))
				if _, err := io.ReadFull(c, got); err != nil {
					t.Fatalf("message %d: read: %v", i, err)
				}
				elapsed := time.Since(start)
				wg.Wait()
				if !bytes.Equal(got, msg) {
					t.Fatalf("message %d came back changed", i)
				}
				if elapsed < p.RTT() {
					t.Errorf("message %d came back after %s, want at least the round trip %s", i, elapsed, p.RTT())
				}
			}
		})
	}
}

// TestProxy_OneWay checks each direction on its own: what the client writes reaches the server
// no sooner than half the round trip, and what the server writes reaches the client no sooner
// than half the round trip.
func TestProxy_OneWay(t *testing.T) {
	for name, tc := range map[string]struct{ rtt time.Duration }{
		"no delay":    {0},
		"20 ms":       {20 * time.Millisecond},
		"60 ms":       {60 * time.Millisecond},
		"1 ms, small": {time.Millisecond},
	} {
		t.Run(name, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			p := startProxy(t, ln.Addr().String(), Options{RTT: tc.rtt})
			c := dial(t, p.Addr())
			oneWay := tc.rtt / 2

			sent := time.Now()
			if _, err := c.Write([]byte("ping")); err != nil {
				t.Fatal(err)
			}
			s, err := ln.Accept()
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			buf := make([]byte, 4)
			if _, err := io.ReadFull(s, buf); err != nil {
				t.Fatal(err)
			}
			if d := time.Since(sent); d < oneWay {
				t.Errorf("client to server took %s, want at least %s", d, oneWay)
			}

			sent = time.Now()
			if _, err := s.Write([]byte("pong")); err != nil {
				t.Fatal(err)
			}
			if _, err := io.ReadFull(c, buf); err != nil {
				t.Fatal(err)
			}
			if d := time.Since(sent); d < oneWay {
				t.Errorf("server to client took %s, want at least %s", d, oneWay)
			}
			if string(buf) != "pong" {
				t.Errorf("client read %q, want pong", buf)
			}
		})
	}
}

// TestProxy_HalfClose: a client that closes its sending side still gets the whole answer, as
// an HTTP/1.0 client or a shell pipe expects.
func TestProxy_HalfClose(t *testing.T) {
	p := startProxy(t, echoServer(t), Options{RTT: 10 * time.Millisecond})
	c := dial(t, p.Addr())
	if _, err := c.Write([]byte("all of it")); err != nil {
		t.Fatal(err)
	}
	if err := c.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(c)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != "all of it" {
		t.Errorf("read %q, want %q", got, "all of it")
	}
}

// TestProxy_HTTP sends HTTP requests through the proxy, one at a time and several at once:
// each takes at least the round trip.
func TestProxy_HTTP(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = fmt.Fprint(w, r.URL.Path)
	}))
	defer srv.Close()
	for name, tc := range map[string]struct {
		rtt       time.Duration
		parallel  int
		keepAlive bool
	}{
		"one request, 20 ms":                {rtt: 20 * time.Millisecond, parallel: 1},
		"one request on a kept connection":  {rtt: 20 * time.Millisecond, parallel: 1, keepAlive: true},
		"eight requests at once, 30 ms":     {rtt: 30 * time.Millisecond, parallel: 8},
		"eight requests at once, no delay":  {rtt: 0, parallel: 8},
		"eight requests at once, kept, 5ms": {rtt: 5 * time.Millisecond, parallel: 8, keepAlive: true},
	} {
		t.Run(name, func(t *testing.T) {
			p := startProxy(t, srv.URL, Options{RTT: tc.rtt})
			tr := &http.Transport{DisableKeepAlives: !tc.keepAlive}
			defer tr.CloseIdleConnections()
			hc := &http.Client{Transport: tr}
			if tc.keepAlive { // open the connection first, so the measured request reuses it
				get(t, hc, "http://"+p.Addr()+"/warm")
			}
			var wg sync.WaitGroup
			for i := range tc.parallel {
				wg.Go(func() {
					path := fmt.Sprintf("/r%d", i)
					start := time.Now()
					if body := get(t, hc, "http://"+p.Addr()+path); body != path {
						t.Errorf("GET %s answered %q", path, body)
					}
					if d := time.Since(start); d < tc.rtt {
						t.Errorf("GET %s took %s, want at least the round trip %s", path, d, tc.rtt)
					}
				})
			}
			wg.Wait()
		})
	}
}

func get(t *testing.T, hc *http.Client, url string) string {
	resp, err := hc.Get(url)
	if err != nil {
		t.Errorf("GET %s: %v", url, err)
		return ""
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Errorf("GET %s: read body: %v", url, err)
	}
	return string(body)
}

// TestProxy_Close closes the proxy under an open connection: the client sees the connection
// end, new connections are refused, and goleak (TestMain) finds no goroutine left behind.
func TestProxy_Close(t *testing.T) {
	p, err := Start(echoServer(t), Options{RTT: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	c := dial(t, p.Addr())
	if _, err := c.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1)
	if _, err := io.ReadFull(c, buf); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := p.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := c.Read(buf); err == nil {
		t.Error("read on a connection of a closed proxy succeeded")
	}
	if c2, err := net.Dial("tcp", p.Addr()); err == nil {
		_ = c2.Close()
		t.Error("a closed proxy accepted a connection")
	}
}

// TestProxy_CutAndRestore cuts the proxy under an open connection, for each RTT: the connection
// is reset, new ones are refused while cut (a second Cut changes nothing), and after Restore the
// same address forwards again; Restore of a proxy not cut and Cut after Close do nothing, Restore
// after Close fails.
func TestProxy_CutAndRestore(t *testing.T) {
	for _, rtt := range []time.Duration{0, 10 * time.Millisecond} {
		t.Run(rtt.String(), func(t *testing.T) {
			p := startProxy(t, echoServer(t), Options{RTT: rtt})
			addr := p.Addr()
			echo := func(c net.Conn) error {
				if _, err := c.Write([]byte("x")); err != nil {
					return err
				}
				buf := make([]byte, 1)
				_, err := io.ReadFull(c, buf)
				return err
			}
			c := dial(t, addr)
			if err := echo(c); err != nil {
				t.Fatalf("echo before the cut: %v", err)
			}
			if err := p.Restore(); err != nil {
				t.Errorf("Restore of a proxy not cut: %v", err)
			}
			for range 2 {
				if err := p.Cut(); err != nil {
					t.Fatalf("Cut: %v", err)
				}
			}
			if err := echo(c); err == nil {
				t.Error("echo on a connection open across the cut succeeded")
			}
			if c2, err := net.Dial("tcp", addr); err == nil {
				_ = c2.Close()
				t.Error("a cut proxy accepted a connection")
			}
			if err := p.Restore(); err != nil {
				t.Fatalf("Restore: %v", err)
			}
			if p.Addr() != addr {
				t.Errorf("Addr after Restore %s, want %s", p.Addr(), addr)
			}
			if err := echo(dial(t, addr)); err != nil {
				t.Errorf("echo after Restore: %v", err)
			}
			if err := p.Close(); err != nil {
				t.Fatal(err)
			}
			if err := p.Cut(); err != nil {
				t.Errorf("Cut after Close: %v", err)
			}
			if err := p.Restore(); err == nil {
				t.Error("Restore after Close succeeded")
			}
		})
	}
}

// TestProxy_UnreachableTarget: the proxy closes the client's connection when it cannot dial.
func TestProxy_UnreachableTarget(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close() // nothing listens there now
	p := startProxy(t, addr, Options{})
	c := dial(t, p.Addr())
	if _, err := io.ReadAll(c); err != nil {
		t.Logf("read: %v", err) // EOF or reset: either way the connection ended
	}
}

func TestStart_Errors(t *testing.T) {
	for name, tc := range map[string]struct {
		target string
		opts   Options
	}{
		"no port":                        {target: "localhost"},
		"a URL, no host":                 {target: "https://"},
		"a URL, no port, unknown scheme": {target: "tcp://127.0.0.1"},
		"an empty host":                  {target: ":6443"},
		"a negative delay":               {target: "127.0.0.1:1", opts: Options{RTT: -time.Millisecond}},
	} {
		t.Run(name, func(t *testing.T) {
			if p, err := Start(tc.target, tc.opts); err == nil {
				_ = p.Close()
				t.Errorf("Start(%q, %+v) succeeded, want an error", tc.target, tc.opts)
			}
		})
	}
}

func TestProxy_Config(t *testing.T) {
	p := startProxy(t, "https://127.0.0.1:6443", Options{})
	for name, tc := range map[string]struct {
		in         rest.Config
		host, name string
	}{
		"https URL": {in: rest.Config{Host: "https://127.0.0.1:6443"}, host: "https://" + p.Addr(), name: "127.0.0.1"},
		"a TLS server name set stays": {
			in:   rest.Config{Host: "https://127.0.0.1:6443", TLSClientConfig: rest.TLSClientConfig{ServerName: "kubernetes"}},
			host: "https://" + p.Addr(), name: "kubernetes",
		},
		"host:port": {in: rest.Config{Host: "127.0.0.1:6443"}, host: p.Addr()},
	} {
		t.Run(name, func(t *testing.T) {
			before := tc.in.Host
			got := p.Config(&tc.in)
			if got.Host != tc.host || got.ServerName != tc.name {
				t.Errorf("Config: host %q, server name %q; want %q, %q", got.Host, got.ServerName, tc.host, tc.name)
			}
			if tc.in.Host != before {
				t.Errorf("Config changed its argument's host to %q", tc.in.Host)
			}
		})
	}
}

func TestHostPort(t *testing.T) {
	for in, want := range map[string]string{
		"127.0.0.1:6443":         "127.0.0.1:6443",
		"https://127.0.0.1:6443": "127.0.0.1:6443",
		"https://localhost":      "localhost:443",
		"http://localhost/api":   "localhost:80",
		"https://[::1]:8443":     "[::1]:8443",
	} {
		got, err := hostPort(in)
		if err != nil || got != want {
			t.Errorf("hostPort(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}
