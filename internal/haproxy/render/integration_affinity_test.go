package render

import (
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"

	"pier.dev/pier/internal/model"
)

// TestIntegrationAffinity: cookie affinity through a real HAProxy. A
// request without the cookie is balanced and gets Set-Cookie with the
// attributes; every request with it reaches the member that set it,
// while requests without it spread over both members. The cookie of the
// other slot reaches the other member, a forged or stale one is
// balanced as if absent, and the member never sees the cookie
// (indirect). A pool without affinity sets no cookie.
func TestIntegrationAffinity(t *testing.T) {
	bin := haproxyBin(t)
	if testing.Short() {
		t.Skip("starts HAProxy")
	}
	sticky := pool("sticky", memberAt(startCookieBackend(t, "one")), memberAt(startCookieBackend(t, "two")))
	sticky.Affinity = &model.CookieAffinity{Name: "route_id", Path: "/x", MaxAgeSeconds: 600, SameSite: "Lax"}
	plain := pool("plain", memberAt(startCookieBackend(t, "three")))
	addr := serveLB(t, bin, newLB([]model.Listener{httpListener("", routes(
		toPool(sticky, hostIs("sticky.test"), pathPrefix("/")),
		toPool(plain, hostIs("plain.test"), pathPrefix("/")),
	))}, sticky, plain))
	get := func(host, cookie string) *http.Response {
		req := "GET /x HTTP/1.1\r\nHost: " + host + "\r\n"
		if cookie != "" {
			req += "Cookie: " + cookie + "\r\n"
		}
		return rawRequest(t, addr, "127.0.0.1", req+"\r\n")
	}

	first := get("sticky.test", "")
	set := first.Header.Get("Set-Cookie")
	for _, want := range []string{"route_id=s", "; path=/", "; HttpOnly", "; Path=/x", "; Max-Age=600", "; SameSite=Lax"} {
		if !strings.Contains(set, want) {
			t.Errorf("Set-Cookie %q lacks %q", set, want)
		}
	}
	// The member marks its answer cacheable; nocache makes HAProxy add
	// "private", so a shared cache never hands the cookie to another.
	if cc := first.Header.Values("Cache-Control"); !slices.Contains(cc, "private") {
		t.Errorf("Cache-Control %q on the response that sets the cookie, want private too (nocache)", cc)
	}
	t.Logf("Set-Cookie: %s", set)
	cookie, _, _ := strings.Cut(set, ";")
	owner := first.Header.Get("X-Backend")
	for i := range 20 {
		r := get("sticky.test", "theme=dark; "+cookie)
		if got, set := r.Header.Get("X-Backend"), r.Header.Get("Set-Cookie"); got != owner || set != "" && !refreshes(set, cookie) {
			t.Fatalf("request %d with %q: %q, Set-Cookie %q; want %q and none, or the same cookie with its last-seen date moved on",
				i, cookie, got, set, owner)
		}
		if seen := r.Header.Get("X-Seen-Cookie"); seen != "theme=dark" {
			t.Fatalf("the member saw Cookie %q, want only theme=dark", seen)
		}
	}
	if n := len(spread(t, func() *http.Response { return get("sticky.test", "") })); n != 2 {
		t.Errorf("without the cookie, %d members answered, want 2", n)
	}
	// The other slot's cookie, without the date maxlife adds: HAProxy
	// accepts an undated cookie.
	other := "route_id=s1"
	if strings.HasPrefix(cookie, other) {
		other = "route_id=s2"
	}
	if r := get("sticky.test", other); r.Header.Get("X-Backend") == owner {
		t.Errorf("%s reached %s too", other, owner)
	}
	for _, forged := range []string{"route_id=s9", "route_id=nope", "route_id="} {
		if n := len(spread(t, func() *http.Response { return get("sticky.test", forged) })); n != 2 {
			t.Errorf("with %q, %d members answered, want 2 (balanced)", forged, n)
		}
	}
	if r := get("plain.test", ""); r.Header.Get("Set-Cookie") != "" || r.Header.Get("X-Backend") != "three" {
		t.Errorf("pool without affinity: %q, Set-Cookie %q", r.Header.Get("X-Backend"), r.Header.Get("Set-Cookie"))
	}
}

// spread sends 10 requests and returns the members that answered, each
// with a 200 and a new cookie.
func spread(t *testing.T, get func() *http.Response) map[string]bool {
	t.Helper()
	seen := map[string]bool{}
	for range 10 {
		r := get()
		if r.StatusCode != 200 || r.Header.Get("Set-Cookie") == "" {
			t.Fatalf("status %d, Set-Cookie %q", r.StatusCode, r.Header.Get("Set-Cookie"))
		}
		seen[r.Header.Get("X-Backend")] = true
	}
	return seen
}

// startCookieBackend is startBackend that also reports the Cookie
// header it received.
func startCookieBackend(t *testing.T, name string) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Backend", name)
		w.Header().Set("X-Seen-Cookie", r.Header.Get("Cookie"))
		w.Header().Set("Cache-Control", "public, max-age=60")
		io.WriteString(w, name)
	})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return l.Addr().String()
}

// refreshes reports whether Set-Cookie value set is cookie ("name=server|
// last-seen|first-seen", as maxlife makes it) with only its last-seen date
// changed: HAProxy sometimes writes the date again on a request in a
// later second than the one the cookie records (CI: request 19 of 20 got
// one; a request 1.1 s later got one in one run of two).
func refreshes(set, cookie string) bool {
	value, _, _ := strings.Cut(set, ";")
	got, want := strings.Split(value, "|"), strings.Split(cookie, "|")
	return len(got) == 3 && len(want) == 3 && got[0] == want[0] && got[2] == want[2]
}
