package web

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"

	"pier.dev/pier/internal/api"
	"pier.dev/pier/internal/model"
)

// hostileLB puts a hostile string in every user-derived field a page shows.
func hostileLB() *model.LoadBalancer {
	l := lb("u9", "demo", hostileScript, 1)
	l.Name = hostileImg + hostileBidi
	l.Sources = append(l.Sources, model.Source{Kind: "Ingress", Namespace: hostileImg, Name: hostileBidi})
	l.Pools[0].Name, l.Pools[0].Service = hostileScript, hostileImg
	l.Pools[0].Members[0].Target = hostileScript
	l.Listeners[0].Policies[0].Rules[0].Value = hostileImg
	l.Listeners[0].Policies[0].Source.Name = hostileScript
	l.Placement.Standby = hostileScript
	return l
}

func hostileIngresses() fakeIngresses {
	ann := map[string]string{"pier.dev/load-balancer": hostileScript, hostileImg: hostileBidi}
	return fakeIngresses{
		{Ingress: ingress("demo", hostileScript, ann, hostileImg), Problems: []model.Problem{{Kind: "Ingress", Namespace: "demo",
			Name: hostileScript, Severity: model.SeverityError, Reason: "InvalidHost", Field: hostileImg, Message: "host " + hostileScript + hostileBidi}}},
		{Ingress: ingress(hostileImg, hostileBidi, nil)},
	}
}

// TestHostileStringsAreText fetches every page with hostile names, hosts,
// annotations and messages, and checks no tag or attribute comes through
// and bidi overrides are shown, not obeyed.
func TestHostileStringsAreText(t *testing.T) {
	f := newFixture(t, hostileIngresses(), hostileLB())
	// The hostile standby takes the addresses: its name reaches the
	// holder line and the failover history.
	// Its recent errors carry hostile requests (what a client sends
	// reaches them) and hostile names (what a status writer could put
	// there), on the route of the hostile Ingress.
	hostileErr := model.RequestError{First: now.Add(-time.Minute), Last: now, Count: 3, Status: 502, Method: hostileImg,
		Host: hostileBidi, Path: "/" + hostileScript + "\x1b[2J", Namespace: "demo", Route: hostileScript, RouteKind: "Ingress",
		Service: hostileImg, ServicePort: hostileBidi, Member: hostileScript, Pod: hostileImg, TerminationState: hostileScript, RequestID: hostileImg}
	if err := f.store.PutNodeStatus(context.Background(), "u9", model.NodeStatus{Node: hostileScript, State: model.StateActive,
		VRRP: model.VRRPMaster, Message: hostileImg, UpdatedAt: now, RecentErrors: []model.RequestError{hostileErr}}); err != nil {
		t.Fatal(err)
	}
	f.h.Config = func(*model.LoadBalancer) ([]byte, error) { return []byte("# " + hostileScript + "\n"), nil }
	pages := []string{"/", "/ui/?namespace=" + url.QueryEscape(hostileImg), "/ui/lb/u9", "/ui/ingresses",
		"/ui/ingress/demo/" + pathEscape(hostileScript), "/ui/ingress/" + pathEscape(hostileImg) + "/" + pathEscape(hostileBidi),
		"/ui/" + pathEscape(hostileScript)}
	for _, p := range pages {
		code, hdr, body := get(t, f.srv.URL+p)
		if code != 200 && code != 404 {
			t.Errorf("%s: status %d", p, code)
		}
		for _, bad := range []string{"<script>alert", "<img", "onerror=alert(2)>", "\u202E"} {
			if strings.Contains(body, bad) {
				t.Errorf("%s: page contains %q unescaped", p, bad)
			}
		}
		if !strings.Contains(body, "&lt;script&gt;alert(1)&lt;/script&gt;") && !strings.Contains(body, "&#34;&gt;&lt;img src=x onerror=alert(2)&gt;") {
			t.Errorf("%s: the hostile string is not shown as text", p)
		}
		if csp := hdr.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") {
			t.Errorf("%s: CSP %q", p, csp)
		}
	}
	_, _, body := get(t, f.srv.URL+"/ui/lb/u9")
	mustContain(t, "detail", body, "admin‹U&#43;202E›gnp.exe", // html/template escapes "+"
		"# &lt;script&gt;alert(1)&lt;/script&gt;",
		"held by <b>&lt;script&gt;alert(1)&lt;/script&gt;</b>", `<td>&lt;script&gt;alert(1)&lt;/script&gt;</td></tr>`)
	// Links made of hostile names are escaped as paths and stay on this site.
	mustContain(t, "detail", body, `href="/ui/ingress/demo/%3Cscript%3Ealert%281%29%3C%2Fscript%3E"`)
	// The error row: every field text, the path's control byte
	// percent-encoded, the bidi override shown, nothing obeyed.
	mustContain(t, "detail errors", body, `<tr class="error">`, `<code>&#34;&gt;&lt;img src=x onerror=alert(2)&gt;</code>`,
		"/&lt;script&gt;alert(1)&lt;/script&gt;%1B[2J", "admin%E2%80%AEgnp.exe",
		`href="/ui/ingress/demo/%3Cscript%3Ealert%281%29%3C%2Fscript%3E"`)
	_, _, body = get(t, f.srv.URL+"/ui/ingress/demo/"+pathEscape(hostileScript))
	mustContain(t, "ingress", body, "InvalidHost", "pier.dev/load-balancer", "refused")
	mustContain(t, "ingress errors", body, `<tr class="error">`, "/&lt;script&gt;alert(1)&lt;/script&gt;%1B[2J")
	if strings.Contains(body, "\x1b") {
		t.Error("ingress page: an escape byte from a request reached the page")
	}
}

