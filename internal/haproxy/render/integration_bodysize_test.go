package render

import (
	"strconv"
	"strings"
	"testing"

	"pier.dev/pier/internal/model"
)

// TestIntegrationBodySizeLimits: the proxy-body-size values charts use
// (Nextcloud's 4G, 10G, 50G), 1m and the largest translation accepts
// (1024g) load in a real HAProxy, and a request declaring one byte over
// each gets 413 while one declaring the limit reaches the backend. A
// limit past 4 GiB used to render "wait-for-body at-least 4294967297",
// which HAProxy 2.6 refuses, and req.hdr_val reads Content-Length as 32
// bits, so 4 GiB + 100 bytes went through a 1m limit as 100.
func TestIntegrationBodySizeLimits(t *testing.T) {
	bin := haproxyBin(t)
	if testing.Short() {
		t.Skip("starts HAProxy")
	}
	limits := map[string]int64{"1m": 1 << 20, "4g": 4 << 30, "10g": 10 << 30, "50g": 50 << 30, "1024g": 1 << 40}
	fast := pool("fast", memberAt(startBackend(t, "fast")))
	var ps []model.L7Policy
	for _, name := range []string{"1m", "4g", "10g", "50g", "1024g"} {
		p := toPool(fast, hostIs(name+".test"), pathPrefix("/"))
		p.Options = &model.PolicyOptions{MaxBodyBytes: limits[name]}
		ps = append(ps, p)
	}
	lb := newLB([]model.Listener{httpListener("", routes(ps...))}, fast)
	addr := serveLB(t, bin, lb) // fails the test if HAProxy refuses the file
	for name, limit := range limits {
		for _, tc := range []struct {
			declared int64
			status   int
		}{{limit, 200}, {limit + 1, 413}, {limit + 1<<32, 413}} {
			// The backend answers without reading the body, so a few
			// bytes of a declared 50 GiB are enough.
			req := "POST / HTTP/1.1\r\nHost: " + name + ".test\r\nContent-Length: " +
				strconv.FormatInt(tc.declared, 10) + "\r\n\r\n" + strings.Repeat("a", 16)
			if resp := rawRequest(t, addr, "127.0.0.1", req); resp.StatusCode != tc.status {
				t.Errorf("limit %s, Content-Length %d: status %d, want %d", name, tc.declared, resp.StatusCode, tc.status)
			}
		}
	}
	if resp := rawRequest(t, addr, "127.0.0.1", "POST / HTTP/1.1\r\nHost: 1m.test\r\nContent-Length: 1048576\r\n\r\n"+
		strings.Repeat("a", 1<<20)); resp.StatusCode != 200 || resp.Header.Get("X-Backend") != "fast" {
		t.Errorf("1m limit, whole 1 MiB body: %d from %q", resp.StatusCode, resp.Header.Get("X-Backend"))
	}
}
