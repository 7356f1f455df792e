package faults

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"pier.dev/pier/test/harness"
)

// target is one route the load hits.
type target struct {
	name       string
	addr       string
	port       int
	host, path string
	// tls, when set, makes the clients speak HTTPS with this config (SNI
	// and certificate checks).
	tls *tls.Config
	// want is the expected status code (default 200).
	want int
}

// stats is what one client (one target, one profile) saw.
type stats struct {
	target, profile       string
	requests              int
	transport, unexpected int
	firstErr              string
	errAt                 []time.Time // when each failure was seen
	okAt                  []time.Time // when each successful request was sent
	pods                  map[string]int
	maxLatency            time.Duration
}

func (s *stats) errors() int { return s.transport + s.unexpected }

func (s *stats) String() string {
	return fmt.Sprintf("%s/%s: %d requests, %d transport errors, %d unexpected statuses, max latency %s, pods %v %s",
		s.target, s.profile, s.requests, s.transport, s.unexpected, s.maxLatency.Round(time.Millisecond), s.pods, s.firstErr)
}

// load runs both profiles against every target until stop.
type load struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	all    []*stats
}

// perClient is the request rate of each client. Two cores are shared with
// other work: 60/s per client keeps HAProxy and pier busy without starving
// them, and still puts several requests in flight across every reload.
const perClient = 60

// startLoad starts a keep-alive and a connection-per-request client per
// target, each at perClient requests per second. They POST: Go's
// transport silently retries a failed idempotent request on a reused
// connection, which would hide the errors looked for.
func startLoad(targets ...target) *load {
	ctx, cancel := context.WithCancel(context.Background())
	l := &load{cancel: cancel}
	for _, tg := range targets {
		for _, profile := range []string{"keep-alive", "close"} {
			s := &stats{target: tg.name, profile: profile, pods: map[string]int{}}
			l.all = append(l.all, s)
			l.wg.Add(1)
			go func() {
				defer l.wg.Done()
				run(ctx, tg, newClient(tg, profile == "close"), s)
			}()
		}
	}
	return l
}

func newClient(tg target, close bool) *http.Client {
	tr := &http.Transport{MaxIdleConnsPerHost: 4, DisableKeepAlives: close, TLSClientConfig: tg.tls}
	return &http.Client{Timeout: 5 * time.Second, Transport: tr}
}

func run(ctx context.Context, tg target, client *http.Client, s *stats) {
	defer client.CloseIdleConnections()
	want := tg.want
	if want == 0 {
		want = 200
	}
	tick := time.NewTicker(time.Second / perClient)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		began := time.Now()
		code, reply, err := send(client, tg)
		ended := time.Now()
		s.requests++
		s.maxLatency = max(s.maxLatency, ended.Sub(began))
		switch {
		case err != nil:
			s.transport++
		case code != want:
			s.unexpected++
			err = fmt.Errorf("status %d", code)
		default:
			s.okAt = append(s.okAt, began)
			if reply.Pod != "" {
				s.pods[reply.Pod]++
			}
			continue
		}
		s.errAt = append(s.errAt, ended)
		if s.firstErr == "" {
			s.firstErr = fmt.Sprintf("(first at %s: %v)", ended.Format("15:04:05.000"), err)
		}
	}
}

// stop ends the load and returns what every client saw.
func (l *load) stop() []*stats {
	l.cancel()
	l.wg.Wait()
	return l.all
}

// send POSTs to the target and decodes the echo reply of a 200.
func send(client *http.Client, tg target) (int, harness.EchoReply, error) {
	scheme := "http"
	if tg.tls != nil {
		scheme = "https"
	}
	u := scheme + "://" + net.JoinHostPort(tg.addr, strconv.Itoa(tg.port)) + tg.path
	req, err := http.NewRequest(http.MethodPost, u, nil)
	if err != nil {
		return 0, harness.EchoReply{}, err
	}
	req.Host = tg.host
	resp, err := client.Do(req)
	if err != nil {
		return 0, harness.EchoReply{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, harness.EchoReply{}, err
	}
	var r harness.EchoReply
	if resp.StatusCode == 200 {
		if err := json.Unmarshal(body, &r); err != nil {
			return resp.StatusCode, r, fmt.Errorf("decode %q: %w", body, err)
		}
	}
	return resp.StatusCode, r, nil
}

// report logs every client's figures and returns the total requests.
func report(t *testing.T, all []*stats) int {
	t.Helper()
	total := 0
	for _, s := range all {
		t.Logf("load %s", s)
		total += s.requests
	}
	return total
}

// requireNoErrors fails the test for every client that saw an error.
func requireNoErrors(t *testing.T, all []*stats) {
	t.Helper()
	for _, s := range all {
		if s.errors() != 0 {
			t.Errorf("%s/%s: %d transport errors, %d unexpected statuses, want 0 %s",
				s.target, s.profile, s.transport, s.unexpected, s.firstErr)
		}
		if s.requests < perClient {
			t.Errorf("%s/%s: only %d requests: the load was lower than the test claims", s.target, s.profile, s.requests)
		}
	}
}
