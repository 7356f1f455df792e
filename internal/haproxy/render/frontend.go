package render

import (
	"pier.dev/pier/internal/encode"
	"pier.dev/pier/internal/haproxy/layout"
)

// Short names for the words every frontend repeats.
var (
	httpRequest = encode.Lit("http-request")
	ifWord      = encode.Lit("if")
	openBrace   = encode.Lit("{")
	closeBrace  = encode.Lit("}")
	matchVar    = encode.Lit("var(txn.pier_match)")
)

// foreignBind lets every bind take an address the node does not hold:
// the standby of a pair runs the same configuration hot, and without it
// its HAProxy would not start at all ("cannot bind socket (Cannot assign
// requested address)"). HAProxy 2.6 has no "freebind" keyword (haproxy
// -c: unknown keyword); "transparent" asks the kernel for IP_TRANSPARENT
// and, without CAP_NET_ADMIN, falls back to IP_FREEBIND. Either only
// allows the bind: with no TPROXY rule nothing is intercepted, and a
// client reaches the listener once VRRP puts the address on the node.
// It is always on: on an address the node holds (127.0.0.1 in pier run)
// it changes nothing, so an option would only be a way to break the pair.
var foreignBind = encode.Lit("transparent")

// writeFrontend renders one listener. Routing is first match wins, in
// policy order, for REJECT and REDIRECT_TO_POOL alike: HAProxy runs every
// http-request rule before any use_backend, so a reject placed there
// would win over earlier policies. Instead each policy, in order, records
// its position in txn.pier_match unless an earlier one already did, and
// both the deny rules and use_backend only test that number.
func writeFrontend(c *encode.Config, v *view, l *listenerView, at layout.LB) {
	c.Blank()
	c.Section(encode.Lit("frontend"), frontendName(v.uuid, l.port))
	for _, addr := range frontendBinds(v, l) {
		words := append([]encode.Word{encode.Lit("bind")}, addr...)
		if l.tls {
			words = append(words, encode.Lit("ssl"), encode.Lit("crt-list"), encode.FilePath(v.crtListPath))
			if l.strictSNI {
				words = append(words, encode.Lit("strict-sni"))
			}
			words = append(words, clientVerifyWords(l)...)
			// HTTP/2 is offered where something needs it: the misdirected
			// request check (a client that coalesces connections does so
			// over h2) and gRPC. Elsewhere HTTP/1.1 alone keeps the drain's
			// Connection: close working (drain.go). The ALPN is named on
			// every TLS bind: HAProxy 2.8 and later offer h2 on a bind
			// that names none, 2.6 does not, and a listener should not
			// change protocol with the binary it runs on.
			alpn := encode.Lit("http/1.1")
			if len(l.misdirect) > 0 || l.grpc {
				alpn = encode.Lit("h2,http/1.1")
			}
			words = append(words, encode.Lit("alpn"), alpn)
		}
		c.Line(words...)
	}
	writeAccessLog(c, v.accessLog, v.logSocket)
	// HAProxy 2.6 accepts and forwards NUL and the other control bytes
	// inside a header value (test/rawhttp pins it); a backend that stops
	// at a NUL or splits at a VT or FF would see other headers than our
	// rules did. req.hdrs is "name: value" lines joined by CRLF, so it
	// holds a control byte other than HTAB, CR and LF exactly when a value
	// carries one (RFC 9110 5.5: reject). PCRE2 matches the sample by its
	// length, NUL included, and the class is single-quoted so that PCRE2,
	// not HAProxy's parser, reads the \x escapes. One character class
	// over the raw block costs a fraction of the hex-encoded form pier
	// used before (docs/benchmarks.md, "6. Routing").
	c.Line(httpRequest, encode.Lit("deny"), encode.Lit("deny_status"), encode.Num(400), ifWord,
		openBrace, encode.Lit("req.hdrs"), encode.Lit("-m"), encode.Lit("reg"),
		encode.Lit(`[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]`), closeBrace)
	proto := encode.Lit("http")
	if l.tls {
		proto = encode.Lit("https")
	}
	writeForwarding(c, proto, l.port, v.trusted)
	captureRequestID(c, v.accessLog)
	refuseAmbiguous(c, l)
	hostVars(c, l)
	writeMisdirect(c, l)
	if l.routes != nil {
		writeRoutes(c, l, at)
	} else {
		policies(c, v.uuid, l)
	}
	if l.defaultPool != "" {
		c.Line(encode.Lit("default_backend"), backendName(v.uuid, l.defaultPool))
	} else {
		c.Line(encode.Lit("default_backend"), notFoundName(v.uuid))
	}
	// http-after-response also covers HAProxy's own answers (404, 403,
	// 503), which http-response does not. A backend's Server is kept.
	// add-header, not set-header: the condition already says there is no
	// Server header, so set-header's search for one to delete would only
	// cost time (docs/benchmarks.md, "The extras, priced").
	c.Line(encode.Lit("http-after-response"), encode.Lit("add-header"), encode.Lit("Server"), encode.Lit("pier"),
		encode.Lit("unless"), openBrace, encode.Lit("res.hdr_cnt(server)"), encode.Lit("gt"), encode.Num(0), closeBrace)
	drainRule(c)
}

