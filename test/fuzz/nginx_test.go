package fuzz

import (
	"slices"
	"strings"
	"testing"

	"pier.dev/pier/internal/annotation"
	"pier.dev/pier/internal/encode"
	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/translate"
)

// FuzzNginxAnnotationsToConfig is FuzzIngressToConfig's property for the
// ingress-nginx annotations: two of them, picked by index
// under either prefix, with fuzzed values, on an Ingress with TLS (so
// ssl-redirect is on). The attacker is refused with an Error problem, or
// every rendered line tokenises into plain words; the victim's files
// never change.
func FuzzNginxAnnotationsToConfig(f *testing.F) {
	names := annotation.NginxAnnotations()
	good := map[string]string{"ssl-redirect": "true", "force-ssl-redirect": "true", "proxy-body-size": "8m",
		"proxy-connect-timeout": "5", "proxy-read-timeout": "60", "proxy-send-timeout": "60",
		"whitelist-source-range": "10.0.0.0/8", "allowlist-source-range": "10.0.0.0/8, ::1",
		"denylist-source-range": "10.6.6.6", "permanent-redirect": "https://new.example/a%20b",
		"permanent-redirect-code": "308", "temporal-redirect": "http://t.example/", "temporal-redirect-code": "307",
		"from-to-www-redirect": "true", "app-root": "/app1", "upstream-vhost": "internal.example",
		"enable-cors": "true", "cors-allow-origin": "https://app.example, http://localhost:3000",
		"cors-allow-methods": "GET, POST", "cors-allow-headers": "Content-Type", "cors-allow-credentials": "true",
		"cors-max-age": "600", "affinity": "cookie", "affinity-mode": "balanced", "session-cookie-name": "route_id",
		"session-cookie-path": "/app", "session-cookie-max-age": "3600", "session-cookie-expires": "60",
		"session-cookie-samesite": "None", "backend-protocol": "GRPCS", "rewrite-target": "/api/v1.2", "use-regex": "false",
		"auth-type": "basic", "auth-secret": "basic-auth", "auth-secret-type": "auth-file", "auth-realm": "Staff only",
		"limit-rps": "10", "limit-rpm": "600", "limit-connections": "5",
		"service-upstream": "true", "proxy-next-upstream-tries": "3", "x-forwarded-prefix": "/api",
		"canary": "true", "canary-weight": "10", "canary-weight-total": "100", "canary-by-header": "X-Canary",
		"canary-by-header-value": "v2", "canary-by-header-pattern": "^v[23]$|beta", "canary-by-cookie": "canary", "default-backend": attackerErrorsName,
		"auth-url": "http://web." + attackerNS + ".svc/oauth2/auth", "auth-signin": "https://login.example/start",
		"auth-response-headers": "X-Auth-Request-User, X-Auth-Request-Email", "auth-method": "HEAD",
		"proxy-ssl-verify": "on", "proxy-ssl-secret": "upstream", "proxy-ssl-name": "api.internal",
		"proxy-ssl-server-name": "on", "ssl-passthrough": "true", "custom-headers": "headers", "session-cookie-secure": "false"}
	for i, name := range names {
		v := good[name]
		f.Add(uint8(i), v, uint8(i+1), good[names[(i+1)%len(names)]])
		for _, suffix := range []string{";evil", "\n    http-request return status 200", "' if TRUE #", "$HOME", "%[src]"} {
			f.Add(uint8(i), v+suffix, uint8(i+128), v)
		}
	}
	// A CORS companion is rendered only beside enable-cors: pair them.
	enable := uint8(slices.Index(names, "enable-cors"))
	for i, name := range names {
		if strings.HasPrefix(name, "cors-") {
			for _, suffix := range []string{"", ";evil", "\n    http-request return status 200", "' if TRUE #", "%[src]", ",https://*.evil"} {
				f.Add(uint8(i), good[name]+suffix, enable, "true")
			}
		}
	}
	// A session-cookie-* companion is rendered only beside affinity: cookie.
	affinity := uint8(slices.Index(names, "affinity"))
	for i, name := range names {
		if strings.HasPrefix(name, "session-cookie-") {
			for _, suffix := range []string{"", ";evil", "\n    http-request return status 200", "' if TRUE #", "%[src]", " attr x", "=1; Domain=evil"} {
				f.Add(uint8(i), good[name]+suffix, affinity, "cookie")
			}
		}
	}
	// rewrite-target beside use-regex (capture groups need as many in the
	// path, which is "/"), and the
	// capture-group and log-format forms a target must not carry.
	regex := uint8(slices.Index(names, "use-regex"))
	rewrite := uint8(slices.Index(names, "rewrite-target"))
	for _, v := range []string{"/", "/api/", "/$1", "/$2", "/v2/$2", "/v2$2", "/$2;evil", "/x/$1", "/$1;evil", "/$1%[src]", "/$1'", "/$3$1", "/%[src]/$2", "/\\2/$2", "/%[src]", "/a?b=1", "/a\\b", "https://evil.example/", "/a;evil"} {
		f.Add(rewrite, v, regex, "true")
		f.Add(rewrite, v, regex+128, "false")
	}
	// Basic auth: auth-type basic beside auth-secret (the attacker's
	// Secret exists), and each companion beside auth-type.
	authType := uint8(slices.Index(names, "auth-type"))
	for i, name := range names {
		if strings.HasPrefix(name, "auth-") && name != "auth-type" {
			for _, suffix := range []string{"", ";evil", "\n    http-request return status 200", "' if TRUE #", "%[src]", "\" x", "/../x"} {
				f.Add(uint8(i), good[name]+suffix, authType, "basic")
			}
		}
	}
	// A canary companion beside canary "true".
	canary := uint8(slices.Index(names, "canary"))
	for i, name := range names {
		if strings.HasPrefix(name, "canary-") {
			for _, suffix := range []string{"", ";evil", "\n    http-request return status 200", "' if TRUE #", "%[src]", ")", " || 1"} {
				f.Add(uint8(i), good[name]+suffix, canary, "true")
			}
		}
	}
	// External auth: each companion beside auth-url, and the auth-url
	// forms that must be refused (another namespace, https, a query).
	authURL := uint8(slices.Index(names, "auth-url"))
	for i, name := range names {
		if name == "auth-signin" || name == "auth-response-headers" || name == "auth-method" {
			for _, suffix := range []string{"", ";evil", "\n    http-request return status 200", "' if TRUE #", "%[src]", ",X-B", "?rd=$host"} {
				f.Add(uint8(i), good[name]+suffix, authURL, good["auth-url"])
			}
		}
	}
	for _, v := range []string{"http://web.victim.svc/a", "https://web." + attackerNS + ".svc/a", "http://web." + attackerNS + ".svc/a?x=1",
		"http://web." + attackerNS + ".svc:0/a", "http://10.0.0.1/a", "http://web." + attackerNS + ".svc/%[src]", "http://web." + attackerNS + ".svc/a' b"} {
		f.Add(authURL, v, uint8(slices.Index(names, "limit-rps")), "5")
	}
	// default-backend to the attacker's second Service, and the forms a
	// Service name must not take.
	backend := uint8(slices.Index(names, "default-backend"))
	for _, v := range []string{attackerErrorsName, "web", "missing", "victim/web", "../errors", "errors)", "ERRORS"} {
		f.Add(backend, v, uint8(slices.Index(names, "limit-rps")), "5")
	}
	// proxy-ssl-* beside backend-protocol HTTPS (the attacker's Secret
	// exists), and ssl-passthrough beside each.
	protocol := uint8(slices.Index(names, "backend-protocol"))
	passthrough := uint8(slices.Index(names, "ssl-passthrough"))
	for i, name := range names {
		if strings.HasPrefix(name, "proxy-ssl-") {
			for _, suffix := range []string{"", ";evil", "\n    http-request return status 200", "' if TRUE #", "%[src]", ") crt /etc/shadow", " verify none"} {
				f.Add(uint8(i), good[name]+suffix, protocol, "HTTPS")
				f.Add(uint8(i), good[name]+suffix, passthrough, "true")
			}
		}
	}
	for _, row := range badInputs() {
		if row.field != "path" && row.field != "host" {
			f.Add(uint8(7), row.in, uint8(9), row.in)
		}
	}
	baseline := victimFiles(f, translate.Ingresses(snapshot(f, nil), translateOptions()))
	f.Fuzz(func(t *testing.T, k1 uint8, v1 string, k2 uint8, v2 string) {
		a := valid()
		a.tlsHost = a.host
		a.extra = map[string]string{}
		for _, kv := range []struct {
			k uint8
			v string
		}{{k1, v1}, {k2, v2}} {
			prefix := annotation.NginxPrefix
			if kv.k >= 128 {
				prefix = annotation.Prefix
			}
			a.extra[prefix+names[int(kv.k)%len(names)]] = kv.v
			if strings.HasSuffix(kv.v, "$2") {
				a.path = "/app(/|$)(.*)" // the path form a prefix-strip target needs
			}
			if strings.HasSuffix(kv.v, "$1") {
				a.path = "/api/v[0-9]+/(.*)" // a regular-expression path with one group
			}
		}
		checkAttack(t, &a, baseline)
	})
}

