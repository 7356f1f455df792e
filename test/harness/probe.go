package harness

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"pier.dev/pier/internal/netnsdo"
)

// Sample is one request a Probe sent.
type Sample struct {
	Client     string // "keep-alive" or "close"
	Start, End time.Time
	OK         bool
	Err        string // why it failed
}

// ProbeOptions configures a Probe.
type ProbeOptions struct {
	URL  string // http://VIP:port/path
	Host string // Host header
	// Netns, when set, is the client host's network namespace: every
	// connection is opened from there.
	Netns string
	// Interval between two requests of one client; Timeout per request.
	Interval, Timeout time.Duration
}

// Probe sends requests without pause from two clients, one keeping its
// connections alive and one opening a connection per request (they fail
// in different ways when an address moves), and records every outcome
// with its times: the failover figures are read from them.
type Probe struct {
	mu      sync.Mutex
	samples []Sample
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

// StartProbe starts a Probe; Stop ends it.
func StartProbe(ctx context.Context, opts ProbeOptions) *Probe {
	if opts.Interval == 0 {
		opts.Interval = 5 * time.Millisecond
	}
	if opts.Timeout == 0 {
		opts.Timeout = 300 * time.Millisecond
	}
	ctx, cancel := context.WithCancel(ctx)
	p := &Probe{cancel: cancel}
	dial := (&net.Dialer{Timeout: opts.Timeout}).DialContext
	if opts.Netns != "" {
		dial = NetnsDial(opts.Netns, opts.Timeout)
	}
	for _, keepAlive := range []bool{true, false} {
		name := "keep-alive"
		if !keepAlive {
			name = "close"
		}
		client := &http.Client{Timeout: opts.Timeout, Transport: &http.Transport{
			DialContext: dial, DisableKeepAlives: !keepAlive, MaxIdleConnsPerHost: 1,
		}}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			for ctx.Err() == nil {
				s := probeOnce(ctx, client, opts, name)
				if ctx.Err() != nil {
					return // cut by Stop: not a failure of the system under test
				}
				p.mu.Lock()
				p.samples = append(p.samples, s)
				p.mu.Unlock()
				time.Sleep(opts.Interval)
			}
		}()
	}
	return p
}

func probeOnce(ctx context.Context, client *http.Client, opts ProbeOptions, name string) Sample {
	s := Sample{Client: name, Start: time.Now()}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, opts.URL, nil)
	if err != nil {
		s.Err = err.Error()
		return s
	}
	req.Host = opts.Host
	resp, err := client.Do(req)
	if err == nil {
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err == nil && resp.StatusCode != http.StatusOK {
			err = fmt.Errorf("status %d", resp.StatusCode)
		}
	}
	s.End = time.Now()
	if err != nil {
		s.Err = err.Error()
		return s
	}
	s.OK = true
	return s
}

// Samples returns what was recorded so far, sorted by start.
func (p *Probe) Samples() []Sample {
	p.mu.Lock()
	out := append([]Sample(nil), p.samples...)
	p.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Start.Before(out[j].Start) })
	return out
}

// Stop ends the Probe and returns every sample.
func (p *Probe) Stop() []Sample {
	p.cancel()
	p.wg.Wait()
	return p.Samples()
}

// Recovery is the time from fault to the end of the first successful
// request that started at or after it: the outage a client saw. ok is
// false when no request succeeded after the fault.
func Recovery(samples []Sample, fault time.Time) (d time.Duration, ok bool) {
	var best time.Time
	for _, s := range samples {
		if s.OK && !s.Start.Before(fault) && (best.IsZero() || s.End.Before(best)) {
			best = s.End
		}
	}
	if best.IsZero() {
		return 0, false
	}
	return best.Sub(fault), true
}

// Failed returns the samples that failed and started in [from, to).
func Failed(samples []Sample, from, to time.Time) []Sample {
	var out []Sample
	for _, s := range samples {
		if !s.OK && !s.Start.Before(from) && s.Start.Before(to) {
			out = append(out, s)
		}
	}
	return out
}

// Summary describes samples for a log line.
func Summary(samples []Sample) string {
	ok, failed := 0, 0
	errs := map[string]int{}
	for _, s := range samples {
		if s.OK {
			ok++
			continue
		}
		failed++
		errs[shortErr(s.Err)]++
	}
	return fmt.Sprintf("%d ok, %d failed %v", ok, failed, errs)
}

func shortErr(e string) string {
	for _, k := range []string{"connection refused", "connection reset", "timeout", "deadline", "EOF", "no route"} {
		if strings.Contains(e, k) {
			return k
		}
	}
	return e
}

// NetnsDial returns a DialContext that opens its sockets inside network
// namespace ns (a socket stays in the namespace it was made in).
func NetnsDial(ns string, timeout time.Duration) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		var conn net.Conn
		var dialErr error
		err := netnsdo.Do(ns, func() error {
			conn, dialErr = (&net.Dialer{Timeout: timeout}).DialContext(ctx, network, addr)
			return nil
		})
		if err != nil {
			return nil, err
		}
		return conn, dialErr
	}
}

// Straddle is a request written in two halves: Begin opens its connection
// and sends all but the request's final line break, Finish sends the rest
// and reads the status line. A move of the address between the two is
// what a connection open at the instant of a handover lives through.
type Straddle struct {
	conn net.Conn
}

// BeginStraddle opens the connection to addr ("VIP:port") from netns and
// sends the first half of a GET for host.
func BeginStraddle(netns, addr, host string) (*Straddle, error) {
	conn, err := NetnsDial(netns, 2*time.Second)(context.Background(), "tcp", addr)
	if err != nil {
		return nil, err
	}
	if _, err := fmt.Fprintf(conn, "GET / HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n", host); err != nil {
		conn.Close()
		return nil, err
	}
	return &Straddle{conn: conn}, nil
}

// Finish completes the request and returns the response's status line.
func (s *Straddle) Finish() (string, error) {
	defer s.conn.Close()
	if err := s.conn.SetDeadline(time.Now().Add(3 * time.Second)); err != nil {
		return "", err
	}
	if _, err := io.WriteString(s.conn, "\r\n"); err != nil {
		return "", err
	}
	buf := make([]byte, 64)
	n, err := io.ReadAtLeast(s.conn, buf, len("HTTP/1.1 200"))
	if err != nil {
		return "", err
	}
	line, _, _ := strings.Cut(string(buf[:n]), "\r\n")
	return line, nil
}
