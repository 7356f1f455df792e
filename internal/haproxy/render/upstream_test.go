package render

import (
	"net"
	"testing"

	"pier.dev/pier/internal/model"
)

// triesFixture: a pool with one try (no retry), one with five, one with
// the defaults' retries.
func triesFixture(web1, web2 model.Pool) *model.LoadBalancer {
	web1.Tries = 1
	web2.Tries = 5
	web3 := pool("webservice-3", member("10.47.255.237", 80))
	return newLB([]model.Listener{httpListener("", routes(
		toPool(web1, hostIs("a.example"), pathPrefix("/")),
		toPool(web2, hostIs("b.example"), pathPrefix("/")),
		toPool(web3, hostIs("c.example"), pathPrefix("/")),
	))}, web1, web2, web3)
}

func TestTriesRevalidated(t *testing.T) {
	for _, tries := range []int{-1, maxTries + 1} {
		web := pool("web", member("10.0.0.1", 80))
		web.Tries = tries
		lb := newLB([]model.Listener{httpListener(web.ID, nil)}, web)
		if _, err := Render(lb, lbAt(fixtureDir), nil, fixtureOptions()); err == nil {
			t.Errorf("tries %d rendered", tries)
		}
	}
}

// TestIntegrationTries: with a member that refuses connections beside
// one that serves, and no health check to take it out, one try (no
// retry) answers 503 whenever round robin picks the refusing member;
// two tries retry on the other member and every request gets 200.
func TestIntegrationTries(t *testing.T) {
	bin := haproxyBin(t)
	if testing.Short() {
		t.Skip("starts HAProxy")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := l.Addr().String()
	l.Close() // nothing listens there any more: connections are refused
	good := startBackend(t, "good")
	for _, tc := range []struct {
		tries  int
		failed bool
	}{{1, true}, {2, false}} {
		p := pool("flaky", memberAt(refused), memberAt(good))
		p.HealthCheck, p.Tries = false, tc.tries
		lb := newLB([]model.Listener{httpListener("", routes(toPool(p, hostIs("app.test"), pathPrefix("/"))))}, p)
		addr := serveLB(t, bin, lb)
		var codes []int
		failed := false
		for i := 0; i < 6; i++ {
			code := rawRequest(t, addr, "127.0.0.1", "GET / HTTP/1.1\r\nHost: app.test\r\n\r\n").StatusCode
			codes = append(codes, code)
			failed = failed || code != 200
		}
		if failed != tc.failed {
			t.Errorf("tries %d: statuses %v, want failures %v", tc.tries, codes, tc.failed)
		}
	}
}
