package render

import (
	"sync"
	"testing"
	"time"

	"pier.dev/pier/internal/model"
)

// TestIntegrationRateLimit runs limit-rps, limit-rpm and
// limit-connections through a real HAProxy: a client gets its allowance
// and then 503 until it slows down, while another client address, and
// the same client on another Ingress's route of the same host, are
// served; a client under the limit is never refused; a second request
// in progress from one address is refused with limit-connections 1.
func TestIntegrationRateLimit(t *testing.T) {
	bin := haproxyBin(t)
	if testing.Short() {
		t.Skip("starts HAProxy")
	}
	fast := pool("fast", memberAt(startBackend(t, "fast")))
	slow := pool("slow", memberAt(startSlowBackend(t, "slow", 700*time.Millisecond)))
	with := func(p model.L7Policy, o model.PolicyOptions) model.L7Policy { p.Options = &o; return p }
	lb := newLB([]model.Listener{httpListener("", routes(
		with(toPool(fast, hostIs("app.test"), pathPrefix("/api")), model.PolicyOptions{RateLimit: &model.RateLimit{RequestsPerSecond: 4}}),
		with(toPool(fast, hostIs("app.test"), pathPrefix("/login")), model.PolicyOptions{RateLimit: &model.RateLimit{RequestsPerMinute: 2}}),
		with(toPool(slow, hostIs("app.test"), pathPrefix("/download")), model.PolicyOptions{RateLimit: &model.RateLimit{Connections: 1}}),
		toPool(fast, hostIs("app.test"), pathPrefix("/")),
	))}, fast, slow)
	addr := serveLB(t, bin, lb)
	get := func(from, path string) int {
		return rawRequest(t, addr, from, "GET "+path+" HTTP/1.1\r\nHost: app.test\r\n\r\n").StatusCode
	}
	statuses := func(from, path string, n int) []int {
		var out []int
		for i := 0; i < n; i++ {
			out = append(out, get(from, path))
		}
		return out
	}
	want := func(what string, got []int, ok200 int) {
		t.Helper()
		for i, s := range got {
			if w := map[bool]int{true: 200, false: 503}[i < ok200]; s != w {
				t.Errorf("%s: statuses %v, want %d times 200 then 503", what, got, ok200)
				return
			}
		}
	}

	// limit-rps 4: a burst of 10 gets 4 through.
	want("rps burst", statuses("127.0.0.1", "/api", 10), 4)
	want("rps, another client", statuses("127.0.0.2", "/api", 1), 1)
	want("another Ingress's route, limited client", statuses("127.0.0.1", "/other", 10), 10)
	// Refused requests do not count: after two seconds the client is let
	// through again.
	time.Sleep(2100 * time.Millisecond)
	want("rps, after a pause", statuses("127.0.0.1", "/api", 1), 1)
	// Under the limit (2 a second), for three seconds: never refused.
	var under []int
	for i := 0; i < 6; i++ {
		under = append(under, get("127.0.0.3", "/api"))
		time.Sleep(500 * time.Millisecond)
	}
	want("rps, under the limit", under, 6)

	// limit-rpm 2.
	want("rpm burst", statuses("127.0.0.1", "/login", 4), 2)
	want("rpm, another client", statuses("127.0.0.4", "/login", 2), 2)

	// limit-connections 1: two requests in progress from one address.
	var wg sync.WaitGroup
	results := make([]int, 2)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(time.Duration(i) * 200 * time.Millisecond)
			results[i] = get("127.0.0.5", "/download")
		}()
	}
	other := get("127.0.0.6", "/download") // another address, at the same time
	wg.Wait()
	if results[0] != 200 || results[1] != 503 || other != 200 {
		t.Errorf("connections: first %d, second at once %d, other address %d; want 200, 503, 200", results[0], results[1], other)
	}
	// One after the other (a new connection once the answer is read;
	// HAProxy ends the previous request's tracking a moment after its
	// answer leaves, so the next connection waits 50 ms).
	var sequential []int
	for i := 0; i < 3; i++ {
		time.Sleep(50 * time.Millisecond)
		sequential = append(sequential, get("127.0.0.5", "/download"))
	}
	want("connections, one at a time", sequential, 3)
}