func pathEscape(s string) string { return url.PathEscape(s) }

func TestClean(t *testing.T) {
	for in, want := range map[string]string{
		"plain":                 "plain",
		"日本語.example":           "日本語.example",
		"admin\u202Egnp.exe":    "admin‹U+202E›gnp.exe",
		"a\u2066b\u2069c":       "a‹U+2066›b‹U+2069›c",
		"zero\u200Bwidth":       "zero‹U+200B›width",
		"bom\uFEFF":             "bom‹U+FEFF›",
		"esc\x1b[31m":           "esc‹U+001B›[31m",
		"multi\nline\tkept":     "multi\nline\tkept",
		"<b>markup is left</b>": "<b>markup is left</b>", // html/template escapes it
	} {
		if got := Clean(in); got != want {
			t.Errorf("Clean(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestReadOnly(t *testing.T) {
	f := newFixture(t, nil, lb("u1", "demo", "shop", 1))
	srv := httptest.NewServer((&api.Server{Store: f.store, Ingresses: noIngresses{}, UI: f.h}).Handler())
	defer srv.Close()
	for _, base := range []string{f.srv.URL, srv.URL} {
		for _, method := range []string{http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodPatch, "PURGE"} {
			for _, p := range []string{"/", "/ui/", "/ui/lb/u1", "/ui/ingresses", "/ui/gateways", "/ui/gateway/demo/gw", "/ui/static/app.js", "/ui/nothing"} {
				req, _ := http.NewRequest(method, base+p, strings.NewReader("x=1"))
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusMethodNotAllowed {
					t.Errorf("%s %s: %d, want 405", method, p, resp.StatusCode)
				}
			}
		}
	}
	req, _ := http.NewRequest(http.MethodHead, f.srv.URL+"/", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Errorf("HEAD /: %v %v", resp, err)
	}
}

// TestMountedBesideTheAPI checks the API keeps its routes and the view
// gets "/" and "/ui/" only.
func TestMountedBesideTheAPI(t *testing.T) {
	f := newFixture(t, nil, lb("u1", "demo", "shop", 1))
	srv := httptest.NewServer((&api.Server{Store: f.store, Ingresses: noIngresses{}, UI: f.h}).Handler())
	defer srv.Close()
	for path, want := range map[string]string{
		"/": "text/html", "/ui/": "text/html", "/ui/lb/u1": "text/html", "/ui/static/app.css": "text/css",
		"/loadbalancers": "application/json", "/loadbalancers/u1": "application/json",
	} {
		code, hdr, _ := get(t, srv.URL+path)
		if code != 200 || !strings.HasPrefix(hdr.Get("Content-Type"), want) {
			t.Errorf("GET %s: %d %s, want 200 %s", path, code, hdr.Get("Content-Type"), want)
		}
	}
	if code, _, body := get(t, srv.URL+"/ui/static/"); code != 404 || strings.Contains(body, "app.js") {
		t.Errorf("GET /ui/static/: %d, want 404 and no listing", code)
	}
	if code, _, _ := get(t, srv.URL+"/elsewhere"); code != 404 {
		t.Errorf("GET /elsewhere: %d, want 404", code)
	}
	if code, _, body := get(t, srv.URL+"/ui/lb/nope"); code != 404 || !strings.Contains(body, "Not found") {
		t.Errorf("GET /ui/lb/nope: %d", code)
	}
	// Without a UI the API serves no page at "/".
	plain := httptest.NewServer((&api.Server{Store: f.store, Ingresses: noIngresses{}}).Handler())
	defer plain.Close()
	if code, _, _ := get(t, plain.URL+"/"); code != 404 {
		t.Errorf("GET / without UI: %d, want 404", code)
	}
}

// TestLivePart checks the script's poll: the live part only, a 304 while
// nothing changed, the new part as soon as the store changes.
func TestLivePart(t *testing.T) {
	f := newFixture(t, nil, lb("u1", "demo", "shop", 1))
	code, hdr, body := get(t, f.srv.URL+"/", partHeader, "live")
	if code != 200 || strings.Contains(body, "<html") || !strings.Contains(body, "demo/shop") {
		t.Fatalf("live part: %d %q", code, body)
	}
	tag := hdr.Get("ETag")
	if tag == "" {
		t.Fatal("no ETag on the live part")
	}
	_, _, page := get(t, f.srv.URL+"/")
	mustContain(t, "page", page, `data-etag="`+strings.ReplaceAll(tag, `"`, "&#34;")+`"`)
	f.h.Now = func() time.Time { return now.Add(time.Hour) } // ages alone do not change the tag
	if code, _, _ := get(t, f.srv.URL+"/", partHeader, "live", "If-None-Match", tag); code != http.StatusNotModified {
		t.Errorf("unchanged: %d, want 304", code)
	}
	put(t, f.store, lb("u2", "demo", "blog", 1))
	code, hdr, body = get(t, f.srv.URL+"/", partHeader, "live", "If-None-Match", tag)
	if code != 200 || hdr.Get("ETag") == tag || !strings.Contains(body, "demo/blog") {
		t.Errorf("changed: %d, tag %s, blog shown %v", code, hdr.Get("ETag"), strings.Contains(body, "demo/blog"))
	}
}

func TestConfig(t *testing.T) {
	f := newFixture(t, nil, lb("u1", "demo", "shop", 1))
	_, _, body := get(t, f.srv.URL+"/ui/lb/u1")
	mustContain(t, "nil Config", body, "not available in this mode")
	f.h.Config = func(l *model.LoadBalancer) ([]byte, error) { return []byte("frontend fe_" + l.UUID + "\n"), nil }
	_, _, body = get(t, f.srv.URL+"/ui/lb/u1")
	mustContain(t, "Config", body, `<pre id="haproxy-conf" class="conf">frontend fe_u1`, `data-copy="haproxy-conf"`)
	f.h.Config = func(*model.LoadBalancer) ([]byte, error) { return nil, errors.New("no listener") }
	_, _, body = get(t, f.srv.URL+"/ui/lb/u1")
	mustContain(t, "Config error", body, "could not render: no listener")
}

func TestIngressPages(t *testing.T) {
	l := lb("u1", "demo", "shop", 2)
	ing := ingress("demo", "shop", map[string]string{"pier.dev/load-balancer": "g"}, "shop.example")
	ing.Status.LoadBalancer.Ingress = []networkingv1.IngressLoadBalancerIngress{{IP: "127.10.0.1"}, {IP: "127.20.0.1"}}
	f := newFixture(t, fakeIngresses{{Ingress: ing}}, l)
	_, _, body := get(t, f.srv.URL+"/ui/ingresses")
	mustContain(t, "list", body, `href="/ui/ingress/demo/shop"`, "127.10.0.1, 127.20.0.1", `href="/ui/lb/u1"`, "shop.example")
	_, _, body = get(t, f.srv.URL+"/ui/ingress/demo/shop")
	mustContain(t, "ingress", body, "shop.example", "Prefix", "svc:80", "PATH STARTS_WITH <code>/app</code>", "REDIRECT_TO_POOL → demo_svc_80", "pier.dev/load-balancer")
	if code, _, _ := get(t, f.srv.URL+"/ui/ingress/demo/none"); code != 404 {
		t.Errorf("missing Ingress: %d, want 404", code)
	}
	// Without an Ingress source the pages say so.
	f.h.Ingresses = nil
	_, _, body = get(t, f.srv.URL+"/ui/ingresses")
	mustContain(t, "no source", body, "not available here")
}

// TestOnlyContextualEscaping enforces the gate: nothing in this package
// may mark a string as trusted markup, script, URL or style.
func TestOnlyContextualEscaping(t *testing.T) {
	files, _ := filepath.Glob("*.go")
	tmpls, _ := filepath.Glob("templates/*.html")
	unsafe := regexp.MustCompile(`template\.(HTML|HTMLAttr|JS|JSStr|URL|CSS|Srcset)\b|safeHTML|innerHTML\s*=\s*[^n]`)
	for _, name := range append(files, tmpls...) {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if m := unsafe.Find(b); m != nil {
			t.Errorf("%s uses %q: every value must go through html/template's contextual escaping", name, m)
		}
	}
}

type noIngresses struct{}

func (noIngresses) Ingress(string, string) (*networkingv1.Ingress, []model.Problem, bool) {
	return nil, nil, false
}
