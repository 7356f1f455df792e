package layout

import (
	"strings"
	"testing"
)

func TestPaths(t *testing.T) {
	l, err := New("/s")
	if err != nil {
		t.Fatal(err)
	}
	const uuid = "0f8a2d3e-1111-4222-8333-444455556666"
	lb, err := l.LB(uuid)
	if err != nil {
		t.Fatal(err)
	}
	p := l.ProcessOf(lb)
	cert, _ := lb.Cert("ab12", "0123456789abcdef0123")
	crtList, _ := lb.CrtList("fe")
	routeMap, _ := lb.RouteMap(80, "host.prefix", "fe")
	for got, want := range map[string]string{
		l.Global():          "/s/haproxy/global.conf",
		lb.Config():         "/s/haproxy/" + uuid + "/haproxy.conf",
		crtList:             "/s/haproxy/" + uuid + "/crt-list-fe",
		lb.Slots():          "/s/haproxy/" + uuid + "/slots.json",
		routeMap:            "/s/haproxy/" + uuid + "/routes-80-host.prefix-fe.map",
		cert:                "/s/haproxy/" + uuid + "/certs/ab12-0123456789abcdef.pem",
		p.Conf():            "/s/haproxy/" + uuid + "/process.conf",
		p.Socket():          "/s/haproxy/" + uuid + "/haproxy.sock",
		p.Files(lb)[0]:      "/s/haproxy/global.conf",
		lb.Candidate():      "/s/haproxy/" + uuid + "/haproxy.conf.check",
		l.Shard(3).Socket(): "/s/haproxy/shard-3/haproxy.sock",
		l.Shard(3).Conf():   "/s/haproxy/shard-3/process.conf",
	} {
		if got != want {
			t.Errorf("got %s, want %s", got, want)
		}
	}
	if f := p.Files(lb, lb); len(f) != 4 || f[1] != p.Conf() || f[3] != lb.Config() {
		t.Errorf("files %v", f)
	}
}

// TestRefusals: a uuid from a shared store never leaves its folder.
func TestRefusals(t *testing.T) {
	l, _ := New("/s")
	for _, uuid := range []string{"", "..", "../x", "0F8A2D3E-1111-4222-8333-444455556666", "0f8a2d3e-1111-4222-8333-444455556666/..", "a/b"} {
		if _, err := l.LB(uuid); err == nil {
			t.Errorf("LB(%q) accepted", uuid)
		}
	}
	lb, _ := l.LB("0f8a2d3e-1111-4222-8333-444455556666")
	for _, id := range []string{"../x", "a/b", "", ".", "A"} {
		if _, err := lb.Cert(id, "aa"); err == nil {
			t.Errorf("Cert(%q) accepted", id)
		}
	}
	for _, digest := range []string{"", "AA", "../x", "a/b", "aa "} {
		if _, err := lb.Cert("ab12", digest); err == nil {
			t.Errorf("Cert digest %q accepted", digest)
		}
		if _, err := lb.CrtList(digest); err == nil {
			t.Errorf("CrtList digest %q accepted", digest)
		}
	}
	if _, err := New("/" + strings.Repeat("d", 60)); err == nil || !strings.Contains(err.Error(), "too long") {
		t.Errorf("long state dir: %v", err)
	}
	if _, err := New("/var/lib/pier x"); err == nil {
		t.Error("a state dir with a space was accepted")
	}
}
