package translate

import (
	"reflect"
	"strings"
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"

	"pier.dev/pier/internal/annotation"
	"pier.dev/pier/internal/model"
)

func hasFatal(issues []annotation.Issue) bool {
	for _, is := range issues {
		if is.Fatal {
			return true
		}
	}
	return false
}

// snippetAnnotations are an Ingress's snippets of every kind, one
// annotation pier does not implement, and one long snippet (never
// parsed: no size refusal).
var snippetAnnotations = map[string]string{
	annotation.NginxPrefix + "configuration-snippet": "more_set_headers \"X: y\";",
	annotation.NginxPrefix + "server-snippet":        "return 403;",
	annotation.NginxPrefix + "auth-snippet":          "x",
	annotation.NginxPrefix + "stream-snippet":        "x",
	annotation.NginxPrefix + "proxy-set-headers":     "ns/headers",
	annotation.NginxPrefix + "server-snippet-long":   strings.Repeat("x", 4096),
}

// TestSnippetsRefuseTheIngress: a snippet refuses the Ingress, one
// SnippetRefused error per snippet, each naming an alternative and the
// flag; the annotation pier does not implement stays a Warning.
func TestSnippetsRefuseTheIngress(t *testing.T) {
	ing := simpleIngress(t, "ns", "a", 0, snippetAnnotations, "a.example", "/")
	res := Ingresses(snapshotOf(ing), DefaultOptions())
	if _, ok := res.Accepted[model.IngressRef("ns", "a")]; ok {
		t.Fatal("an Ingress with snippets must be refused")
	}
	ps := problemsFor(res, "a")
	if len(ps) != 6 {
		t.Fatalf("want 6 problems, got %+v", ps)
	}
	for _, p := range ps {
		if !strings.Contains(p.Field, "snippet") {
			if p.Severity != model.SeverityWarning || p.Reason != "IgnoredAnnotation" {
				t.Errorf("not a snippet: %+v", p)
			}
			continue
		}
		if p.Severity != model.SeverityError || p.Reason != "SnippetRefused" ||
			!strings.Contains(p.Message, "use ") || !strings.Contains(p.Message, "--ignore-snippets") {
			t.Errorf("snippet: %+v", p)
		}
	}
}

// TestIgnoreSnippetsServes: with IgnoreSnippets the Ingress is served
// and every snippet is a Warning naming its alternative.
func TestIgnoreSnippetsServes(t *testing.T) {
	ing := simpleIngress(t, "ns", "a", 0, snippetAnnotations, "a.example", "/")
	opts := DefaultOptions()
	opts.IgnoreSnippets = true
	res := Ingresses(snapshotOf(ing), opts)
	if _, ok := res.Accepted[model.IngressRef("ns", "a")]; !ok {
		t.Fatal("IgnoreSnippets: snippets must not refuse the Ingress")
	}
	ps := problemsFor(res, "a")
	if len(ps) != 6 {
		t.Fatalf("want 6 warnings, got %+v", ps)
	}
	for _, p := range ps {
		if p.Severity != model.SeverityWarning || !strings.Contains(p.Message, "ignored") {
			t.Errorf("%+v", p)
		}
		if strings.Contains(p.Field, "snippet") && !strings.Contains(p.Message, "use ") {
			t.Errorf("snippet warning names no alternative: %s", p.Message)
		}
	}
}

// tlsIngress: host a.example with TLS, b.example without, annotations ann.
func tlsIngress(t *testing.T, ns, name string, age int, ann map[string]string) *networkingv1.Ingress {
	ing := simpleIngress(t, ns, name, age, ann, "a.example", "/")
	ing.Spec.Rules = append(ing.Spec.Rules, *ing.Spec.Rules[0].DeepCopy())
	ing.Spec.Rules[1].Host = "b.example"
	ing.Spec.TLS = []networkingv1.IngressTLS{{Hosts: []string{"a.example"}, SecretName: "tls"}}
	return ing
}

func redirects(l model.Listener) map[string]bool {
	out := map[string]bool{}
	for _, p := range l.Policies {
		out[p.Rules[0].Value] = p.Options != nil && p.Options.HTTPSRedirect
	}
	return out
}

