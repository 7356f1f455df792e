package translate

import (
	"reflect"
	"strings"
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"

	"pier.dev/pier/internal/model"
)

// validCompat is one valid value per implemented ingress-nginx
// annotation, chosen so that appending anything makes it invalid (a URL
// without a path: ";evil" lands in its host).
var validCompat = map[string]string{
	"ssl-redirect":              "false",
	"enable-access-log":         "false",
	"force-ssl-redirect":        "true",
	"proxy-body-size":           "8m",
	"proxy-connect-timeout":     "5",
	"proxy-read-timeout":        "60",
	"proxy-send-timeout":        "60",
	"whitelist-source-range":    "10.0.0.0/8, 192.168.0.0/16",
	"allowlist-source-range":    "10.0.0.0/8",
	"denylist-source-range":     "10.6.6.6",
	"permanent-redirect":        "https://new.example",
	"permanent-redirect-code":   "308",
	"temporal-redirect":         "http://tmp.example:8080",
	"temporal-redirect-code":    "307",
	"from-to-www-redirect":      "true",
	"app-root":                  "/app1",
	"upstream-vhost":            "internal.example",
	"enable-cors":               "true",
	"cors-allow-origin":         "https://app.example, http://localhost:3000",
	"cors-allow-methods":        "GET, POST",
	"cors-allow-headers":        "Content-Type,X-Token",
	"cors-allow-credentials":    "false",
	"cors-max-age":              "600",
	"affinity":                  "cookie",
	"backend-protocol":          "GRPCS",
	"affinity-mode":             "persistent",
	"session-cookie-name":       "route_id",
	"session-cookie-path":       "/app",
	"session-cookie-max-age":    "3600",
	"session-cookie-expires":    "172800",
	"session-cookie-samesite":   "Lax",
	"rewrite-target":            "/api/v1.2",
	"use-regex":                 "false",
	"auth-type":                 "basic",
	"auth-secret":               "basic-auth",
	"auth-secret-type":          "auth-map",
	"auth-realm":                "Staff only",
	"limit-rps":                 "10",
	"limit-rpm":                 "600",
	"limit-connections":         "5",
	"service-upstream":          "true",
	"proxy-next-upstream-tries": "3",
	"x-forwarded-prefix":        "/api",
	"canary":                    "true",
	"canary-weight":             "10",
	"canary-weight-total":       "100",
	"canary-by-header":          "X-Canary",
	"canary-by-header-value":    "v2",
	"canary-by-header-pattern":  "^v[23]$",
	"canary-by-cookie":          "canary",
	"default-backend":           "errors",
	"auth-url":                  "http://oauth2-proxy.ns.svc/oauth2/auth",
	"auth-signin":               "https://login.example",
	"auth-response-headers":     "X-Auth-Request-User, X-Auth-Request-Email",
	"auth-method":               "HEAD",
	"proxy-ssl-verify":          "on",
	"proxy-ssl-secret":          "ns/upstream-ca",
	"proxy-ssl-name":            "api.internal.example",
	"proxy-ssl-server-name":     "off",
	"ssl-passthrough":           "true",
	"custom-headers":            "ns/headers",
	"session-cookie-secure":     "true",
	"custom-http-errors":        "404,503",
}

func TestCompatAnnotationsAreAnchored(t *testing.T) {
	if len(validCompat) != len(compatAnnotations) {
		t.Fatalf("validCompat covers %d annotations, compatAnnotations has %d", len(validCompat), len(compatAnnotations))
	}
	for name, valid := range validCompat {
		for _, prefix := range []string{NginxPrefix, AnnotationPrefix} {
			key := prefix + name
			if _, issues := parseAnnotations(map[string]string{key: valid}); hasFatal(issues) {
				t.Errorf("%s=%q refused: %+v", key, valid, issues)
			}
			for _, bad := range []string{valid + ";evil", valid + "\n", valid + "X", " " + valid + "\nhttp-request deny", valid + "'", "", valid + "\x00"} {
				if (name == "app-root" || name == "rewrite-target" || name == "cors-allow-methods" || name == "cors-allow-headers" ||
					name == "session-cookie-name" || name == "session-cookie-path" || name == "auth-secret" || name == "auth-realm" || name == "x-forwarded-prefix" ||
					name == "canary-by-header" || name == "canary-by-header-value" || name == "canary-by-cookie" ||
					name == "default-backend" || name == "auth-url" || name == "auth-response-headers" || name == "proxy-ssl-secret" || name == "custom-headers") && bad == valid+"X" {
					continue // a path, method, header or cookie name with one more letter is another valid one
				}
				if name == "canary-by-header-pattern" && (bad == valid+"X" || bad == valid+";evil" || bad == valid+"'") {
					// A regular expression with more literal characters is
					// another valid one; HAProxy gets it re-written, each
					// punctuation escaped and "'" as \x27, in one word
					// (encode.FuzzValueRegex).
					continue
				}
				if _, issues := parseAnnotations(map[string]string{key: bad}); !hasFatal(issues) {
					t.Errorf("%s=%q accepted", key, bad)
				}
			}
		}
	}
}

