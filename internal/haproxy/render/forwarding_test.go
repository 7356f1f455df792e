package render

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/netip"
	"regexp"
	"testing"
	"time"

	"pier.dev/pier/internal/model"
)

var trustedFixture = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("2001:db8::/32")}

// TestForwardingTrustedGolden: the frontend with trusted proxies, as a
// golden file that HAProxy loads (the default rules are in every other
// golden file).
func TestForwardingTrustedGolden(t *testing.T) {
	web := pool("web", member("10.47.255.238", 80))
	lb := newLB([]model.Listener{httpListener(web.ID, nil)}, web)
	opts := fixtureOptions()
	opts.TrustedProxies = trustedFixture
	r, err := Render(lb, fixtureAt, nil, opts)
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "forwarding-trusted.conf", r.Fragment)
	assertLinesTokenize(t, r.Fragment)
	haproxyCheck(t, r.Fragment, nil)
	lopts := landingFixtureOptions()
	lopts.TrustedProxies = trustedFixture
	if _, err := LandingConfig(landingFixtureAt, lopts); err != nil {
		t.Fatal(err)
	}
}

// TestTrustedProxiesChecked: an unmasked prefix and too long a list are
// refused before anything is rendered.
func TestTrustedProxiesChecked(t *testing.T) {
	web := pool("web", member("10.47.255.238", 80))
	lb := newLB([]model.Listener{httpListener(web.ID, nil)}, web)
	many := make([]netip.Prefix, maxTrustedProxies+1)
	for i := range many {
		many[i] = netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 0, byte(i), 0}), 24)
	}
	for _, list := range [][]netip.Prefix{{netip.MustParsePrefix("10.0.0.1/8")}, many, {{}}} {
		opts := fixtureOptions()
		opts.TrustedProxies = list
		if _, err := Render(lb, fixtureAt, nil, opts); err == nil {
			t.Errorf("%d trusted proxies starting %v: rendered", len(list), list[0])
		}
	}
}

// TestIntegrationForwardingHeaders: a client that forges every
// forwarding header, from an untrusted address and from a trusted one,
// through a real HAProxy; the backend reports what it received.
func TestIntegrationForwardingHeaders(t *testing.T) {
	bin := haproxyBin(t)
	if testing.Short() {
		t.Skip("starts HAProxy")
	}
	echo := pool("echo", memberAt(startHeaderEcho(t)))
	lb := newLB([]model.Listener{httpListener(echo.ID, nil)}, echo)
	plain := serveLB(t, bin, lb)
	lb2 := newLB([]model.Listener{httpListener(echo.ID, nil)}, echo)
	trusting := serveLBWith(t, bin, lb2, Options{MinSlots: 4, TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.2/32")}})
	forged := "X-Real-IP: 6.6.6.6\r\nX-Forwarded-For: 1.2.3.4, 5.6.7.8\r\nX-Forwarded-Host: evil.example\r\n" +
		"X-Forwarded-Port: 1\r\nX-Forwarded-Proto: https\r\nForwarded: for=6.6.6.6\r\nX-Original-URI: /admin\r\n"
	for _, tc := range []struct {
		name, addr, from, extra string
		want                    map[string]string
	}{
		{"untrusted, forged", plain, "127.0.0.1", forged + "X-Request-ID: abc-123\r\n", map[string]string{
			"X-Real-Ip": "127.0.0.1", "X-Forwarded-For": "127.0.0.1", "X-Forwarded-Host": "app.test",
			"X-Forwarded-Port": "", "X-Forwarded-Proto": "http", "Forwarded": "-", "X-Original-Uri": "-", "X-Request-Id": "abc-123"}},
		{"trusted list, other source", trusting, "127.0.0.1", forged, map[string]string{
			"X-Real-Ip": "127.0.0.1", "X-Forwarded-For": "127.0.0.1", "X-Forwarded-Host": "app.test",
			"X-Forwarded-Port": "", "X-Forwarded-Proto": "http", "Forwarded": "-", "X-Original-Uri": "-", "X-Request-Id": "uuid"}},
		{"trusted source", trusting, "127.0.0.2", forged + "X-Request-ID: <script>\r\n", map[string]string{
			"X-Real-Ip": "5.6.7.8", "X-Forwarded-For": "1.2.3.4, 5.6.7.8, 127.0.0.2", "X-Forwarded-Host": "evil.example",
			"X-Forwarded-Port": "1", "X-Forwarded-Proto": "https", "Forwarded": "for=6.6.6.6", "X-Original-Uri": "-", "X-Request-Id": "uuid"}},
		{"trusted source, no headers", trusting, "127.0.0.2", "", map[string]string{
			"X-Real-Ip": "127.0.0.2", "X-Forwarded-For": "127.0.0.2", "X-Forwarded-Host": "app.test",
			"X-Forwarded-Port": "", "X-Forwarded-Proto": "http", "Forwarded": "-", "X-Request-Id": "uuid"}},
	} {
		seen := headersSeen(t, tc.addr, tc.from, "GET / HTTP/1.1\r\nHost: app.test\r\n"+tc.extra+"\r\n")
		_, port, _ := net.SplitHostPort(tc.addr)
		for name, want := range tc.want {
			got := seen[name]
			switch want {
			case "":
				want = port // the listener's port
			case "uuid":
				if len(got) == 1 && uuidPattern.MatchString(got[0]) {
					continue
				}
			case "-":
				if len(got) == 0 {
					continue
				}
			}
			if len(got) != 1 || got[0] != want {
				t.Errorf("%s: backend saw %s %q, want %q", tc.name, name, got, want)
			}
		}
	}
}

var uuidPattern = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

// startHeaderEcho answers every request with its headers as JSON.
func startHeaderEcho(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(r.Header)
	})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return l.Addr().String()
}

// headersSeen sends req from the local address from and returns the
// headers the echo backend got.
func headersSeen(t *testing.T, addr, from, req string) http.Header {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 5 * time.Second}
	conn, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(conn, req); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var h http.Header
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
		t.Fatalf("status %d: %v", resp.StatusCode, err)
	}
	return h
}
