//go:build linux

package cluster

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"pier.dev/pier/test/harness"
)

// TrafficOptions says where a traffic loop sends its requests.
type TrafficOptions struct {
	Addr string // an IP address: a VIP, a pod IP, a node address
	Port int
	Host string // Host header; "" means Addr
	Path string // "" means /
	// Netns is the namespace the connections are opened from; "" means
	// the lab's client namespace (pcc).
	Netns string
	// Interval between two requests of one client (default 10 ms) and
	// the timeout of one request (default 2 s).
	Interval, Timeout time.Duration
}

// Traffic is a running traffic loop: two clients, one keeping its
// connection alive and one opening a connection per request (they fail
// differently when a backend or an address moves), each sending POSTs
// (Go's transport retries a failed GET on a reused connection, which
// would hide exactly the failures a rollout test counts) and reading
// pier echo's answer to learn which pod served it.
type Traffic struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	res     TrafficResult
	stopped bool
}

// TrafficResult is what a traffic loop saw.
type TrafficResult struct {
	Requests int
	// Codes counts answers by HTTP status; 0 counts transport errors
	// (refused, reset, timeout).
	Codes map[int]int
	// Pods counts the 200 answers by the pod pier echo named.
	Pods map[string]int
	// Errors counts transport errors by kind ("connection refused", …).
	Errors map[string]int
	// Samples holds every request with its times, for harness.Recovery
	// and harness.Failed (a non-200 answer is a failed sample).
	Samples []harness.Sample
}

// Failed counts the requests that did not get a 200.
func (r TrafficResult) Failed() int { return r.Requests - r.Codes[http.StatusOK] }

func (r TrafficResult) String() string {
	return fmt.Sprintf("%d requests, %d failed, codes %v, pods %v, errors %v",
		r.Requests, r.Failed(), r.Codes, r.Pods, r.Errors)
}

// StartTraffic starts a traffic loop; Stop ends it and returns the
// result. Snapshot reads it while it runs.
func (c *Cluster) StartTraffic(opts TrafficOptions) *Traffic {
	if opts.Netns == "" {
		opts.Netns = c.Client.NS
	}
	if opts.Interval == 0 {
		opts.Interval = 10 * time.Millisecond
	}
	if opts.Timeout == 0 {
		opts.Timeout = 2 * time.Second
	}
	if opts.Host == "" {
		opts.Host = opts.Addr
	}
	if opts.Path == "" {
		opts.Path = "/"
	}
	ctx, cancel := context.WithCancel(context.Background())
	tr := &Traffic{cancel: cancel, res: TrafficResult{Codes: map[int]int{}, Pods: map[string]int{}, Errors: map[string]int{}}}
	dial := harness.NetnsDial(opts.Netns, opts.Timeout)
	for _, keepAlive := range []bool{true, false} {
		name := "keep-alive"
		if !keepAlive {
			name = "close"
		}
		client := &http.Client{Timeout: opts.Timeout, Transport: &http.Transport{
			DialContext: dial, DisableKeepAlives: !keepAlive, MaxIdleConnsPerHost: 1,
		}}
		tr.wg.Add(1)
		go func() {
			defer tr.wg.Done()
			defer client.CloseIdleConnections()
			for ctx.Err() == nil {
				s := harness.Sample{Client: name, Start: time.Now()}
				code, reply, _, err := harness.Send(client, http.MethodPost, opts.Addr, opts.Port, opts.Host, opts.Path)
				s.End = time.Now()
				if ctx.Err() != nil && err != nil {
					return // cut by Stop: not the system's failure
				}
				tr.record(s, code, reply.Pod, err)
				select {
				case <-ctx.Done():
				case <-time.After(opts.Interval):
				}
			}
		}()
	}
	return tr
}

func (tr *Traffic) record(s harness.Sample, code int, pod string, err error) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if tr.stopped {
		return
	}
	r := &tr.res
	r.Requests++
	switch {
	case err != nil:
		r.Codes[0]++
		r.Errors[errKind(err.Error())]++
		s.Err = err.Error()
	case code != http.StatusOK:
		r.Codes[code]++
		s.Err = fmt.Sprintf("status %d", code)
	default:
		r.Codes[code]++
		r.Pods[pod]++
		s.OK = true
	}
	r.Samples = append(r.Samples, s)
}

// Snapshot returns a copy of what was seen so far.
func (tr *Traffic) Snapshot() TrafficResult {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	r := TrafficResult{
		Requests: tr.res.Requests,
		Codes:    map[int]int{}, Pods: map[string]int{}, Errors: map[string]int{},
		Samples: append([]harness.Sample(nil), tr.res.Samples...),
	}
	for k, v := range tr.res.Codes {
		r.Codes[k] = v
	}
	for k, v := range tr.res.Pods {
		r.Pods[k] = v
	}
	for k, v := range tr.res.Errors {
		r.Errors[k] = v
	}
	sort.Slice(r.Samples, func(i, j int) bool { return r.Samples[i].Start.Before(r.Samples[j].Start) })
	return r
}

// Stop ends the loop (requests in flight are dropped, not counted) and
// returns the result.
func (tr *Traffic) Stop() TrafficResult {
	tr.cancel()
	tr.wg.Wait()
	tr.mu.Lock()
	tr.stopped = true
	tr.mu.Unlock()
	return tr.Snapshot()
}

func errKind(e string) string {
	for _, k := range []string{"connection refused", "connection reset", "timeout", "deadline", "EOF", "no route"} {
		if strings.Contains(e, k) {
			return k
		}
	}
	return e
}