func TestSSLRedirect(t *testing.T) {
	for name, tc := range map[string]struct {
		ann  map[string]string
		a, b bool
	}{
		"default: TLS hosts only": {nil, true, false},
		"ssl-redirect false":      {map[string]string{annotation.NginxPrefix + "ssl-redirect": "false"}, false, false},
		"force-ssl-redirect":      {map[string]string{annotation.NginxPrefix + "force-ssl-redirect": "true"}, true, true},
		"pier.dev/ overrides":     {map[string]string{annotation.NginxPrefix + "ssl-redirect": "true", annotation.Prefix + "ssl-redirect": "false"}, false, false},
	} {
		t.Run(name, func(t *testing.T) {
			snap := snapshotOf(tlsIngress(t, "ns", "a", 0, tc.ann))
			snap.Secrets = append(snap.Secrets, tlsSecretFor(t, "ns", "tls", "a.example"))
			lb := onlyLB(t, Ingresses(snap, DefaultOptions()))
			if got := redirects(lb.Listeners[0]); got["a.example"] != tc.a || got["b.example"] != tc.b {
				t.Errorf("http redirects %v", got)
			}
			for _, p := range lb.Listeners[1].Policies {
				if p.Options != nil {
					t.Errorf("https policy with options %+v", p.Options)
				}
			}
		})
	}
}

// On a shared load balancer, one Ingress's options reach only its own
// routes, and its timeouts only its own pools.
func TestOptionsAreScopedToTheirIngress(t *testing.T) {
	group := map[string]string{annotation.LoadBalancer: "shared"}
	strict := map[string]string{annotation.LoadBalancer: "shared",
		annotation.NginxPrefix + "whitelist-source-range": "10.0.0.0/8", annotation.NginxPrefix + "proxy-body-size": "1k",
		annotation.NginxPrefix + "proxy-read-timeout": "5"}
	a := simpleIngress(t, "ns", "strict", 0, strict, "strict.example", "/")
	b := simpleIngress(t, "ns", "open", 1, group, "open.example", "/")
	b.Spec.Rules[0].HTTP.Paths[0].Backend.Service.Name = "other"
	lb := onlyLB(t, Ingresses(snapshotOf(a, b), DefaultOptions()))
	for _, p := range lb.Listeners[0].Policies {
		strictRoute := p.Rules[0].Value == "strict.example"
		if got := p.Options != nil; got != strictRoute {
			t.Errorf("%s: options %+v", p.Rules[0].Value, p.Options)
		}
		if strictRoute && (p.Options.MaxBodyBytes != 1024 || p.Options.AllowSources[0] != "10.0.0.0/8") {
			t.Errorf("options %+v", p.Options)
		}
		pool := lb.Pool(p.PoolID)
		if want := map[bool]time.Duration{true: 5 * time.Second}[strictRoute]; pool.ServerTimeout != want {
			t.Errorf("%s: pool timeout %v", pool.Name, pool.ServerTimeout)
		}
	}
}

func TestNoAnnotationsNoOptions(t *testing.T) {
	lb := onlyLB(t, Ingresses(snapshotOf(simpleIngress(t, "ns", "a", 0, nil, "a.example", "/")), DefaultOptions()))
	for _, p := range lb.Listeners[0].Policies {
		if p.Options != nil {
			t.Errorf("options %+v", p.Options)
		}
	}
	if p := lb.Pools[0]; p.ConnectTimeout != 0 || p.ServerTimeout != 0 {
		t.Errorf("pool timeouts %+v", p)
	}
}

