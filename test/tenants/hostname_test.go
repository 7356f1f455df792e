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

// Items 7 and 11 of issue 14: in a group shared with the victim, the
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