// FuzzHeaderAnnotationsToConfig is the same property for pier's typed
// header annotations, pier.dev/request-headers and -response-headers:
// the attacker is refused, or every rendered line tokenises into plain
// words; the victim's files never change.
func FuzzHeaderAnnotationsToConfig(f *testing.F) {
	for _, v := range []string{"X-A: b", "X-A: b\n-Server\n", "X-A;evil: b", "X-A: b\r\nX-Evil: c",
		"X-A: b\n    http-request return status 200", "X-A: ' if TRUE #", "X-A: %[src]", "-Host", "Set-Cookie: a=b; Path=/",
		// The longest value a header may carry (encode.MaxHeaderValueLen)
		// makes a line longer than HAProxy's first read buffer.
		"X-B: " + strings.Repeat("6", 4096)} {
		f.Add(v, "X-B: c")
		f.Add("X-B: c", v)
	}
	baseline := victimFiles(f, translate.Ingresses(snapshot(f, nil), translateOptions()))
	f.Fuzz(func(t *testing.T, req, res string) {
		a := valid()
		a.tlsHost = a.host
		a.extra = map[string]string{annotation.RequestHeaders: req, annotation.ResponseHeaders: res}
		checkAttack(t, &a, baseline)
		checkHeaderValuesIntact(t, &a)
	})
}

