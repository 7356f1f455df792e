package render

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"pier.dev/pier/internal/model"
)

// ruleSettingsFixture: the pools HTTPRoute rules with timeouts, retry
// and sessionPersistence get (translate's ruleSettings), beside one
// without.
func ruleSettingsFixture(web1, web2 model.Pool) *model.LoadBalancer {
	web1.ServerTimeout, web1.Tries = 3*time.Second, 3
	web1.RetryStatuses, web1.RetryTimeout = []int{503, 500, 503}, true
	web1.Affinity = &model.CookieAffinity{Name: "app-session"}
	web2.ServerTimeout, web2.Tries = 24*time.Hour, 1
	web2.Affinity = &model.CookieAffinity{Name: "pier_0123456789ab", MaxLifeSeconds: 3600, MaxIdleSeconds: 600}
	web3 := pool("webservice-3", member("10.47.255.237", 80))
	web3.RetryStatuses = []int{502}
	return newLB([]model.Listener{httpListener("", routes(
		toPool(web1, hostIs("a.example"), pathPrefix("/")),
		toPool(web2, hostIs("b.example"), pathPrefix("/")),
		toPool(web3, hostIs("c.example"), pathPrefix("/")),
	))}, web1, web2, web3)
}

func TestRetryOnRevalidated(t *testing.T) {
	for name, p := range map[string]func(*model.Pool){
		"status 505":     func(p *model.Pool) { p.RetryStatuses = []int{505} },
		"status 200":     func(p *model.Pool) { p.RetryStatuses = []int{200} },
		"status -1":      func(p *model.Pool) { p.RetryStatuses = []int{-1} },
		"too many":       func(p *model.Pool) { p.RetryStatuses = make([]int, 11) },
		"tcp with retry": func(p *model.Pool) { p.TCP, p.RetryTimeout = true, true },
		"max age and life": func(p *model.Pool) {
			p.Affinity = &model.CookieAffinity{Name: "s", MaxAgeSeconds: 60, MaxLifeSeconds: 60}
		},
		"negative idle": func(p *model.Pool) { p.Affinity = &model.CookieAffinity{Name: "s", MaxIdleSeconds: -1} },
		"idle past ten years": func(p *model.Pool) {
			p.Affinity = &model.CookieAffinity{Name: "s", MaxIdleSeconds: maxCookieAge + 1}
		},
	} {
		web := pool("web", member("10.0.0.1", 80))
		p(&web)
		lb := newLB([]model.Listener{httpListener(web.ID, nil)}, web)
		if _, err := Render(lb, lbAt(fixtureDir), nil, fixtureOptions()); err == nil {
			t.Errorf("%s rendered", name)
		}
	}
}

// attemptBackend answers each request after ?delay= milliseconds with
// ?status=, except that the first ?fail= attempts of a request (told
// apart by ?id=) are answered 503, and those of ?stall= wait 10s; it
// counts the attempts per id.
type attemptBackend struct {
	mu       sync.Mutex
	attempts map[string]int
}

func startAttemptBackend(t *testing.T) (string, *attemptBackend) {
	b := &attemptBackend{attempts: map[string]int{}}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		b.mu.Lock()
		b.attempts[q.Get("id")]++
		n := b.attempts[q.Get("id")]
		b.mu.Unlock()
		delay, _ := strconv.Atoi(q.Get("delay"))
		if stall, _ := strconv.Atoi(q.Get("stall")); n <= stall {
			delay = 10000
		}
		select {
		case <-time.After(time.Duration(delay) * time.Millisecond):
		case <-r.Context().Done():
			return
		}
		if fail, _ := strconv.Atoi(q.Get("fail")); n <= fail {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		io.WriteString(w, "attempt "+strconv.Itoa(n))
	})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return l.Addr().String(), b
}

func (b *attemptBackend) count(id string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.attempts[id]
}

