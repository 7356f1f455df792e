package tenants

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"pier.dev/pier/test/harness"
)

// In a group shared with the victim, the
// attacker's host-less catch-all must not take a request meant for the
// victim's host. Before the fix, "Host: victim.example." (one trailing
// dot) and an absolute-form request without Host reached the attacker,
// and "//x", "/x/../y" and "/%61dmin" were matched on the raw path.
func TestHostAndPathLookAlikes(t *testing.T) {
	manifests := harness.ShortTempDir(t)
	victimPort := harness.StartEcho(t, victimEcho, "victim-pod")
	attackerPort := harness.StartEcho(t, attackerEcho, "attacker-pod")
	write(t, manifests, "00-class.json", ingressClass())
	write(t, manifests, "10-victim.json", append(service(victimNS, victimPort),
		ingress(victimNS, "site", victimHost, 0, map[string]string{annGroup: "shop"}))...)
	p := harness.StartPier(t, harness.Options{Manifests: manifests, State: harness.ShortTempDir(t),
		ExtraArgs: []string{"--shared-load-balancer=shop=" + victimNS + "," + attackerNS}})
	addrs := p.Addresses(victimNS, "site")
	write(t, manifests, "20-attack.json", append(service(attackerNS, attackerPort),
		ingress(attackerNS, "catchall", "", 5, map[string]string{annGroup: "shop"}))...)
	if got := p.Addresses(attackerNS, "catchall"); !sameAddresses(got, addrs) {
		t.Fatalf("the attacker is not in the shared group (%v vs %v): the test proves nothing", got, addrs)
	}
	addr := net.JoinHostPort(addrs[0], strconv.Itoa(p.HTTPPort))
	// The attacker's catch-all serves what is really its own.
	if code, svc := rawGet(t, addr, "GET / HTTP/1.1\r\nHost: other.example\r\n"); code != 200 || svc != attackerEcho {
		t.Fatalf("other.example: %d from %q, want the attacker's catch-all: the test proves nothing", code, svc)
	}
	for _, tc := range []struct {
		request string
		code    int
		service string
	}{
		{"GET / HTTP/1.1\r\nHost: " + victimHost + "\r\n", 200, victimEcho},
		{"GET / HTTP/1.1\r\nHost: " + victimHost + ".\r\n", 200, victimEcho},
		{"GET / HTTP/1.1\r\nHost: " + victimHost + ".:" + strconv.Itoa(p.HTTPPort) + "\r\n", 200, victimEcho},
		{"GET http://" + victimHost + "/ HTTP/1.1\r\n", 400, ""},
		{"GET / HTTP/1.1\r\n", 400, ""},
		{"GET //admin HTTP/1.1\r\nHost: " + victimHost + "\r\n", 400, ""},
		{"GET /x/../admin HTTP/1.1\r\nHost: " + victimHost + "\r\n", 400, ""},
		{"GET /%61dmin HTTP/1.1\r\nHost: " + victimHost + "\r\n", 400, ""},
	} {
		code, svc := rawGet(t, addr, tc.request)
		if code != tc.code || svc != tc.service {
			t.Errorf("%q: %d from %q, want %d from %q", tc.request, code, svc, tc.code, tc.service)
		}
	}
}

// rawGet sends request (without its final CRLF) as written, since Go's
// client would not send a Host with a trailing dot or no Host at all, and
// returns the status and, for a 200, the echo's service. A 400 must be
// HAProxy's own: the echo (Go's server) answers 400 to a request without
// Host too, which would hide that the request reached a backend.
func rawGet(t *testing.T, addr, request string) (int, string) {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(conn, request+"Connection: close\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("%q: %v", request, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == 400 && !strings.Contains(string(body), "<h1>400 Bad request</h1>") {
		return resp.StatusCode, "a backend"
	}
	if resp.StatusCode != 200 {
		return resp.StatusCode, ""
	}
	var r harness.EchoReply
	if err := json.Unmarshal(body, &r); err != nil {
		t.Fatalf("%q: decode %q: %v", request, body, err)
	}
	return resp.StatusCode, r.Service
}

// A source range on /admin alone guards what a backend reads as /admin.
// Tomcat, Jetty and Spring drop a segment's ";parameters" and IIS reads
// a backslash as "/": "/admin;x", "/x/..;/admin", "/x\..\admin" and the
// double-encoded "/%2561dmin" match no /admin rule, so before they were
// refused they reached the victim's backend through its open catch-all
// "/", from a client the range keeps out. They get 400 on a listener
// with rules scoped to a path; a host whose only rule is "/" has no path
// to guard, and an old Java application's ";jsessionid=" still reaches
// it.
func TestPathLookAlikesOfAGuardedPath(t *testing.T) {
	manifests := harness.ShortTempDir(t)
	victimPort := harness.StartEcho(t, victimEcho, "victim-pod")
	write(t, manifests, "00-class.json", ingressClass())
	site := ingress(victimNS, "site", victimHost, 0, map[string]string{annGroup: "shop"})
	admin := ingress(victimNS, "admin", victimHost, 1, map[string]string{annGroup: "shop",
		"nginx.ingress.kubernetes.io/whitelist-source-range": "10.0.0.0/8"})
	admin.Spec.Rules[0].HTTP.Paths[0].Path = "/admin"
	legacy := ingress(victimNS, "legacy", "legacy.example", 2, nil)
	write(t, manifests, "10-victim.json", append(service(victimNS, victimPort), site, admin, legacy)...)
	p := harness.StartPier(t, harness.Options{Manifests: manifests, State: harness.ShortTempDir(t)})
	addrs := p.Addresses(victimNS, "site")
	if got := p.Addresses(victimNS, "admin"); !sameAddresses(got, addrs) {
		t.Fatalf("/admin is served on %v, / on %v: the test proves nothing", got, addrs)
	}
	addr := net.JoinHostPort(addrs[0], strconv.Itoa(p.HTTPPort))
	get := func(path string) string { return "GET " + path + " HTTP/1.1\r\nHost: " + victimHost + "\r\n" }
	if code, svc := rawGet(t, addr, get("/admin/users")); code != 403 {
		t.Fatalf("/admin/users from 127.0.0.1: %d from %q, want 403 (outside 10.0.0.0/8): the test proves nothing", code, svc)
	}
	if code, svc := rawGet(t, addr, get("/shop;x=1")); code != 400 {
		t.Errorf("/shop;x=1: %d from %q, want 400", code, svc)
	}
	for _, path := range []string{"/admin;x/users", "/x/..;/admin/users", `/x\..\admin\users`, "/%2561dmin/users",
		"/admin%3Bx/users", "/x%5c..%5cadmin/users"} {
		if code, svc := rawGet(t, addr, get(path)); code != 400 || svc != "" {
			t.Errorf("%s: %d from %q, want 400 from HAProxy: the backend reads /admin/users", path, code, svc)
		}
	}
	if code, svc := rawGet(t, addr, get("/shop/cart")); code != 200 || svc != victimEcho {
		t.Errorf("/shop/cart: %d from %q, want the victim's app", code, svc)
	}
	legacyAddr := net.JoinHostPort(p.Addresses(victimNS, "legacy")[0], strconv.Itoa(p.HTTPPort))
	req := "GET /cart;jsessionid=0123ABCD HTTP/1.1\r\nHost: legacy.example\r\n"
	if code, svc := rawGet(t, legacyAddr, req); code != 200 || svc != victimEcho {
		t.Errorf("legacy.example (rule \"/\" only) /cart;jsessionid=…: %d from %q, want the app", code, svc)
	}
}
