package render

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"pier.dev/pier/internal/model"
)

// TestRoutesConstantRules: the frontend of 2,000 routes has as many lines
// as the frontend of 3; the routes are in the maps. The ACL rendering
// this replaced grew by three lines or more per route.
func TestRoutesConstantRules(t *testing.T) {
	frontendLines := func(n int) (int, int) {
		p := pool("svc", member("10.0.0.1", 80))
		var ps []model.L7Policy
		for i := range n {
			ps = append(ps, toPool(p, hostIs("h"+strconv.Itoa(i)+".example.com"), pathPrefix("/api")))
		}
		lb := newLB([]model.Listener{{Name: "http", Protocol: model.ProtocolHTTP, Port: 80, Policies: routes(ps...)}}, p)
		r := mustRender(t, lb, nil)
		fe := bytes.SplitN(r.Fragment, []byte("\nbackend "), 2)[0]
		mapLines := 0
		for _, m := range r.Maps {
			mapLines += bytes.Count(m.Data, []byte("\n"))
		}
		return bytes.Count(fe, []byte("\n")), mapLines
	}
	small, smallMap := frontendLines(3)
	big, bigMap := frontendLines(2000)
	if small != big || smallMap != 3 || bigMap != 2000 {
		t.Fatalf("frontend lines: %d for 3 routes, %d for 2000; map lines %d, %d", small, big, smallMap, bigMap)
	}
}

// TestRoutesFallback: policies in an order the lookups do not follow (a
// Prefix before an Exact of the same host), or with two host rules, keep
// the first-match-wins ACL rules and no map.
func TestRoutesFallback(t *testing.T) {
	p := pool("svc", member("10.0.0.1", 80))
	for name, ps := range map[string][]model.L7Policy{
		"prefix before exact": routes(toPool(p, hostIs("a.test"), pathPrefix("/foo")), toPool(p, hostIs("a.test"), pathIs("/foo"))),
		"no host before host": routes(toPool(p, pathPrefix("/")), toPool(p, hostIs("a.test"), pathPrefix("/"))),
		"short before long":   routes(toPool(p, pathPrefix("/a")), toPool(p, pathPrefix("/a/b"))),
		"two hosts":           routes(toPool(p, hostIs("a.test"), hostIs("b.test"), pathPrefix("/"))),
	} {
		lb := newLB([]model.Listener{{Name: "http", Protocol: model.ProtocolHTTP, Port: 80, Policies: ps}}, p)
		r := mustRender(t, lb, nil)
		if len(r.Maps) != 0 || !bytes.Contains(r.Fragment, []byte("set-var(txn.pier_match)")) {
			t.Errorf("%s: rendered with maps:\n%s", name, r.Fragment)
		}
	}
}