func hasFatal(issues []annotationIssue) bool {
	for _, is := range issues {
		if is.fatal {
			return true
		}
	}
	return false
}

func TestCompatParsers(t *testing.T) {
	s, issues := parseAnnotations(map[string]string{
		NginxPrefix + "proxy-body-size":        "1m",
		AnnotationPrefix + "proxy-body-size":   "8k", // pier.dev/ wins
		NginxPrefix + "proxy-read-timeout":     "30",
		NginxPrefix + "proxy-send-timeout":     "90",
		NginxPrefix + "whitelist-source-range": "192.168.0.0/16,10.1.2.3/8, 10.0.0.0/8,::1",
		NginxPrefix + "permanent-redirect":     "https://a.example/x",
		NginxPrefix + "temporal-redirect":      "https://b.example/y",
	})
	if hasFatal(issues) {
		t.Fatal(issues)
	}
	if s.maxBody != 8<<10 || s.readTimeout != 30*time.Second || s.sendTimeout != 90*time.Second {
		t.Errorf("settings %+v", s)
	}
	if got := strings.Join(s.allowSources, ","); got != "10.0.0.0/8,192.168.0.0/16,::1/128" {
		t.Errorf("sources %s", got)
	}
	if !s.sslRedirect || s.permanentCode != 301 || s.temporalCode != 302 {
		t.Errorf("defaults %+v", s)
	}
	if len(issues) != 1 || !strings.Contains(issues[0].message, "temporal-redirect") {
		t.Errorf("want the temporal-wins warning, got %+v", issues)
	}
	for in, want := range map[string]time.Duration{"60": time.Minute, "60s": time.Minute, "500ms": 500 * time.Millisecond, "2m": 2 * time.Minute} {
		if got, err := parseSeconds(in); err != nil || got != want {
			t.Errorf("parseSeconds(%q) = %v, %v", in, got, err)
		}
	}
	for _, bad := range []string{"0", "3601", "2h", "1.5", "-1", "60 s", "0s"} {
		if _, err := parseSeconds(bad); err == nil {
			t.Errorf("parseSeconds(%q) accepted", bad)
		}
	}
	for in, want := range map[string]bool{"True": true, "1": true, "f": false, "FALSE": false} {
		if got, err := parseNginxBool(in); err != nil || got != want {
			t.Errorf("parseNginxBool(%q) = %v, %v", in, got, err)
		}
	}
	for in, want := range map[string]int64{"0": 0, "10": 10, "1K": 1024, "2M": 2 << 20, "1g": 1 << 30, "1024g": 1 << 40} {
		if got, err := parseSize(in); err != nil || got != want {
			t.Errorf("parseSize(%q) = %d, %v", in, got, err)
		}
	}
	for _, bad := range []string{"1025g", "1t", "1.5m", "-1", "+1", "1 m", "m", "99999999999999"} {
		if _, err := parseSize(bad); err == nil {
			t.Errorf("parseSize(%q) accepted", bad)
		}
	}
}