// refuseAmbiguous answers 400 to a request whose host or path a backend
// could read otherwise than pier's routing does, so that no request
// reaches a rule it was not routed by:
//
//   - no Host header, unless HTTP/1.0 in origin form. HAProxy 2.6 routes
//     an HTTP/1.1 request without Host, or an absolute-form one
//     ("GET http://victim.example/"), with an empty host, which only the
//     host-less rules match: another tenant's catch-all would take a
//     request meant for a named host. RFC 9112 3.2 asks for a 400 anyway.
//   - a path with an empty or dot segment ("//admin", "/x/../admin") or
//     a percent-encoded unreserved character or slash ("/%61dmin"):
//     matching is on the raw path, and a backend that normalises it would
//     serve a path a more specific rule was meant to guard. nginx
//     normalises such paths; HAProxy 2.6's normalize-uri is still
//     experimental, so pier refuses them. Only a path holding "%" pays
//     for the regular expression.
//   - where the path decides between rules (pathScoped), a path that
//     some backends read as another: a ';' (Tomcat, Jetty and Spring drop
//     a segment's ";parameters", so "/admin;x" and "/x/..;/admin" are
//     "/admin" to them), a '\' (IIS and some Windows servers read it as
//     '/'), and the escapes "%25" (a backend or proxy that decodes twice
//     reads "/%2561dmin" as "/admin"), "%3b" and "%5c". Each would reach
//     the backend of a catch-all rule with a path that a more specific
//     rule (whitelist-source-range, auth) was meant to guard. Where no
//     rule is scoped to a path, nothing can be bypassed this way, and a
//     ";jsessionid=" of an old Java application still passes.
func refuseAmbiguous(c *encode.Config, l *listenerView) {
	if l.needHost {
		// "unless Host, or HTTP/1.0 in origin form" is "if no Host and
		// (not 1.0 or not origin form)" with the Host lookup once: a
		// request with a Host, nearly all of them, costs one header search,
		// not two as the spelled-out "!A !B || !A !C" did.
		c.Line(httpRequest, encode.Lit("deny"), encode.Lit("deny_status"), encode.Num(400), encode.Lit("unless"),
			openBrace, encode.Lit("req.hdr(host)"), encode.Lit("-m"), encode.Lit("found"), closeBrace, encode.Lit("||"),
			openBrace, encode.Lit("req.ver"), encode.Lit("1.0"), closeBrace,
			openBrace, encode.Lit("url_beg"), encode.Lit("/"), closeBrace)
	}
	if len(l.policies) > 0 {
		c.Line(httpRequest, encode.Lit("deny"), encode.Lit("deny_status"), encode.Num(400), ifWord,
			openBrace, encode.Lit("path"), encode.Lit("-m"), encode.Lit("sub"), encode.Lit("//"), encode.Lit("/./"), encode.Lit("/../"), closeBrace, encode.Lit("||"),
			openBrace, encode.Lit("path"), encode.Lit("-m"), encode.Lit("end"), encode.Lit("/."), encode.Lit("/.."), closeBrace, encode.Lit("||"),
			openBrace, encode.Lit("path"), encode.Lit("-m"), encode.Lit("sub"), encode.Lit("%"), closeBrace,
			openBrace, encode.Lit("path"), encode.Lit("-m"), encode.Lit("reg"), encode.Lit("-i"),
			encode.Lit("%(?:2[def]|3[0-9]|[46][1-9a-f]|[57][0-9a]|5f|7e)"), closeBrace)
	}
	if l.pathScoped {
		c.Line(httpRequest, encode.Lit("deny"), encode.Lit("deny_status"), encode.Num(400), ifWord,
			openBrace, encode.Lit("path"), encode.Lit("-m"), encode.Lit("sub"), encode.Lit(";"), encode.Lit(`\`), closeBrace, encode.Lit("||"),
			openBrace, encode.Lit("path"), encode.Lit("-m"), encode.Lit("sub"), encode.Lit("-i"), encode.Lit("%25"), encode.Lit("%3b"), encode.Lit("%5c"), closeBrace)
	}
}

// hostVars computes the request host once: Host header, port stripped,
// lowercased, one trailing dot removed ("victim.example." names the same
// host as "victim.example"; without this it fell to the host-less rules).
// For wildcard rules, txn.pier_hwild replaces a non-empty first label and
// its dot by "*.": "bar.foo.com" gives "*.foo.com", which equals the rule
// "*.foo.com"; "baz.bar.foo.com" gives "*.bar.foo.com" and "foo.com" gives
// "*.com", which do not.
func hostVars(c *encode.Config, l *listenerView) {
	switch {
	case l.needHost && l.routes != nil:
		// A "/" in the host would let it forge a map key (routes.go).
		c.Line(httpRequest, encode.Lit("set-var(txn.pier_host)"), encode.Lit("req.hdr(host),field(1,:),lower"),
			ifWord, encode.Lit("!{"), encode.Lit("req.hdr(host)"), encode.Lit("-m"), encode.Lit("sub"), encode.Lit("/"), closeBrace)
	case l.needHost:
		c.Line(httpRequest, encode.Lit("set-var(txn.pier_host)"), encode.Lit("req.hdr(host),field(1,:),lower"))
	}
	if l.needHost {
		// -m end first: only such hosts pay for the regular expression.
		c.Line(httpRequest, encode.Lit("set-var(txn.pier_host)"), encode.Lit("var(txn.pier_host),regsub([.]$,)"),
			ifWord, openBrace, encode.Lit("var(txn.pier_host)"), encode.Lit("-m"), encode.Lit("end"), encode.Lit("."), closeBrace)
	}
	if l.needWild {
		c.Line(httpRequest, encode.Lit("set-var(txn.pier_hwild)"), encode.Lit("var(txn.pier_host),regsub(^[^.]+[.],*.)"))
	}
}

func policies(c *encode.Config, uuid string, l *listenerView) {
	if len(l.policies) == 0 {
		return
	}
	c.Line(encode.Lit("acl"), encode.Lit("pier_matched"), matchVar, encode.Lit("-m"), encode.Lit("found"))
	for _, p := range l.policies {
		for _, acl := range p.acls {
			c.Line(acl...)
		}
	}
	for i, p := range l.policies {
		words := []encode.Word{httpRequest, encode.Lit("set-var(txn.pier_match)"),
			encode.Concat(encode.Lit("int("), encode.Num(i+1), encode.Lit(")")), ifWord, encode.Lit("!pier_matched")}
		c.Line(append(words, p.names...)...)
	}
	matched := func(i int) []encode.Word {
		return []encode.Word{ifWord, openBrace, matchVar, encode.Lit("-m"), encode.Lit("int"), encode.Num(i + 1), closeBrace}
	}
	for i, p := range l.policies {
		if p.profile != nil {
			c.Line(append([]encode.Word{httpRequest, encode.Lit("set-var(txn.pier_prof)"),
				encode.Concat(encode.Lit("str("), encode.ID("", p.profile.id), encode.Lit(")"))}, matched(i)...)...)
		}
	}
	for i, p := range l.policies {
		switch {
		case p.reject:
			c.Line(append([]encode.Word{httpRequest, encode.Lit("deny"), encode.Lit("deny_status"), encode.Num(403)}, matched(i)...)...)
		case p.status != 0:
			c.Line(append([]encode.Word{httpRequest, encode.Lit("deny"), encode.Lit("deny_status"), encode.Num(p.status)}, matched(i)...)...)
		}
	}
	// Before use_backend: HAProxy warns about (and runs first anyway)
	// http-request rules placed after it.
	writeProfiles(c, l.profiles)
	writeFallbackBackend(c, l.profiles)
	writeCanaryBackend(c, l.profiles)
	writeSplitBackend(c, l.profiles)
	for i, p := range l.policies {
		if !p.reject && p.status == 0 {
			c.Line(append([]encode.Word{encode.Lit("use_backend"), backendName(uuid, p.pool)}, matched(i)...)...)
		}
	}
}
