package e2e

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"
)

// loadResult counts what one client saw.
type loadResult struct {
	name       string
	requests   int
	transport  int            // transport errors: resets, refused connections, timeouts
	unexpected int            // status codes other than 200
	services   map[string]int // which service answered
	firstErr   string
}

func (r loadResult) String() string {
	return fmt.Sprintf("%s: %d requests, %d transport errors, %d unexpected statuses, services %v %s",
		r.name, r.requests, r.transport, r.unexpected, r.services, r.firstErr)
}

// runLoad sends requests from two clients for the whole of ctx, each at
// about perClient requests per second: one keeps connections alive, the
// other opens a connection per request. RELIABILITY.md: each catches a
// different reload race.
func runLoad(ctx context.Context, addr string, port int, host, path string, perClient int) []loadResult {
	clients := map[string]*http.Client{
		"keep-alive": {Timeout: 5 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 4}},
		"close":      {Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}},
	}
	var wg sync.WaitGroup
	results := make(chan loadResult, len(clients))
	interval := time.Second / time.Duration(perClient)
	for name, client := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := loadResult{name: name, services: map[string]int{}}
			tick := time.NewTicker(interval)
			defer tick.Stop()
			for {
				select {
				case <-ctx.Done():
					results <- r
					return
				case <-tick.C:
				}
				r.requests++
				code, reply, _, err := send(client, http.MethodPost, addr, port, host, path)
				switch {
				case err != nil:
					r.transport++
					if r.firstErr == "" {
						r.firstErr = err.Error()
					}
				case code != 200:
					r.unexpected++
					if r.firstErr == "" {
						r.firstErr = fmt.Sprintf("status %d", code)
					}
				default:
					r.services[reply.Service]++
				}
			}
		}()
	}
	wg.Wait()
	close(results)
	var out []loadResult
	for r := range results {
		out = append(out, r)
	}
	return out
}
