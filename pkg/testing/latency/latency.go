package latency

import (
	"net"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/pkg/errors"
	"k8s.io/client-go/rest"
)

// Options configure Start.
type Options struct {
	// RTT is the round trip the proxy adds: each direction holds the data it forwards for RTT/2.
	// Default: 0, a plain proxy.
	RTT time.Duration
	// Queue is how many reads per direction and connection may be in flight (read, not yet
	// written) before the proxy stops reading that direction, as a full TCP window would.
	// Default: 1024.
	Queue int
}

// readSize is the buffer of one read; a read forwards whatever the socket has, up to this.
const readSize = 32 << 10

// Proxy forwards loopback TCP connections to a target address with a delay in each direction.
type Proxy struct {
	addr   string // where it listens, kept across Cut and Restore
	target string
	oneWay time.Duration
	queue  int

	mu     sync.Mutex
	ln     net.Listener // nil while cut
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// Start listens on a free loopback port and forwards each connection to target, which is a
// host:port or a URL such as a rest.Config's Host ("https://127.0.0.1:6443"). A target that
// cannot be reached shows up per connection: the proxy closes the client's connection. It
// returns an error when target cannot be parsed or the proxy cannot listen. Call Close when done.
func Start(target string, opts Options) (*Proxy, error) {
	addr, err := hostPort(target)
	if err != nil {
		return nil, err
	}
	if opts.RTT < 0 {
		return nil, errors.Errorf("latency: RTT %s is negative", opts.RTT)
	}
	if opts.Queue <= 0 {
		opts.Queue = 1024
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, errors.Wrap(err, "latency: listen on loopback")
	}
	p := &Proxy{ln: ln, addr: ln.Addr().String(), target: addr, oneWay: opts.RTT / 2, queue: opts.Queue, conns: map[net.Conn]struct{}{}}
	p.wg.Go(func() { p.accept(ln) })
	return p, nil
}

// hostPort returns the host:port of target, a host:port or a URL with a scheme (an http or
// https URL without a port gets its scheme's).
func hostPort(target string) (string, error) {
	addr := target
	if strings.Contains(target, "://") {
		u, err := url.Parse(target)
		if err != nil {
			return "", errors.Wrapf(err, "latency: target %q", target)
		}
		addr = u.Host
		if u.Port() == "" && u.Hostname() != "" {
			addr = net.JoinHostPort(u.Hostname(), defaultPorts[u.Scheme])
		}
	}
	if h, port, err := net.SplitHostPort(addr); err != nil || h == "" || port == "" {
		return "", errors.Errorf("latency: target %q is neither host:port nor a URL with a host", target)
	}
	return addr, nil
}

var defaultPorts = map[string]string{"http": "80", "https": "443"}

// Addr returns the proxy's host:port.
func (p *Proxy) Addr() string { return p.addr }

// RTT returns the round trip the proxy adds (twice the one-way delay).
func (p *Proxy) RTT() time.Duration { return 2 * p.oneWay }

// Config returns a copy of cfg that reaches its API server through the proxy: the same scheme,
// credentials and TLS settings, with the proxy's address as host. The server's certificate is
// still checked against the original host name (cfg's TLS server name when it sets one), which
// a loopback proxy keeps valid: the name is the same, only the port differs.
func (p *Proxy) Config(cfg *rest.Config) *rest.Config {
	out := rest.CopyConfig(cfg)
	if u, err := url.Parse(cfg.Host); err == nil && u.Host != "" {
		if out.ServerName == "" {
			out.ServerName = u.Hostname()
		}
		u.Host = p.Addr()
		out.Host = u.String()
		return out
	}
	out.Host = p.Addr()
	return out
}

// Close stops accepting connections, closes the open ones and waits until every goroutine of
// the proxy has returned. It is safe to call more than once.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	var err error
	if p.ln != nil {
		err = p.ln.Close()
	}
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
	return errors.Wrap(err, "latency: close listener")
}

// Cut cuts the network between the clients and the target, as a partition that the hosts see
// (a firewall that rejects, a peer restarted): every open connection through the proxy is reset
// (RST, no FIN: the client's reads and writes fail at once) and new connections to Addr are
// refused until Restore. Cutting a cut or closed proxy does nothing. It returns an error when the
// listener cannot be closed.
func (p *Proxy) Cut() error {
	p.mu.Lock()
	if p.closed || p.ln == nil {
		p.mu.Unlock()
		return nil
	}
	ln := p.ln
	p.ln = nil
	err := ln.Close()
	for c := range p.conns {
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetLinger(0) // close with RST
		}
		_ = c.Close()
	}
	p.mu.Unlock()
	return errors.Wrap(err, "latency: close listener")
}

// Restore ends a Cut: the proxy listens on Addr again and forwards new connections. Restoring a
// proxy that is not cut does nothing. It returns an error when the proxy is closed or Addr cannot
// be listened on again (another process took the port meanwhile).
func (p *Proxy) Restore() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return errors.New("latency: restore a closed proxy")
	}
	if p.ln != nil {
		return nil
	}
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		return errors.Wrapf(err, "latency: listen on %s again", p.addr)
	}
	p.ln = ln
	p.wg.Go(func() { p.accept(ln) })
	return nil
}

// track registers c so that Close and Cut close it; it returns false while the proxy is cut or
// once it is closed.
func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.ln == nil {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) untrack(conns ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range conns {
		delete(p.conns, c)
	}
}

func (p *Proxy) accept(ln net.Listener) {
	for {
		client, err := ln.Accept()
		if err != nil {
			return // closed
		}
		if !p.track(client) {
			_ = client.Close()
			return
		}
		p.wg.Go(func() { p.serve(client) })
	}
}

// serve dials the target for client and forwards both directions until both are done.
func (p *Proxy) serve(client net.Conn) {
	server, err := net.Dial("tcp", p.target)
	if err != nil || !p.track(server) {
		if server != nil {
			_ = server.Close()
		}
		_ = client.Close()
		p.untrack(client)
		return
	}
	var dirs sync.WaitGroup
	dirs.Go(func() { p.forward(client, server) })
	dirs.Go(func() { p.forward(server, client) })
	dirs.Wait()
	_ = client.Close()
	_ = server.Close()
	p.untrack(client, server)
}

// chunk is one read, due to be written at due.
type chunk struct {
	data []byte
	due  time.Time
}

// forward copies src to dst, each read written oneWay after it was read. Reading and writing
// run apart, so a slow write does not delay the reads behind it by more than the queue allows.
// At the end of src it half-closes dst, so the other direction goes on; on a write error it
// closes both, and the reader, whose next read then fails, ends the direction.
func (p *Proxy) forward(src, dst net.Conn) {
	queue := make(chan chunk, p.queue)
	var w sync.WaitGroup
	w.Go(func() {
		failed := false
		for c := range queue {
			if failed {
				continue // drain, so that the reader never blocks
			}
			if d := time.Until(c.due); d > 0 {
				time.Sleep(d)
			}
			if _, err := dst.Write(c.data); err != nil {
				failed = true
				_ = src.Close()
				_ = dst.Close()
			}
		}
		if !failed {
			closeWrite(dst)
		}
	})
	buf := make([]byte, readSize)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			queue <- chunk{data: append([]byte(nil), buf[:n]...), due: time.Now().Add(p.oneWay)}
		}
		if err != nil {
			break
		}
	}
	close(queue)
	w.Wait()
}

// closeWrite half-closes c when it is a TCP connection, and closes it otherwise.
func closeWrite(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.CloseWrite()
		return
	}
	_ = c.Close()
}