// TestIntegrationRoutes runs the maps in a real HAProxy: every precedence
// rule of Ingress v1 where two routes match one request.
func TestIntegrationRoutes(t *testing.T) {
	bin := haproxyBin(t)
	if testing.Short() {
		t.Skip("starts HAProxy")
	}
	names := []string{"h-exact", "h-long", "h-short", "h-root", "w-exact", "w-prefix", "w-root", "a-exact", "a-prefix", "a-root", "default"}
	p := map[string]model.Pool{}
	var pools []model.Pool
	for _, n := range names {
		p[n] = pool(n, memberAt(startBackend(t, n)))
		p[n].Members[0].Weight = 1
		pools = append(pools, p[n])
	}
	// In translate's order: host, wildcard, none; Exact, then longer Prefix.
	policies := routes(
		toPool(p["h-exact"], hostIs("a.test"), pathIs("/foo")),
		toPool(p["h-exact"], hostIs("a.test"), pathIs("/x/")),
		reject(hostIs("a.test"), pathIs("/deny")),
		toPool(p["h-long"], hostIs("a.test"), pathPrefix("/foo/bar")),
		toPool(p["h-short"], hostIs("a.test"), pathPrefix("/foo")),
		toPool(p["h-root"], hostIs("a.test"), pathPrefix("/")),
		toPool(p["w-exact"], hostWild("*.a.test"), pathIs("/e")),
		toPool(p["w-prefix"], hostWild("*.a.test"), pathPrefix("/p")),
		toPool(p["w-root"], hostWild("*.a.test"), pathPrefix("/")),
		toPool(p["a-exact"], pathIs("/only")),
		toPool(p["a-exact"], pathIs("/e")),
		toPool(p["a-prefix"], pathPrefix("/p/q")),
		toPool(p["a-prefix"], pathPrefix("/p")),
		toPool(p["a-root"], hostIs("b.test"), pathPrefix("/z")),
	)
	// the last one is out of order: move it where translate puts it
	policies = append(policies[:5], append([]model.L7Policy{policies[13]}, policies[5:13]...)...)
	for i := range policies {
		policies[i].Position = i + 1
	}
	port := freePort()
	lb := newLB([]model.Listener{{Name: "http", Protocol: model.ProtocolHTTP, Port: port, Policies: policies, DefaultPoolID: p["default"].ID}}, pools...)
	lb.VIP, lb.FIP = "127.0.0.1", ""
	dir := t.TempDir()
	opts := Options{Dir: dir, MinSlots: 1}
	cfg, err := Config(lb, opts)
	if err != nil {
		t.Fatal(err)
	}
	maps, err := Maps(lb, opts)
	if err != nil || len(maps) == 0 || !strings.Contains(string(cfg), "map_beg(") {
		t.Fatalf("not rendered with maps (%v):\n%s", err, cfg)
	}
	writeMaps(t, maps, "")
	writeFile(t, dir+"/haproxy.conf", cfg)
	startHAProxy(t, bin, dir+"/haproxy.conf", port)
	c := &client{t: t, http: "127.0.0.1:" + strconv.Itoa(port)}
	for _, tc := range []struct{ host, path, want string }{
		{"a.test", "/foo", "h-exact"},    // Exact beats the Prefix of the same path
		{"a.test", "/foo/", "h-short"},   // Exact /foo is not /foo/
		{"a.test", "/foo/bar", "h-long"}, // longest Prefix
		{"a.test", "/foo/bar/baz", "h-long"},
		{"a.test", "/foo/barbaz", "h-short"}, // element-wise: not /foo/bar
		{"a.test", "/foobar", "h-root"},      // element-wise: not /foo
		{"a.test", "/x/", "h-exact"},         // Exact with a trailing slash
		{"a.test", "/x", "h-root"},
		{"a.test", "/deny", "403"},
		{"A.TEST:80", "/foo", "h-exact"},
		{"a.test", "/e", "h-root"},       // a host's routes before rules with no host
		{"b.a.test", "/e", "w-exact"},    // wildcard: one label
		{"b.a.test", "/p/q", "w-prefix"}, // wildcard before no host, even if shorter
		{"b.a.test", "/zz", "w-root"},
		{"c.b.a.test", "/p/q", "a-prefix"}, // two labels: not the wildcard
		{"a.test.", "/only", "h-root"},     // one trailing dot: the same host
		{"A.TEST.:80", "/foo", "h-exact"},
		{"b.test", "/z", "a-root"},
		{"b.test", "/z/", "a-root"},
		{"b.test", "/e", "a-exact"},
		{"b.test", "/pq", "default"},
		{"b.test", "/p/qr", "a-prefix"},
		{"other.test", "/", "default"},
		{"", "/only", "a-exact"},
	} {
		c.expect("http", tc.host, tc.path, tc.want, "http")
	}
	// Host "a.test/foo" with path "/bar" must not become the key of host
	// a.test and path /foo/bar. HAProxy 2.6 answers 400 to it over
	// HTTP/1.1 already; pier's guard would send it to the default.
	if code, got := rawBackend(t, port, "a.test/foo", "/bar"); !(code == 400 || got == "default") {
		t.Errorf(`Host "a.test/foo", path /bar: %d from %q, want 400 or the default`, code, got)
	}
	// Requests a backend could read otherwise than the routing did are
	// refused; the look-alikes that are not
	// ambiguous still route.
	for _, tc := range []struct {
		request string
		code    int
		backend string
	}{
		{"GET /foo/../x/ HTTP/1.1\r\nHost: a.test\r\n", 400, ""},
		{"GET /x/./ HTTP/1.1\r\nHost: a.test\r\n", 400, ""},
		{"GET /x/.. HTTP/1.1\r\nHost: a.test\r\n", 400, ""},
		{"GET //foo HTTP/1.1\r\nHost: a.test\r\n", 400, ""},
		{"GET /%66oo HTTP/1.1\r\nHost: a.test\r\n", 400, ""},
		{"GET /foo%2Fbar HTTP/1.1\r\nHost: a.test\r\n", 400, ""},
		{"GET /foo%20bar HTTP/1.1\r\nHost: a.test\r\n", 200, "h-root"},
		{"GET /x/.well-known HTTP/1.1\r\nHost: a.test\r\n", 200, "h-root"},
		{"GET http://a.test/foo HTTP/1.1\r\n", 400, ""},
		{"GET /only HTTP/1.1\r\n", 400, ""},
		{"GET http://a.test/foo HTTP/1.0\r\n", 400, ""},
		{"GET /only HTTP/1.0\r\n", 200, "a-exact"},
		{"GET http://a.test/foo HTTP/1.1\r\nHost: a.test\r\n", 200, "h-exact"},
	} {
		code, got := rawStatus(t, port, tc.request+"Connection: close\r\n\r\n")
		if code != tc.code || got != tc.backend {
			t.Errorf("%q: %d from %q, want %d from %q", tc.request, code, got, tc.code, tc.backend)
		}
	}
}

// rawBackend sends a GET with a Host header Go's client would refuse and
// returns the status and X-Backend of the answer.
func rawBackend(t *testing.T, port int, host, path string) (int, string) {
	t.Helper()
	return rawStatus(t, port, fmt.Sprintf("GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", path, host))
}

// rawStatus sends request as written and returns the status and
// X-Backend of the answer.
func rawStatus(t *testing.T, port int, request string) (int, string) {
	t.Helper()
	resp := rawRequest(t, "127.0.0.1:"+strconv.Itoa(port), "127.0.0.1", request)
	return resp.StatusCode, resp.Header.Get("X-Backend")
}