// checkHeaderValuesIntact: every header the attacker's accepted
// annotations set is one line of its load balancer's config whose last
// word, as HAProxy's tokenizer reads it, is the value with each '%'
// doubled (log-format's literal '%').
func checkHeaderValuesIntact(t *testing.T, a *attack) {
	t.Helper()
	res := translate.Ingresses(snapshot(t, a), translateOptions())
	uuid, ok := res.Accepted[model.IngressRef(attackerNS, "evil")]
	if !ok {
		return
	}
	for _, lb := range res.LoadBalancers {
		if lb.UUID != uuid {
			continue
		}
		r := renderAll(&translate.Result{LoadBalancers: []*model.LoadBalancer{lb}})[uuid]
		if r.err != nil {
			t.Fatalf("render: %v", r.err)
		}
		lines := checkLines(t, r.cfg)
		for _, l := range lb.Listeners {
			for _, p := range l.Policies {
				if p.Options == nil {
					continue
				}
				for _, op := range append(slices.Clone(p.Options.RequestHeaders), p.Options.ResponseHeaders...) {
					if op.Op != model.HeaderSet {
						continue
					}
					want := strings.ReplaceAll(op.Value, "%", "%%")
					if !slices.ContainsFunc(lines, func(ws []string) bool {
						return len(ws) >= 4 && ws[1] == "set-header" && ws[2] == op.Name && ws[3] == want
					}) {
						t.Fatalf("no set-header line carries %s %s intact", op.Name, encode.Printable(op.Value))
					}
				}
			}
		}
	}
}
