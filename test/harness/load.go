package harness

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"
)

// LoadResult counts what one client saw.
type LoadResult struct {
	Name       string
	Requests   int
	Transport  int            // transport errors: resets, refused connections, timeouts
	Unexpected int            // status codes other than 200
	Services   map[string]int // which service answered
	FirstErr   string
}

func (r LoadResult) String() string {
	return fmt.Sprintf("%s: %d requests, %d transport errors, %d unexpected statuses, services %v %s",
		r.Name, r.Requests, r.Transport, r.Unexpected, r.Services, r.FirstErr)
}

// RunLoad sends requests from two clients for the whole of ctx, each at
// about perClient requests per second: one keeps connections alive, the
// other opens a connection per request: each catches a
// different reload race.
func RunLoad(ctx context.Context, addr string, port int, host, path string, perClient int) []LoadResult {
	clients := map[string]*http.Client{
		"keep-alive": {Timeout: 5 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 4}},
		"close":      {Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}},
	}
	var wg sync.WaitGroup
	results := make(chan LoadResult, len(clients))
	interval := time.Second / time.Duration(perClient)
	for name, client := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := LoadResult{Name: name, Services: map[string]int{}}
			tick := time.NewTicker(interval)
			defer tick.Stop()
			for {
				select {
				case <-ctx.Done():
					results <- r
					return
				case <-tick.C:
				}
				r.Requests++
				code, reply, _, err := Send(client, http.MethodPost, addr, port, host, path)
				switch {
				case err != nil:
					r.Transport++
					if r.FirstErr == "" {
						r.FirstErr = err.Error()
					}
				case code != 200:
					r.Unexpected++
					if r.FirstErr == "" {
						r.FirstErr = fmt.Sprintf("status %d", code)
					}
				default:
					r.Services[reply.Service]++
				}
			}
		}()
	}
	wg.Wait()
	close(results)
	var out []LoadResult
	for r := range results {
		out = append(out, r)
	}
	return out
}