// snippetAnnotations are an Ingress's snippets of every kind, one
// annotation pier does not implement, and one long snippet (never
// parsed: no size refusal).
var snippetAnnotations = map[string]string{
	NginxPrefix + "configuration-snippet": "more_set_headers \"X: y\";",
	NginxPrefix + "server-snippet":        "return 403;",
	NginxPrefix + "auth-snippet":          "x",
	NginxPrefix + "stream-snippet":        "x",
	NginxPrefix + "proxy-set-headers":     "ns/headers",
	NginxPrefix + "server-snippet-long":   strings.Repeat("x", 4096),
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

// TestSnippetAdvice: the refusal names the typed alternative of each
// directive the snippet holds, in order, and repeats none of its text.
func TestSnippetAdvice(t *testing.T) {
	for _, tc := range []struct {
		key, value string
		want       []string
	}{
		{"server-snippet", "location = /ping {\n  deny all;\n}", []string{"for deny use denylist-source-range or whitelist-source-range, or for one path an Ingress of its own for it with denylist-source-range 0.0.0.0/0,::/0"}},
		{"configuration-snippet", `more_set_headers "X-Frame-Options: DENY";`, []string{"for more_set_headers use pier.dev/response-headers (Gateway API: ResponseHeaderModifier)"}},
		{"configuration-snippet", "proxy_set_header X-Evil 1;\nproxy_set_header X-Two 2;", []string{"for proxy_set_header use pier.dev/request-headers"}},
		{"auth-snippet", "auth_request /oauth2/auth;", []string{"for auth_request use auth-url"}},
		{"server-snippet", "client_max_body_size 4G; rewrite ^/x /y;", []string{"for client_max_body_size use proxy-body-size; for rewrite use rewrite-target"}},
		{"modsecurity-snippet", "SecRuleEngine On", []string{"a WAF in front of pier"}},
		{"stream-snippet", "server { listen 9000; }", []string{"use a Service of type LoadBalancer"}},
		{"other-snippet", "unknown_thing;", []string{"use the typed annotations of docs/migration.md"}},
	} {
		msg := snippetRefused(NginxPrefix+tc.key, tc.value)
		for _, w := range tc.want {
			if !strings.Contains(msg, w) {
				t.Errorf("%s %q: %q lacks %q", tc.key, tc.value, msg, w)
			}
		}
		if strings.Contains(msg, "X-Evil") || strings.Contains(msg, "/oauth2") || strings.Count(msg, "proxy_set_header") > 1 {
			t.Errorf("%s: the message repeats the snippet's text or a directive twice: %q", tc.key, msg)
		}
	}
	// Every directive at once: the advice is cut, the message stays short.
	var all strings.Builder
	for _, d := range sortedKeys(directiveAlternatives) {
		all.WriteString(d + " x;\n")
	}
	if msg := snippetRefused(NginxPrefix+"server-snippet", all.String()); len(msg) > 450 || !strings.Contains(msg, "…") {
		t.Errorf("%d bytes: %s", len(msg), msg)
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
		"ssl-redirect false":      {map[string]string{NginxPrefix + "ssl-redirect": "false"}, false, false},
		"force-ssl-redirect":      {map[string]string{NginxPrefix + "force-ssl-redirect": "true"}, true, true},
		"pier.dev/ overrides":     {map[string]string{NginxPrefix + "ssl-redirect": "true", AnnotationPrefix + "ssl-redirect": "false"}, false, false},
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
	group := map[string]string{AnnotationLoadBalancer: "shared"}
	strict := map[string]string{AnnotationLoadBalancer: "shared",
		NginxPrefix + "whitelist-source-range": "10.0.0.0/8", NginxPrefix + "proxy-body-size": "1k",
		NginxPrefix + "proxy-read-timeout": "5"}
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
	ann := map[string]string{NginxPrefix + "from-to-www-redirect": "true"}
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
	group := map[string]string{AnnotationLoadBalancer: "g", NginxPrefix + "from-to-www-redirect": "true"}
	b := simpleIngress(t, "ns", "b", 0, group, "www.site.example", "/")
	c := simpleIngress(t, "ns", "c", 1, map[string]string{AnnotationLoadBalancer: "g"}, "site.example", "/")
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
	group := map[string]string{AnnotationLoadBalancer: "g", NginxPrefix + "proxy-read-timeout": "5"}
	other := map[string]string{AnnotationLoadBalancer: "g", NginxPrefix + "proxy-read-timeout": "120"}
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
	ann := map[string]string{NginxPrefix + "app-root": "/app1", NginxPrefix + "upstream-vhost": "internal.example"}
	lb := onlyLB(t, Ingresses(snapshotOf(simpleIngress(t, "ns", "a", 0, ann, "a.example", "/")), DefaultOptions()))
	o := lb.Listeners[0].Policies[0].Options
	if o == nil || o.AppRoot != "/app1" || o.UpstreamHost != "internal.example" {
		t.Errorf("options %+v", o)
	}
	for _, bad := range []string{"/", "app", "/a?b", "/a%20b", "/a//b"} {
		if _, err := parseAppRoot(bad); err == nil {
			t.Errorf("app-root %q accepted", bad)
		}
	}
}

func TestCORS(t *testing.T) {
	lbOf := func(ann map[string]string) *model.LoadBalancer {
		return onlyLB(t, Ingresses(snapshotOf(simpleIngress(t, "ns", "a", 0, ann, "a.example", "/")), DefaultOptions()))
	}
	// Companions without enable-cors do nothing.
	if o := lbOf(map[string]string{NginxPrefix + "cors-allow-origin": "https://a.example"}).Listeners[0].Policies[0].Options; o != nil {
		t.Errorf("cors-allow-origin alone: options %+v", o)
	}
	// ingress-nginx's defaults.
	o := lbOf(map[string]string{NginxPrefix + "enable-cors": "true"}).Listeners[0].Policies[0].Options
	want := model.CORS{AllowOrigins: []string{"*"}, AllowMethods: defaultCORSMethods, AllowHeaders: defaultCORSHeaders,
		AllowCredentials: true, MaxAgeSeconds: 1728000}
	if o == nil || o.CORS == nil || !reflect.DeepEqual(*o.CORS, want) {
		t.Fatalf("defaults: %+v", o)
	}
	o = lbOf(map[string]string{NginxPrefix + "enable-cors": "true",
		NginxPrefix + "cors-allow-origin":  "https://b.example,https://a.example:8443, https://b.example",
		NginxPrefix + "cors-allow-methods": "GET,POST", NginxPrefix + "cors-allow-headers": "X-Token",
		AnnotationPrefix + "cors-allow-credentials": "false", NginxPrefix + "cors-max-age": "0"}).Listeners[0].Policies[0].Options
	want = model.CORS{AllowOrigins: []string{"https://a.example:8443", "https://b.example"}, AllowMethods: []string{"GET", "POST"},
		AllowHeaders: []string{"X-Token"}}
	if o == nil || o.CORS == nil || !reflect.DeepEqual(*o.CORS, want) {
		t.Fatalf("set: %+v", o.CORS)
	}
	for _, bad := range []string{"https://*.example.com", "https://a.example/", "https://A.example", "ftp://a.example",
		"https://a.example?x", "https://u@a.example", "*, https://a.example", "https://a.example,,", "null",
		"https://a.example'", "https://a.example%20", "https://a.example\\x"} {
		if _, err := parseCORSOrigins(bad); err == nil {
			t.Errorf("cors-allow-origin %q accepted", bad)
		}
	}
	for _, bad := range []string{"get", "GET POST", "GET;", "GET,", "G%T"} {
		if _, err := parseCORSMethods(bad); err == nil {
			t.Errorf("cors-allow-methods %q accepted", bad)
		}
	}
	for _, bad := range []string{"X Token", "X-Token:", "X_Token", "*"} {
		if _, err := parseCORSHeaders(bad); err == nil {
			t.Errorf("cors-allow-headers %q accepted", bad)
		}
	}
	for _, bad := range []string{"-1", "31536001", "1d", "1e3"} {
		if _, err := parseCORSMaxAge(bad); err == nil {
			t.Errorf("cors-max-age %q accepted", bad)
		}
	}
}

func TestAffinity(t *testing.T) {
	poolOf := func(ann map[string]string) *model.Pool {
		lb := onlyLB(t, Ingresses(snapshotOf(simpleIngress(t, "ns", "a", 0, ann, "a.example", "/")), DefaultOptions()))
		return &lb.Pools[0]
	}
	// Companions without affinity: cookie do nothing.
	if a := poolOf(map[string]string{NginxPrefix + "session-cookie-name": "x"}).Affinity; a != nil {
		t.Errorf("session-cookie-name alone: %+v", a)
	}
	for _, tc := range []struct {
		ann  map[string]string
		want model.CookieAffinity
	}{
		{map[string]string{NginxPrefix + "affinity": "cookie"}, model.CookieAffinity{Name: "INGRESSCOOKIE"}},
		{map[string]string{NginxPrefix + "affinity": "cookie", NginxPrefix + "session-cookie-name": "route",
			NginxPrefix + "session-cookie-path": "/", NginxPrefix + "session-cookie-expires": "60"},
			model.CookieAffinity{Name: "route", MaxAgeSeconds: 60}},
		{map[string]string{AnnotationPrefix + "affinity": "cookie", NginxPrefix + "session-cookie-path": "/app",
			NginxPrefix + "session-cookie-expires": "60", NginxPrefix + "session-cookie-max-age": "120",
			NginxPrefix + "session-cookie-samesite": "Strict"},
			model.CookieAffinity{Name: "INGRESSCOOKIE", Path: "/app", MaxAgeSeconds: 120, SameSite: "Strict"}},
		{map[string]string{NginxPrefix + "affinity": "cookie", NginxPrefix + "session-cookie-secure": "true"},
			model.CookieAffinity{Name: "INGRESSCOOKIE", Secure: model.CookieSecureAlways}},
		{map[string]string{NginxPrefix + "affinity": "cookie", AnnotationPrefix + "session-cookie-secure": "False"},
			model.CookieAffinity{Name: "INGRESSCOOKIE", Secure: model.CookieSecureNever}},
	} {
		if a := poolOf(tc.ann).Affinity; a == nil || *a != tc.want {
			t.Errorf("%v: %+v, want %+v", tc.ann, a, tc.want)
		}
	}
	for _, bad := range []string{"", "route;evil", "a b", "a=b", "a.b", strings.Repeat("a", 65)} {
		if _, err := parseCookieName(bad); err == nil {
			t.Errorf("session-cookie-name %q accepted", bad)
		}
	}
	for _, bad := range []string{"app", "/a;b", "/a b", "/a%20b", "//a", "/a,b"} {
		if _, err := parseCookiePath(bad); err == nil {
			t.Errorf("session-cookie-path %q accepted", bad)
		}
	}
	for _, bad := range []string{"0", "-1", "1h", "315360001"} {
		if _, err := parseCookieAge(bad); err == nil {
			t.Errorf("cookie age %q accepted", bad)
		}
	}
	for _, bad := range []string{"balanced", "Cookie", "ip"} {
		if _, err := parseAffinity(bad); err == nil {
			t.Errorf("affinity %q accepted", bad)
		}
	}
	if _, err := parseSameSite("lax"); err == nil {
		t.Error("samesite lax accepted")
	}
}

func TestAffinityConflictWarnsTheNewer(t *testing.T) {
	old := map[string]string{AnnotationLoadBalancer: "g", NginxPrefix + "affinity": "cookie"}
	other := map[string]string{AnnotationLoadBalancer: "g", NginxPrefix + "affinity": "cookie", NginxPrefix + "session-cookie-name": "b"}
	none := map[string]string{AnnotationLoadBalancer: "g"}
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
			map[string]string{NginxPrefix + "backend-protocol": v}, "a.example", "/")), DefaultOptions()))
		if got := lb.Pools[0].Protocol; got != want {
			t.Errorf("%s: %q, want %q", v, got, want)
		}
	}
	for _, bad := range []string{"Https", "H2C", "HTTP2", "grpc ", "GRPC;evil", "AJP", "ajp", "FCGI", "AUTO_HTTP", ""} {
		if _, err := parseBackendProtocol(bad); err == nil {
			t.Errorf("backend-protocol %q accepted", bad)
		}
	}
	if _, err := parseBackendProtocol("AJP"); err == nil || !strings.Contains(err.Error(), "HTTP connector") {
		t.Errorf("AJP refused without the reason: %v", err)
	}
	_, issues := parseAnnotations(map[string]string{NginxPrefix + "backend-protocol": "FCGI"})
	if !hasFatal(issues) {
		t.Errorf("FCGI does not refuse the Ingress: %+v", issues)
	}
}

