package process

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// loadResult counts one client loop's outcomes.
type loadResult struct {
	name      string
	requests  int
	transport int
	non2xx    int
	firstErrs []string
	seen      map[string]int // X-Config value -> responses
}

// clientLoop sends requests one after another until stop is closed.
func clientLoop(name, url string, keepAlive bool, stop <-chan struct{}) *loadResult {
	r := &loadResult{name: name, seen: map[string]int{}}
	tr := &http.Transport{DisableKeepAlives: !keepAlive, MaxIdleConnsPerHost: 1}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr, Timeout: 5 * time.Second}
	for {
		select {
		case <-stop:
			return r
		default:
		}
		r.requests++
		resp, err := c.Do(unreplayable(url))
		if err != nil {
			r.transport++
			if len(r.firstErrs) < 5 {
				r.firstErrs = append(r.firstErrs, err.Error())
			}
			continue
		}
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		switch {
		case err != nil:
			r.transport++
			if len(r.firstErrs) < 5 {
				r.firstErrs = append(r.firstErrs, "body: "+err.Error())
			}
		case resp.StatusCode < 200 || resp.StatusCode > 299:
			r.non2xx++
			if len(r.firstErrs) < 5 {
				r.firstErrs = append(r.firstErrs, fmt.Sprintf("status %d", resp.StatusCode))
			}
		default:
			r.seen[resp.Header.Get("X-Config")]++
		}
	}
}

// unreplayable returns a POST whose body cannot be rewound: net/http then
// never retries it on a reused connection that the server closed, so every
// race a reload causes shows up as an error (like wrk), instead of being
// hidden by a silent retry as a GET would be.
func unreplayable(url string) *http.Request {
	req, err := http.NewRequest(http.MethodPost, url, io.NopCloser(strings.NewReader("x")))
	if err != nil {
		panic(err)
	}
	req.ContentLength = 1
	return req
}

// TestReloadUnderLoadZeroErrors: reloads every 250 ms under a keep-alive
// client and a connection-per-request client; no request may fail.
func TestReloadUnderLoadZeroErrors(t *testing.T) {
	e := newEnv(t)
	configs := []string{e.config("a", ""), e.config("b", "")}
	e.write(configs[0])
	i := e.instance()
	start(t, i)

	stop := make(chan struct{})
	results := make([]*loadResult, 2)
	var wg sync.WaitGroup
	for n, keepAlive := range []bool{true, false} {
		name := map[bool]string{true: "keep-alive", false: "connection-close"}[keepAlive]
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[n] = clientLoop(name, e.url("/"), keepAlive, stop)
		}()
	}
	storm := reloadStorm(t, e, i, configs)
	time.Sleep(300 * time.Millisecond) // let the clients see the last reload settle
	close(stop)
	wg.Wait()

	t.Logf("%s; stats %+v", storm, i.Stats())
	for _, r := range results {
		t.Logf("%s: %d requests, %d transport errors, %d non-2xx, seen %v",
			r.name, r.requests, r.transport, r.non2xx, r.seen)
		if r.transport != 0 || r.non2xx != 0 {
			t.Errorf("%s: %d transport errors, %d non-2xx; first: %v", r.name, r.transport, r.non2xx, r.firstErrs)
		}
		if r.seen["a"] == 0 || r.seen["b"] == 0 {
			t.Errorf("%s: did not observe both configurations: %v", r.name, r.seen)
		}
		if r.requests < 100 {
			t.Errorf("%s: only %d requests, the load did not run", r.name, r.requests)
		}
	}
}

// reloadStorm reloads every 250 ms (back to back when a reload takes
// longer), alternating configs, for at least 5 s and at least 20 reloads:
// on a slow machine the storm runs longer rather than shrinking. It returns
// a summary.
func reloadStorm(t *testing.T, e *env, i *Instance, configs []string) string {
	const duration, every, minReloads = 5 * time.Second, 250 * time.Millisecond, 20
	var reloads, failed, maxOld int
	var took []time.Duration
	began := time.Now()
	for n := 1; (time.Since(began) < duration || reloads < minReloads) && time.Since(began) < 4*duration; n++ {
		t0 := time.Now()
		e.write(configs[n%2])
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := i.Reload(ctx)
		cancel()
		reloads++
		took = append(took, time.Since(t0))
		if err != nil {
			failed++
			t.Errorf("reload %d: %v", n, err)
		} else if ws, err := i.Workers(context.Background()); err == nil {
			maxOld = max(maxOld, len(ws)-1)
		}
		time.Sleep(every - time.Since(t0))
	}
	if reloads < minReloads {
		t.Errorf("only %d reloads", reloads)
	}
	slices.Sort(took)
	ms := func(d time.Duration) time.Duration { return d.Round(time.Millisecond) }
	return fmt.Sprintf("%d reloads (%d failed) in %s; each (check + reload + confirm) took %s..%s, median %s; at most %d old workers seen",
		reloads, failed, ms(time.Since(began)), ms(took[0]), ms(took[len(took)-1]), ms(took[len(took)/2]), maxOld)
}
