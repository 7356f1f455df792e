package render

import (
	"strconv"
	"strings"
	"testing"

	"pier.dev/pier/internal/model"
)

// TestIntegrationMatches sends translate's TestGatewayPrecedence table
// (and the fall-through cases of matchFixture) through HAProxy and checks
// which backend answers: header Exact, query Exact, method, their
// combinations, a group falling through to a shorter prefix, to the
// wildcard class, to any host, and an empty header that is not absent.
func TestIntegrationMatches(t *testing.T) {
	bin := haproxyBin(t)
	if testing.Short() {
		t.Skip("starts HAProxy")
	}
	addr := serveLB(t, bin, matchFixture(matchPools(func(name string) string { return startBackend(t, name) })))
	assertHalfFails(t, addr)
	for _, tc := range []struct {
		name, method, host, path, headers, want string
	}{
		{"prefix", "GET", "foo.com", "/api/x", "", "api"},
		{"exact before method", "POST", "foo.com", "/api", "", "api-exact"},
		{"method before headers", "POST", "foo.com", "/api/x", "x-a: 1\r\nx-b: 2\r\n", "api-post"},
		{"more headers first", "GET", "foo.com", "/api/x", "X-A: 1\r\nx-b: 2\r\n", "api-h2"},
		{"one header", "GET", "foo.com", "/api/x", "x-a: 1\r\n", "api-h1"},
		{"header value differs", "GET", "foo.com", "/api/x", "x-a: 10\r\n", "api"},
		{"empty header is not absent, and not 1", "GET", "foo.com", "/api/x", "x-a:\r\nx-b: 2\r\n", "api"},
		{"headers before query", "GET", "foo.com", "/api/x?q=1", "x-a: 1\r\n", "api-h1"},
		{"query", "GET", "foo.com", "/api/x?a=b&q=1", "", "api-q"},
		{"query value differs", "GET", "foo.com", "/api/x?q=12", "", "api"},
		{"query name differs", "GET", "foo.com", "/api/x?qq=1", "", "api"},
		{"method other", "PUT", "foo.com", "/api/x", "", "api"},
		{"longer prefix", "GET", "foo.com", "/api/v2/x", "x-a: 1\r\n", "newer"},
		{"element-wise prefix", "GET", "foo.com", "/apix", "x-a: 1\r\n", "prefix-root"},
		{"rule order", "GET", "foo.com", "/dup", "", "dup-first"},
		{"header value with a space", "GET", "foo.com", "/only/x", "x-only: yes please\r\n", "only-h"},
		{"group falls through to a shorter prefix", "GET", "foo.com", "/only/x", "x-only: yes\r\n", "prefix-root"},
		{"wildcard header", "GET", "b.foo.com", "/w", "x-w: 1\r\n", "wild-h"},
		{"wildcard group falls through to its catch-all", "GET", "b.foo.com", "/w", "", "wild"},
		{"host group", "GET", "a.foo.com", "/cross/1", "x-c: 1\r\n", "cross-h"},
		{"host group falls through to the wildcard class", "GET", "a.foo.com", "/cross/1", "x-c: 2\r\n", "wild"},
		{"wildcard before any host", "GET", "a.foo.com", "/api", "", "wild"},
		{"wildcard spans labels", "GET", "a.c.foo.com", "/api", "", "wild"},
		{"wildcard spans labels, with a header", "GET", "x.y.foo.com", "/w/1", "x-w: 1\r\n", "wild-h"},
		{"the longer wildcard first", "GET", "a.b.foo.com", "/", "", "deep"},
		{"the longer wildcard spans labels", "GET", "x.a.b.foo.com", "/w", "x-w: 1\r\n", "deep"},
		{"a wildcard does not match its own suffix", "GET", "b.foo.com", "/", "", "wild"},
		{"nor a host that only ends with its text", "GET", "xfoo.com", "/api", "", "anyhost"},
		{"the wildcard's host itself", "GET", "foo.com", "/x", "", "prefix-root"},
		{"exact path header", "GET", "foo.com", "/api", "x-e: 1\r\n", "exact-h"},
		{"exact path group falls to its plain policy", "GET", "foo.com", "/api", "x-e: 2\r\n", "api-exact"},
		{"exact path method", "DELETE", "foo.com", "/only/e", "x-only: yes please\r\n", "exact-delete"},
		{"exact path group inherits its prefix's group", "GET", "foo.com", "/only/e", "x-only: yes please\r\n", "only-h"},
		{"inherited group, then the catch-all", "GET", "foo.com", "/only/e", "", "prefix-root"},
		{"query names are case-sensitive", "GET", "foo.com", "/api/x?Q=1", "", "api"},
		{"the first of two query values", "GET", "foo.com", "/api/x?q=1&q=2", "", "api-q"},
		{"the last of two header lines", "GET", "foo.com", "/api/x", "x-a: 2\r\nx-a: 1\r\n", "api-h1"},
		{"header names are case-insensitive", "GET", "foo.com", "/only/x", "X-ONLY: yes please\r\n", "only-h"},
		{"header values are case-sensitive", "GET", "foo.com", "/only/x", "x-only: Yes please\r\n", "prefix-root"},
		{"any host", "GET", "bar.com", "/api", "", "anyhost"},
		{"any host query", "GET", "bar.com", "/api?q=2", "", "q-or-h"},
		{"any host method", "GET", "bar.com", "/get", "", "any-get"},
		{"any host method, HEAD", "HEAD", "bar.com", "/get", "", "404"},
		{"nothing", "GET", "bar.com", "/", "", "404"},
		{"fixed response", "GET", "foo.com", "/broken/x", "", "500"},
	} {
		req := tc.method + " " + tc.path + " HTTP/1.1\r\nHost: " + tc.host + "\r\n" + tc.headers + "\r\n"
		resp := rawRequest(t, addr, "127.0.0.1", req)
		got := resp.Header.Get("X-Backend")
		if resp.StatusCode == 404 || resp.StatusCode == 500 {
			got = strconv.Itoa(resp.StatusCode)
		}
		if got != tc.want {
			t.Errorf("%s: %s: %d %q, want %s", tc.name, strings.ReplaceAll(req, "\r\n", " | "), resp.StatusCode, got, tc.want)
		}
	}
}