func TestBackendProtocolConflictWarnsTheNewer(t *testing.T) {
	old := map[string]string{AnnotationLoadBalancer: "g", NginxPrefix + "backend-protocol": "HTTPS"}
	other := map[string]string{AnnotationLoadBalancer: "g", NginxPrefix + "backend-protocol": "GRPC"}
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
	for _, key := range []string{NginxPrefix + "rewrite-target", AnnotationPrefix + "rewrite-target"} {
		o := onlyLB(t, lbOf(map[string]string{key: "/"}, "/foo")).Listeners[0].Policies[0].Options
		if o == nil || o.RewritePath != "/" {
			t.Errorf("%s: options %+v", key, o)
		}
	}
	// use-regex false changes nothing; use-regex alone makes the path a
	// regular expression, without options.
	o := onlyLB(t, lbOf(map[string]string{NginxPrefix + "rewrite-target": "/api/", NginxPrefix + "use-regex": "false"}, "/foo")).
		Listeners[0].Policies[0].Options
	if o == nil || o.RewritePath != "/api/" {
		t.Errorf("use-regex false: options %+v", o)
	}
	lb := onlyLB(t, lbOf(map[string]string{NginxPrefix + "use-regex": "true"}, "/foo"))
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
	refused("use-regex invalid", map[string]string{NginxPrefix + "rewrite-target": "/", NginxPrefix + "use-regex": "yes;evil"},
		"/foo", "InvalidAnnotation", "use-regex", "use-regex")
	refused("capture group, no group in the path", map[string]string{NginxPrefix + "rewrite-target": "/$1"},
		"/foo", "InvalidIngress", "spec.rules", "spec.rules[0].http.paths[0]: path \"/foo\" has 0 capture groups, rewrite-target \"/$1\" uses $1")
	refused("strip target, other path", map[string]string{NginxPrefix + "rewrite-target": "/$2"},
		"/foo", "InvalidIngress", "spec.rules", "capture groups")
	refused("strip target, use-regex, one group", map[string]string{NginxPrefix + "rewrite-target": "/$2", NginxPrefix + "use-regex": "true"},
		"/foo/(.*)", "InvalidIngress", "spec.rules", "has 1 capture groups")
	refused("regex path without use-regex", map[string]string{NginxPrefix + "rewrite-target": "/"},
		"/foo(.*)", "InvalidIngress", "spec.rules", "use-regex")
	refused("regex path outside the subset", map[string]string{NginxPrefix + "use-regex": "true"},
		"/(a+)+", "InvalidIngress", "spec.rules", "backtrack")
	for _, bad := range []string{"", "api", "/a?b=1", "/a%20b", "/a//b", "/a/../b", "/a;evil", "/a b", "/a'b",
		"/a\nb", "https://x.example/", "/a\\b", "/a%[src]", "$2", "/a/$2;evil", "/a;evil/$2", "/$0", "/$", "/$a", "/$1%[src]", "/$1'"} {
		if _, _, _, err := parseRewriteTarget(bad); err == nil {
			t.Errorf("rewrite-target %q accepted", bad)
		}
	}
	for _, tc := range []struct {
		in     string
		tail   bool
		groups int
	}{{"/$1", false, 1}, {"/a/$2", true, 2}, {"/a$2", false, 2}, {"/$1/$3", false, 3}, {"/$2$2", false, 2}, {"/x", false, 0}} {
		_, tail, groups, err := parseRewriteTarget(tc.in)
		if err != nil || tail != tc.tail || groups != tc.groups {
			t.Errorf("rewrite-target %q: tail %v groups %d err %v", tc.in, tail, groups, err)
		}
	}
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
		{"annotation off", map[string]string{AnnotationHealthCheck: "false"}, DefaultOptions(), false},
		{"operator off", nil, off, false},
		{"operator off, annotation on", map[string]string{AnnotationHealthCheck: "true"}, off, true},
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
	force := map[string]string{NginxPrefix + "force-ssl-redirect": "true"}
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
