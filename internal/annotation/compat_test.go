package annotation

import (
	"maps"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestAppRootParser: app-root refuses a path that is not a plain
// application root.
func TestAppRootParser(t *testing.T) {
	for _, bad := range []string{"/", "app", "/a?b", "/a%20b", "/a//b"} {
		if _, err := parseAppRoot(bad); err == nil {
			t.Errorf("app-root %q accepted", bad)
		}
	}
}

// TestCORSParsers: the cors-* parsers refuse what the policy could not
// say exactly.
func TestCORSParsers(t *testing.T) {
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

// TestAffinityParsers: affinity and the session-cookie-* parsers refuse
// what HAProxy's cookie cannot hold.
func TestAffinityParsers(t *testing.T) {
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

// TestBackendProtocolParser: backend-protocol refuses unknown
// protocols, and says why for the ones pier declines.
func TestBackendProtocolParser(t *testing.T) {
	for _, bad := range []string{"Https", "H2C", "HTTP2", "grpc ", "GRPC;evil", "AJP", "ajp", "FCGI", "AUTO_HTTP", ""} {
		if _, err := parseBackendProtocol(bad); err == nil {
			t.Errorf("backend-protocol %q accepted", bad)
		}
	}
	if _, err := parseBackendProtocol("AJP"); err == nil || !strings.Contains(err.Error(), "HTTP connector") {
		t.Errorf("AJP refused without the reason: %v", err)
	}
}

// TestRewriteTargetParser: rewrite-target accepts plain paths and $N
// targets only, and counts the groups.
func TestRewriteTargetParser(t *testing.T) {
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

func TestCompatAnnotationsAreAnchored(t *testing.T) {
	if len(validCompat) != len(compatAnnotations) {
		t.Fatalf("validCompat covers %d annotations, compatAnnotations has %d", len(validCompat), len(compatAnnotations))
	}
	for name, valid := range validCompat {
		for _, prefix := range []string{NginxPrefix, Prefix} {
			key := prefix + name
			if _, issues := Parse(map[string]string{key: valid}); hasFatal(issues) {
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
				if _, issues := Parse(map[string]string{key: bad}); !hasFatal(issues) {
					t.Errorf("%s=%q accepted", key, bad)
				}
			}
		}
	}
}

func TestCompatParsers(t *testing.T) {
	s, issues := Parse(map[string]string{
		NginxPrefix + "proxy-body-size":        "1m",
		Prefix + "proxy-body-size":             "8k", // pier.dev/ wins
		NginxPrefix + "proxy-read-timeout":     "30",
		NginxPrefix + "proxy-send-timeout":     "90",
		NginxPrefix + "whitelist-source-range": "192.168.0.0/16,10.1.2.3/8, 10.0.0.0/8,::1",
		NginxPrefix + "permanent-redirect":     "https://a.example/x",
		NginxPrefix + "temporal-redirect":      "https://b.example/y",
	})
	if hasFatal(issues) {
		t.Fatal(issues)
	}
	if s.MaxBody != 8<<10 || s.ReadTimeout != 30*time.Second || s.SendTimeout != 90*time.Second {
		t.Errorf("settings %+v", s)
	}
	if got := strings.Join(s.AllowSources, ","); got != "10.0.0.0/8,192.168.0.0/16,::1/128" {
		t.Errorf("sources %s", got)
	}
	if !s.SSLRedirect || s.PermanentCode != 301 || s.TemporalCode != 302 {
		t.Errorf("defaults %+v", s)
	}
	if len(issues) != 1 || !strings.Contains(issues[0].Message, "temporal-redirect") {
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
	for _, d := range slices.Sorted(maps.Keys(directiveAlternatives)) {
		all.WriteString(d + " x;\n")
	}
	if msg := snippetRefused(NginxPrefix+"server-snippet", all.String()); len(msg) > 450 || !strings.Contains(msg, "…") {
		t.Errorf("%d bytes: %s", len(msg), msg)
	}
}

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

// hasFatal is whether any of issues refuses the Ingress.
func hasFatal(issues []Issue) bool {
	for _, is := range issues {
		if is.Fatal {
			return true
		}
	}
	return false
}
