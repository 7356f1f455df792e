package kubeapi

import (
	"io"
	"net"
	"net/url"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"
)

// Proxy is a TCP relay in front of the API server that a test can cut and
// restore, to show a client losing the API server while others keep
// writing. TLS passes through untouched (the serving cert is for 127.0.0.1,
// whatever the port).
type Proxy struct {
	l      net.Listener
	target string

	mu    sync.Mutex
	cut   bool
	delay time.Duration // added to what the server sends (SetDelay)
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

// NewProxy relays to the server's port until the test ends.
func (s *Server) NewProxy(t testing.TB) *Proxy {
	t.Helper()
	return s.NewProxyAt(t, "127.0.0.1:0")
}

// NewProxyAt is NewProxy listening on addr (host:port, port 0 for any):
// an address that clients in other network namespaces reach, such as a
// lab's host link. Clients keep 127.0.0.1 as the TLS server name.
func (s *Server) NewProxyAt(t testing.TB, addr string) *Proxy {
	t.Helper()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("proxy: %v", err)
	}
	u, err := url.Parse(s.Host())
	if err != nil {
		t.Fatalf("proxy: %v", err)
	}
	p := &Proxy{l: l, target: u.Host, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

// Addr is the host:port the proxy listens on.
func (p *Proxy) Addr() string { return p.l.Addr().String() }

// Config returns a copy of cfg that goes through the proxy.
func (p *Proxy) Config(cfg *rest.Config) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.Host = "https://" + p.l.Addr().String()
	return c
}

// Cut closes every relayed connection and refuses new ones until Restore.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for c := range p.conns {
		c.Close()
	}
}

// Restore accepts connections again.
func (p *Proxy) Restore() {
	p.mu.Lock()
	p.cut = false
	p.mu.Unlock()
}

// SetDelay holds every byte the API server sends for d before the client
// gets it (0: none), on open connections too: a slow API server whose
// answers come after the client's own timeout, though the server did
// the work. Bytes keep their order; a smaller delay takes effect for
// bytes read from then on.
func (p *Proxy) SetDelay(d time.Duration) {
	p.mu.Lock()
	p.delay = d
	p.mu.Unlock()
}

func (p *Proxy) currentDelay() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.delay
}

func (p *Proxy) close() {
	p.l.Close()
	p.Cut()
	p.wg.Wait()
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.l.Accept()
		if err != nil {
			return // listener closed
		}
		if !p.track(c) {
			c.Close()
			continue
		}
		p.wg.Add(1)
		go p.relay(c)
	}
}

func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	c.Close()
}

func (p *Proxy) relay(client net.Conn) {
	defer p.wg.Done()
	defer p.untrack(client)
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	if !p.track(server) {
		server.Close()
		return
	}
	defer p.untrack(server)
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		done <- struct{}{}
	}
	go pipe(server, client)
	go func() {
		p.delayedCopy(client, server)
		done <- struct{}{}
	}()
	<-done // either side ending ends both: closing unblocks the other copy
}

// delayedCopy copies src to dst, each chunk written when the delay set at
// the time it was read has passed.
func (p *Proxy) delayedCopy(dst, src net.Conn) {
	type chunk struct {
		due  time.Time
		data []byte
	}
	chunks := make(chan chunk, 1024)
	go func() {
		defer close(chunks)
		buf := make([]byte, 32*1024)
		for {
			n, err := src.Read(buf)
			if n > 0 {
				chunks <- chunk{due: time.Now().Add(p.currentDelay()), data: append([]byte(nil), buf[:n]...)}
			}
			if err != nil {
				return
			}
		}
	}()
	for c := range chunks {
		time.Sleep(time.Until(c.due))
		if _, err := dst.Write(c.data); err != nil {
			src.Close() // unblocks the reader
			for range chunks {
			}
			return
		}
	}
}