// TestIntegrationRuleSettings: an HTTPRoute rule's timeouts and retry on
// a real HAProxy. A 500ms timeout answers 504 to a backend that takes 2s,
// within 1.5s, and 200 to one that takes 100ms; retry.codes [503] with 3
// tries gets 200 from a backend failing twice (3 attempts counted), where
// the defaults' retry-on answers its 503 after 1; backendRequest with
// retry tries again after a stalled attempt; a deadline across attempts
// answers 504 when three 300ms attempts pass its 500ms, 200 when two
// 100ms ones fit.
func TestIntegrationRuleSettings(t *testing.T) {
	bin := haproxyBin(t)
	if testing.Short() {
		t.Skip("starts HAProxy")
	}
	addr, backend := startAttemptBackend(t)
	timed := pool("timed", memberAt(addr))
	timed.HealthCheck, timed.ServerTimeout = false, 500*time.Millisecond
	retried := pool("retried", memberAt(addr))
	retried.HealthCheck, retried.Tries, retried.RetryStatuses = false, 3, []int{503}
	plain := pool("plain", memberAt(addr))
	plain.HealthCheck = false
	perTry := pool("per-try", memberAt(addr))
	perTry.HealthCheck, perTry.ServerTimeout, perTry.Tries, perTry.RetryTimeout = false, 300*time.Millisecond, 2, true
	deadline := pool("deadline", memberAt(addr))
	deadline.HealthCheck, deadline.ServerTimeout, deadline.Tries, deadline.RetryStatuses = false, 500*time.Millisecond, 3, []int{503}
	deadline.Deadline = 500 * time.Millisecond
	lb := newLB([]model.Listener{httpListener("", routes(
		toPool(timed, hostIs("timeout.test"), pathPrefix("/")),
		toPool(retried, hostIs("retry.test"), pathPrefix("/")),
		toPool(plain, hostIs("plain.test"), pathPrefix("/")),
		toPool(perTry, hostIs("pertry.test"), pathPrefix("/")),
		toPool(deadline, hostIs("deadline.test"), pathPrefix("/")),
	))}, timed, retried, plain, perTry, deadline)
	front := serveLB(t, bin, lb)
	get := func(host, query string) (int, time.Duration) {
		start := time.Now()
		code := rawRequest(t, front, "127.0.0.1", fmt.Sprintf("GET /?%s HTTP/1.1\r\nHost: %s\r\n\r\n", query, host)).StatusCode
		return code, time.Since(start)
	}
	if code, took := get("timeout.test", "id=slow&delay=2000"); code != http.StatusGatewayTimeout || took > 1500*time.Millisecond {
		t.Errorf("2s backend under a 500ms timeout: %d after %v, want 504 within 1.5s", code, took)
	}
	if code, took := get("timeout.test", "id=fast&delay=100"); code != http.StatusOK {
		t.Errorf("100ms backend under a 500ms timeout: %d after %v", code, took)
	}
	if code, _ := get("retry.test", "id=r1&fail=2"); code != http.StatusOK || backend.count("r1") != 3 {
		t.Errorf("retry on 503: %d after %d attempts, want 200 after 3", code, backend.count("r1"))
	}
	if code, _ := get("retry.test", "id=r2&fail=5"); code != http.StatusServiceUnavailable || backend.count("r2") != 3 {
		t.Errorf("3 tries failing: %d after %d attempts, want 503 after 3", code, backend.count("r2"))
	}
	if code, _ := get("plain.test", "id=p1&fail=2"); code != http.StatusServiceUnavailable || backend.count("p1") != 1 {
		t.Errorf("defaults' retry-on: %d after %d attempts, want 503 after 1", code, backend.count("p1"))
	}
	if code, took := get("pertry.test", "id=s1&stall=1"); code != http.StatusOK || backend.count("s1") != 2 || took > 1500*time.Millisecond {
		t.Errorf("stalled first attempt: %d after %d attempts in %v, want 200 after 2", code, backend.count("s1"), took)
	}
	if code, took := get("pertry.test", "id=s2&stall=5"); code != http.StatusGatewayTimeout || backend.count("s2") != 2 || took > 1500*time.Millisecond {
		t.Errorf("stalled attempts: %d after %d attempts in %v, want 504 after 2 within 1.5s", code, backend.count("s2"), took)
	}
	if code, took := get("deadline.test", "id=d1&fail=2&delay=300"); code != http.StatusGatewayTimeout || backend.count("d1") != 3 {
		t.Errorf("three 300ms attempts under a 500ms deadline: %d after %d attempts in %v, want 504 after 3", code, backend.count("d1"), took)
	}
	if code, took := get("deadline.test", "id=d2&fail=1&delay=100"); code != http.StatusOK || backend.count("d2") != 2 {
		t.Errorf("two 100ms attempts under a 500ms deadline: %d after %d attempts in %v, want 200 after 2", code, backend.count("d2"), took)
	}
}

// TestIntegrationCookieMaxIdle: sessionPersistence idleTimeout is
// HAProxy's maxidle. Two members balanced by source address, so each
// client address has its member: a fresh cookie from a client whose
// address hashes to the other member keeps it on the cookie's; the same
// cookie after more than the idle timeout is ignored, and the address
// decides again.
func TestIntegrationCookieMaxIdle(t *testing.T) {
	bin := haproxyBin(t)
	if testing.Short() {
		t.Skip("starts HAProxy")
	}
	p := pool("sticky", memberAt(startBackend(t, "one")), memberAt(startBackend(t, "two")))
	p.HealthCheck, p.Algorithm = false, model.AlgorithmSourceIP
	p.Affinity = &model.CookieAffinity{Name: "gw-session", MaxIdleSeconds: 1}
	lb := newLB([]model.Listener{httpListener("", routes(toPool(p, hostIs("app.test"), pathPrefix("/"))))}, p)
	addr := serveLB(t, bin, lb)
	const bare = "GET / HTTP/1.1\r\nHost: app.test\r\n\r\n"
	first := rawRequest(t, addr, "127.0.0.1", bare)
	member := first.Header.Get("X-Backend")
	var cookie string
	for _, c := range first.Cookies() {
		if c.Name == "gw-session" {
			cookie = c.Name + "=" + c.Value
		}
	}
	if cookie == "" {
		t.Fatalf("no cookie: %v", first.Header)
	}
	other := ""
	for i := 2; i < 40 && other == ""; i++ {
		from := fmt.Sprintf("127.0.0.%d", i)
		if rawRequest(t, addr, from, bare).Header.Get("X-Backend") != member {
			other = from
		}
	}
	if other == "" {
		t.Fatal("every client address hashes to " + member)
	}
	with := "GET / HTTP/1.1\r\nHost: app.test\r\nCookie: " + cookie + "\r\n\r\n"
	if got := rawRequest(t, addr, other, with).Header.Get("X-Backend"); got != member {
		t.Fatalf("fresh cookie from %s: %s, want %s", other, got, member)
	}
	// HAProxy keeps cookie dates in units of 4s: wait past one.
	time.Sleep(5 * time.Second)
	if got := rawRequest(t, addr, other, with).Header.Get("X-Backend"); got == member {
		t.Errorf("cookie idle past maxidle still kept %s on %s", other, got)
	}
}