// A pool with a fail share answers 500 for that share (one of two
// backendRefs unresolved: half), its backend for the rest.
func assertHalfFails(t *testing.T, addr string) {
	t.Helper()
	counts := map[string]int{}
	for range 200 {
		resp := rawRequest(t, addr, "127.0.0.1", "GET /half HTTP/1.1\r\nHost: foo.com\r\n\r\n")
		counts[strconv.Itoa(resp.StatusCode)+" "+resp.Header.Get("X-Backend")]++
	}
	if len(counts) != 2 || counts["500 "] < 60 || counts["200 half"] < 60 {
		t.Errorf("200 requests to a half-failing pool: %v, want about 100 each of 500 and 200 half", counts)
	}
}

// TestIntegrationMatchesACL: the ACL rules a listener keeps when no
// order of shapes decides as its policies do route the same way.
func TestIntegrationMatchesACL(t *testing.T) {
	bin := haproxyBin(t)
	if testing.Short() {
		t.Skip("starts HAProxy")
	}
	lb := unorderableFixture()
	for i := range lb.Pools {
		lb.Pools[i].Members = []model.Member{memberAt(startBackend(t, lb.Pools[i].Service))}
	}
	addr := serveLB(t, bin, lb)
	for _, tc := range []struct {
		method, path, headers, want string
	}{
		{"GET", "/a", "x-a: 1\r\nx-b: 1\r\n", "api"},
		{"GET", "/a/x", "x-a: 1\r\n", "api-h1"},
		{"GET", "/b", "x-a: 1\r\nx-b: 1\r\n", "api"},
		{"GET", "/b", "x-b: 1\r\n", "api-h1"},
		{"POST", "/b?id=a:b/c", "", "api-post"},
		{"POST", "/b?id=a", "", "404"},
		{"GET", "/b?id=a:b/c", "", "404"},
		{"GET", "/a", "x-a:\r\n", "404"},
		{"PUT", "/b", "", "500"},
		{"GET", "/b", "", "404"},
		{"GET", "/b", "Host: a.b.foo.com\r\n", "wild"},
		{"GET", "/b", "Host: b.foo.com\r\n", "wild"},
		{"GET", "/b", "Host: xfoo.com\r\n", "404"},
	} {
		host := "Host: foo.com\r\n"
		if strings.HasPrefix(tc.headers, "Host:") {
			host = ""
		}
		req := tc.method + " " + tc.path + " HTTP/1.1\r\n" + host + tc.headers + "\r\n"
		resp := rawRequest(t, addr, "127.0.0.1", req)
		got := resp.Header.Get("X-Backend")
		if resp.StatusCode == 404 || resp.StatusCode == 500 {
			got = strconv.Itoa(resp.StatusCode)
		}
		if got != tc.want {
			t.Errorf("%s: %d %q, want %s", strings.ReplaceAll(req, "\r\n", " | "), resp.StatusCode, got, tc.want)
		}
	}
}