func TestFromToWWWRedirect(t *testing.T) {
	ann := map[string]string{annotation.NginxPrefix + "from-to-www-redirect": "true"}
	a := simpleIngress(t, "ns", "a", 0, ann, "shop.example", "/")
	lb := onlyLB(t, Ingresses(snapshotOf(a), DefaultOptions()))
	var found bool
	for _, p := range lb.Listeners[0].Policies {
		if p.Rules[0].Value == "www.shop.example" {
			found = p.Options != nil && p.Options.RedirectPrefix == "http://shop.example" && p.Options.RedirectCode == 308
		}
	}
	if !found {
		t.Errorf("no redirect from www.shop.example: %+v", lb.Listeners[0].Policies)
	}

	// Another Ingress of the load balancer serves the other name: untouched.
	group := map[string]string{annotation.LoadBalancer: "g", annotation.NginxPrefix + "from-to-www-redirect": "true"}
	b := simpleIngress(t, "ns", "b", 0, group, "www.site.example", "/")
	c := simpleIngress(t, "ns", "c", 1, map[string]string{annotation.LoadBalancer: "g"}, "site.example", "/")
	lb = onlyLB(t, Ingresses(snapshotOf(b, c), DefaultOptions()))
	for _, p := range lb.Listeners[0].Policies {
		if p.Options != nil {
			t.Errorf("%s: options %+v", p.Rules[0].Value, p.Options)
		}
	}
	for in, want := range map[string]string{"www.a.example": "a.example", "a.example": "www.a.example", "www.com": "", "localhost": "www.localhost"} {
		if got := twinHost(in); got != want {
			t.Errorf("twinHost(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestTimeoutConflictWarnsTheNewer(t *testing.T) {
	group := map[string]string{annotation.LoadBalancer: "g", annotation.NginxPrefix + "proxy-read-timeout": "5"}
	other := map[string]string{annotation.LoadBalancer: "g", annotation.NginxPrefix + "proxy-read-timeout": "120"}
	a := simpleIngress(t, "ns", "old", 0, group, "a.example", "/")
	b := simpleIngress(t, "ns", "new", 1, other, "b.example", "/")
	res := Ingresses(snapshotOf(a, b), DefaultOptions())
	lb := onlyLB(t, res)
	if len(lb.Pools) != 1 || lb.Pools[0].ServerTimeout != 5*time.Second {
		t.Fatalf("pools %+v", lb.Pools)
	}
	ps := problemsFor(res, "new")
	if len(ps) != 1 || ps[0].Reason != "TimeoutConflict" || len(problemsFor(res, "old")) != 0 {
		t.Errorf("problems %+v", res.Problems)
	}
}

func TestAppRootAndUpstreamVhost(t *testing.T) {
	ann := map[string]string{annotation.NginxPrefix + "app-root": "/app1", annotation.NginxPrefix + "upstream-vhost": "internal.example"}
	lb := onlyLB(t, Ingresses(snapshotOf(simpleIngress(t, "ns", "a", 0, ann, "a.example", "/")), DefaultOptions()))
	o := lb.Listeners[0].Policies[0].Options
	if o == nil || o.AppRoot != "/app1" || o.UpstreamHost != "internal.example" {
		t.Errorf("options %+v", o)
	}
}

func TestCORS(t *testing.T) {
	lbOf := func(ann map[string]string) *model.LoadBalancer {
		return onlyLB(t, Ingresses(snapshotOf(simpleIngress(t, "ns", "a", 0, ann, "a.example", "/")), DefaultOptions()))
	}
	// Companions without enable-cors do nothing.
	if o := lbOf(map[string]string{annotation.NginxPrefix + "cors-allow-origin": "https://a.example"}).Listeners[0].Policies[0].Options; o != nil {
		t.Errorf("cors-allow-origin alone: options %+v", o)
	}
	// ingress-nginx's defaults.
	o := lbOf(map[string]string{annotation.NginxPrefix + "enable-cors": "true"}).Listeners[0].Policies[0].Options
	defaults, _ := annotation.Parse(nil)
	want := model.CORS{AllowOrigins: []string{"*"}, AllowMethods: defaults.CORS.Methods, AllowHeaders: defaults.CORS.Headers,
		AllowCredentials: true, MaxAgeSeconds: 1728000}
	if o == nil || o.CORS == nil || !reflect.DeepEqual(*o.CORS, want) {
		t.Fatalf("defaults: %+v", o)
	}
	o = lbOf(map[string]string{annotation.NginxPrefix + "enable-cors": "true",
		annotation.NginxPrefix + "cors-allow-origin":  "https://b.example,https://a.example:8443, https://b.example",
		annotation.NginxPrefix + "cors-allow-methods": "GET,POST", annotation.NginxPrefix + "cors-allow-headers": "X-Token",
		annotation.Prefix + "cors-allow-credentials": "false", annotation.NginxPrefix + "cors-max-age": "0"}).Listeners[0].Policies[0].Options
	want = model.CORS{AllowOrigins: []string{"https://a.example:8443", "https://b.example"}, AllowMethods: []string{"GET", "POST"},
		AllowHeaders: []string{"X-Token"}}
	if o == nil || o.CORS == nil || !reflect.DeepEqual(*o.CORS, want) {
		t.Fatalf("set: %+v", o.CORS)
	}
}

func TestAffinity(t *testing.T) {
	poolOf := func(ann map[string]string) *model.Pool {
		lb := onlyLB(t, Ingresses(snapshotOf(simpleIngress(t, "ns", "a", 0, ann, "a.example", "/")), DefaultOptions()))
		return &lb.Pools[0]
	}
	// Companions without affinity: cookie do nothing.
	if a := poolOf(map[string]string{annotation.NginxPrefix + "session-cookie-name": "x"}).Affinity; a != nil {
		t.Errorf("session-cookie-name alone: %+v", a)
	}
	for _, tc := range []struct {
		ann  map[string]string
		want model.CookieAffinity
	}{
		{map[string]string{annotation.NginxPrefix + "affinity": "cookie"}, model.CookieAffinity{Name: "INGRESSCOOKIE"}},
		{map[string]string{annotation.NginxPrefix + "affinity": "cookie", annotation.NginxPrefix + "session-cookie-name": "route",
			annotation.NginxPrefix + "session-cookie-path": "/", annotation.NginxPrefix + "session-cookie-expires": "60"},
			model.CookieAffinity{Name: "route", MaxAgeSeconds: 60}},
		{map[string]string{annotation.Prefix + "affinity": "cookie", annotation.NginxPrefix + "session-cookie-path": "/app",
			annotation.NginxPrefix + "session-cookie-expires": "60", annotation.NginxPrefix + "session-cookie-max-age": "120",
			annotation.NginxPrefix + "session-cookie-samesite": "Strict"},
			model.CookieAffinity{Name: "INGRESSCOOKIE", Path: "/app", MaxAgeSeconds: 120, SameSite: "Strict"}},
		{map[string]string{annotation.NginxPrefix + "affinity": "cookie", annotation.NginxPrefix + "session-cookie-secure": "true"},
			model.CookieAffinity{Name: "INGRESSCOOKIE", Secure: model.CookieSecureAlways}},
		{map[string]string{annotation.NginxPrefix + "affinity": "cookie", annotation.Prefix + "session-cookie-secure": "False"},
			model.CookieAffinity{Name: "INGRESSCOOKIE", Secure: model.CookieSecureNever}},
	} {
		if a := poolOf(tc.ann).Affinity; a == nil || *a != tc.want {
			t.Errorf("%v: %+v, want %+v", tc.ann, a, tc.want)
		}
	}
}

func TestAffinityConflictWarnsTheNewer(t *testing.T) {
	old := map[string]string{annotation.LoadBalancer: "g", annotation.NginxPrefix + "affinity": "cookie"}
	other := map[string]string{annotation.LoadBalancer: "g", annotation.NginxPrefix + "affinity": "cookie", annotation.NginxPrefix + "session-cookie-name": "b"}
	none := map[string]string{annotation.LoadBalancer: "g"}
	a := simpleIngress(t, "ns", "old", 0, old, "a.example", "/")
	b := simpleIngress(t, "ns", "new", 1, other, "b.example", "/")
	c := simpleIngress(t, "ns", "plain", 2, none, "c.example", "/")
	res := Ingresses(snapshotOf(c, b, a), DefaultOptions())
	lb := onlyLB(t, res)
	if len(lb.Pools) != 1 || lb.Pools[0].Affinity == nil || lb.Pools[0].Affinity.Name != "INGRESSCOOKIE" {
		t.Fatalf("pools %+v", lb.Pools)
	}
	for _, name := range []string{"new", "plain"} {
		ps := problemsFor(res, name)
		if len(ps) != 1 || ps[0].Reason != "AffinityConflict" || !strings.Contains(ps[0].Message, "cookie INGRESSCOOKIE") {
			t.Errorf("%s: problems %+v", name, ps)
		}
	}
	if ps := problemsFor(res, "old"); len(ps) != 0 {
		t.Errorf("old: problems %+v", ps)
	}
}

func TestBackendProtocol(t *testing.T) {
	for v, want := range map[string]model.BackendProtocol{"HTTP": "", "http": "", "HTTPS": model.BackendHTTPS,
		"https": model.BackendHTTPS, "GRPC": model.BackendGRPC, "grpc": model.BackendGRPC, "GRPCS": model.BackendGRPCS} {
		lb := onlyLB(t, Ingresses(snapshotOf(simpleIngress(t, "ns", "a", 0,
			map[string]string{annotation.NginxPrefix + "backend-protocol": v}, "a.example", "/")), DefaultOptions()))
		if got := lb.Pools[0].Protocol; got != want {
			t.Errorf("%s: %q, want %q", v, got, want)
		}
	}
	_, issues := annotation.Parse(map[string]string{annotation.NginxPrefix + "backend-protocol": "FCGI"})
	if !hasFatal(issues) {
		t.Errorf("FCGI does not refuse the Ingress: %+v", issues)
	}
}

func TestBackendProtocolConflictWarnsTheNewer(t *testing.T) {
	old := map[string]string{annotation.LoadBalancer: "g", annotation.NginxPrefix + "backend-protocol": "HTTPS"}
	other := map[string]string{annotation.LoadBalancer: "g", annotation.NginxPrefix + "backend-protocol": "GRPC"}
	a := simpleIngress(t, "ns", "old", 0, old, "a.example", "/")
	b := simpleIngress(t, "ns", "new", 1, other, "b.example", "/")
	res := Ingresses(snapshotOf(b, a), DefaultOptions())
	lb := onlyLB(t, res)
	if len(lb.Pools) != 1 || lb.Pools[0].Protocol != model.BackendHTTPS {
		t.Fatalf("pools %+v", lb.Pools)
	}
	ps := problemsFor(res, "new")
	if len(ps) != 1 || ps[0].Reason != "BackendProtocolConflict" || !strings.Contains(ps[0].Message, "(HTTPS)") ||
		len(problemsFor(res, "old")) != 0 {
		t.Errorf("problems %+v", res.Problems)
	}
}

func TestRewriteTarget(t *testing.T) {
	lbOf := func(ann map[string]string, path string) *Result {
		return Ingresses(snapshotOf(simpleIngress(t, "ns", "a", 0, ann, "a.example", path)), DefaultOptions())
	}
	for _, key := range []string{annotation.NginxPrefix + "rewrite-target", annotation.Prefix + "rewrite-target"} {
		o := onlyLB(t, lbOf(map[string]string{key: "/"}, "/foo")).Listeners[0].Policies[0].Options
		if o == nil || o.RewritePath != "/" {
			t.Errorf("%s: options %+v", key, o)
		}
	}
	// use-regex false changes nothing; use-regex alone makes the path a
	// regular expression, without options.
	o := onlyLB(t, lbOf(map[string]string{annotation.NginxPrefix + "rewrite-target": "/api/", annotation.NginxPrefix + "use-regex": "false"}, "/foo")).
		Listeners[0].Policies[0].Options
	if o == nil || o.RewritePath != "/api/" {
		t.Errorf("use-regex false: options %+v", o)
	}
	lb := onlyLB(t, lbOf(map[string]string{annotation.NginxPrefix + "use-regex": "true"}, "/foo"))
	if p := lb.Listeners[0].Policies[0]; p.Options != nil || p.Rules[1].Compare != model.CompareRegex || p.Rules[1].Value != "/foo" {
		t.Errorf("use-regex alone: policy %+v", p)
	}
	refused := func(name string, ann map[string]string, path, reason, field, text string) {
		t.Helper()
		res := lbOf(ann, path)
		if len(res.LoadBalancers) != 0 {
			t.Errorf("%s: served", name)
		}
		found := false
		for _, p := range problemsFor(res, "a") {
			found = found || (p.Reason == reason && strings.Contains(p.Field, field) && strings.Contains(p.Message, text))
		}
		if !found {
			t.Errorf("%s: problems %+v, want %s on %s with %q", name, res.Problems, reason, field, text)
		}
	}
	refused("use-regex invalid", map[string]string{annotation.NginxPrefix + "rewrite-target": "/", annotation.NginxPrefix + "use-regex": "yes;evil"},
		"/foo", "InvalidAnnotation", "use-regex", "use-regex")
	refused("capture group, no group in the path", map[string]string{annotation.NginxPrefix + "rewrite-target": "/$1"},
		"/foo", "InvalidIngress", "spec.rules", "spec.rules[0].http.paths[0]: path \"/foo\" has 0 capture groups, rewrite-target \"/$1\" uses $1")
	refused("strip target, other path", map[string]string{annotation.NginxPrefix + "rewrite-target": "/$2"},
		"/foo", "InvalidIngress", "spec.rules", "capture groups")
	refused("strip target, use-regex, one group", map[string]string{annotation.NginxPrefix + "rewrite-target": "/$2", annotation.NginxPrefix + "use-regex": "true"},
		"/foo/(.*)", "InvalidIngress", "spec.rules", "has 1 capture groups")
	refused("regex path without use-regex", map[string]string{annotation.NginxPrefix + "rewrite-target": "/"},
		"/foo(.*)", "InvalidIngress", "spec.rules", "use-regex")
	refused("regex path outside the subset", map[string]string{annotation.NginxPrefix + "use-regex": "true"},
		"/(a+)+", "InvalidIngress", "spec.rules", "backtrack")
}

// TestHealthChecksByDefault: members are checked unless the Ingress says
// pier.dev/health-check: "false"; with the operator's default off, only
// an Ingress that says "true" is.
func TestHealthChecksByDefault(t *testing.T) {
	off := DefaultOptions()
	off.HealthChecks = false
	for _, c := range []struct {
		name  string
		ann   map[string]string
		opts  Options
		check bool
	}{
		{"default", nil, DefaultOptions(), true},
		{"annotation off", map[string]string{annotation.HealthCheck: "false"}, DefaultOptions(), false},
		{"operator off", nil, off, false},
		{"operator off, annotation on", map[string]string{annotation.HealthCheck: "true"}, off, true},
	} {
		lb := onlyLB(t, Ingresses(snapshotOf(simpleIngress(t, "ns", "a", 0, c.ann, "a.example", "/")), c.opts))
		if got := lb.Pools[0].HealthCheck; got != c.check {
			t.Errorf("%s: pool HealthCheck %v, want %v", c.name, got, c.check)
		}
	}
}

// TestDefaultCertificate: with --default-certificate every Ingress's load
// balancer gets an HTTPS listener whose first certificate is the default
// (an ID of its own, no hosts, not strict), with the Ingress's routes and
// its own certificates after it; force-ssl-redirect without spec.tls
// then needs no warning. Without one, or with one that cannot be used,
// the HTTPS listener is absent and the Ingress that forces the redirect
// is warned, naming the reason.
func TestDefaultCertificate(t *testing.T) {
	force := map[string]string{annotation.NginxPrefix + "force-ssl-redirect": "true"}
	plain := simpleIngress(t, "ns", "a", 0, force, "a.example", "/")
	withTLS := tlsIngress(t, "ns", "b", 1, nil)
	snap := snapshotOf(plain, withTLS)
	snap.Secrets = append(snap.Secrets, tlsSecretFor(t, "ns", "tls", "a.example"), tlsSecretFor(t, "pier-system", "default", "*.example"))
	opts := DefaultOptions()
	opts.DefaultCertificate = "pier-system/default"
	res := Ingresses(snap, opts)
	if len(res.LoadBalancers) != 2 {
		t.Fatalf("load balancers %d, problems %+v", len(res.LoadBalancers), res.Problems)
	}
	for _, lb := range res.LoadBalancers {
		if len(lb.Listeners) != 2 {
			t.Fatalf("%s: %d listeners, want HTTP and HTTPS", lb.Name, len(lb.Listeners))
		}
		l := lb.Listeners[1]
		c := l.Certificates[0]
		if !c.Default || c.Namespace != "pier-system" || c.Secret != "default" || len(c.Hosts) != 0 || l.StrictSNI || len(l.Policies) == 0 {
			t.Errorf("%s: HTTPS listener %+v", lb.Name, l)
		}
		if lb.Name == "ns/b" && (len(l.Certificates) != 2 || l.Certificates[1].Secret != "tls" || l.Certificates[1].ID == c.ID) {
			t.Errorf("ns/b: certificates %+v, want the default then its own", l.Certificates)
		}
	}
	for _, p := range res.Problems {
		if p.Reason == "HTTPSNotServed" {
			t.Errorf("warned with a default certificate: %+v", p)
		}
	}
	for name, ref := range map[string]string{"none": "", "missing": "pier-system/gone"} {
		opts.DefaultCertificate = ref
		res := Ingresses(snap, opts)
		var warned []string
		for _, p := range res.Problems {
			if p.Reason == "HTTPSNotServed" {
				warned = append(warned, p.Name+": "+p.Message)
			}
		}
		if len(warned) != 1 || !strings.HasPrefix(warned[0], "a: ") || (ref != "" && !strings.Contains(warned[0], "pier-system/gone cannot be used: not found")) {
			t.Errorf("%s: warnings %q", name, warned)
		}
		for _, lb := range res.LoadBalancers {
			if lb.Name == "ns/a" && len(lb.Listeners) != 1 {
				t.Errorf("%s: ns/a has %d listeners", name, len(lb.Listeners))
			}
		}
	}
}

func TestParseDefaultCertificate(t *testing.T) {
	for v, ok := range map[string]bool{"": true, "pier-system/default": true, "ns/a.b": true,
		"default": false, "ns/a/b": false, "/a": false, "NS/a": false, "ns/a\n": false} {
		if err := ParseDefaultCertificate(v); (err == nil) != ok {
			t.Errorf("ParseDefaultCertificate(%q) = %v", v, err)
		}
	}
}
