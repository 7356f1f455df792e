package fuzz

import "strings"

// badRow is one hostile payload (row names the kind of attack) and the
// field it targets.
type badRow struct{ row, field, in string }

// badInputs are the injection payloads. The 1 MiB path is left to
// TestHugePath: as a fuzz seed it would slow every mutation.
func badInputs() []badRow {
	long := strings.Repeat("a", 63) + "." + strings.Repeat("b", 63) + "." + strings.Repeat("c", 63) + "." + strings.Repeat("d", 62)
	return []badRow{
		{"newline", "path", "/a\n    http-request return status 200 string pwned\n#"},
		{"quote", "path", "/a'\n  acl x always_true '"}, {"quote", "path", "/a\"b"}, {"quote", "path", "/a'b"},
		{"control-byte", "path", "/a\r"}, {"control-byte", "path", "/a\r\nX: y"}, {"control-byte", "path", "/a\x00b"},
		{"control-byte", "path", "/a\tb"}, {"control-byte", "path", "/a\x7f"},
		{"space-or-hash", "path", "/a b"}, {"space-or-hash", "path", "/a #b"}, {"space-or-hash", "path", "/a#b"},
		{"backslash", "path", "/a\\"}, {"backslash", "path", "/a\\\\b"}, {"backslash", "path", "/a\\x0a"},
		{"dollar", "path", "/$HOME"}, {"dollar", "path", "/${SECRET}"}, {"dollar", "path", "/\"$PATH\""},
		{"regex-char", "path", "/a.*"}, {"regex-char", "path", "/(a|b)"}, {"regex-char", "path", "/a{3}"},
		{"regex-char", "path", "/a)"}, {"regex-char", "path", "/a,b"},
		{"long", "path", "/" + strings.Repeat("a", 4<<10)}, {"long", "path", "/" + strings.Repeat("a", 100<<10)},
		{"non-ascii", "path", "/é"}, {"non-ascii", "path", "/\u202egnp.exe"}, {"non-ascii", "path", "/a\u200bb"},
		{"non-ascii", "path", "/\uff0fetc"}, {"non-ascii", "path", "/\xff"},
		{"percent-escape", "path", "/%0a"}, {"percent-escape", "path", "/%00"}, {"percent-escape", "path", "/%2e%2e/"},
		{"percent-escape", "path", "/%zz"}, {"percent-escape", "path", "/%2F"},
		{"map-line", "path", "/x\tother_backend"}, {"map-line", "path", "/x\nvictim.example/\tattacker_backend"},
		{"bad-host", "host", "a.example\n"}, {"bad-host", "host", "A.EXAMPLE"}, {"bad-host", "host", "exa mple.com"},
		{"bad-host", "host", "*.*.example"}, {"bad-host", "host", "bücher.example"}, {"bad-host", "host", long},
		{"bad-host", "host", "10.0.0.1"},
		{"annotation-injection", "string", "v\nhttp-request deny"}, {"annotation-injection", "string", "v' if TRUE #"},
		{"annotation-injection", "string", "v\"$HOME\""}, {"annotation-injection", "string", "v\\"}, {"annotation-injection", "string", "v#x"},
		{"typed-value", "enum", "GET;evil"}, {"typed-value", "enum", "GETX"}, {"typed-value", "enum", "true\n"},
		{"typed-value", "enum", "99999999999999999999"}, {"typed-value", "enum", "-1s"}, {"typed-value", "enum", "1h\n"},
		{"typed-value", "enum", " 10s"},
		{"url", "url", "http://a/\r\nX: y"}, {"url", "url", "javascript:x"},
		{"url", "url", "http://user:pw@host/"}, {"url", "url", "http://a/$HOME"},
		{"header", "header", "X-A: b"}, {"header", "header", "X\nY"}, {"header", "header", "a'b"},
		{"header", "header", "a\r\nb"}, {"header", "header", "a\x00b"},
		{"header", "header", strings.Repeat("v", 64<<10)},
	}
}

// valid is an Ingress every rule accepts; seeds change one field of it.
func valid() attack {
	return attack{host: "a.example", path: "/app", pathType: "Prefix", service: "web", port: "http"}
}

// seedAttacks places each bad row in every field it can reach. pier has
// no free-text, URL or header annotation (yet), so the annotation, enum,
// URL and header rows go into the string-typed group name and the typed
// annotations, and into the service and port names, which are user
// strings too.
func seedAttacks() []attack {
	var out []attack
	add := func(mod func(a *attack)) {
		a := valid()
		mod(&a)
		out = append(out, a)
	}
	for _, r := range badInputs() {
		in := r.in
		switch r.field {
		case "path":
			for _, pt := range []string{"Exact", "Prefix", "ImplementationSpecific"} {
				add(func(a *attack) { a.path, a.pathType = in, pt })
			}
		case "host":
			add(func(a *attack) { a.host = in })
			add(func(a *attack) { a.host = "*." + in })
			add(func(a *attack) { a.tlsHost = in })
		default:
			add(func(a *attack) { a.group = in })
			add(func(a *attack) { a.balance = in })
			add(func(a *attack) { a.health = in })
			add(func(a *attack) { a.externalIP = in })
			add(func(a *attack) { a.service = in })
			add(func(a *attack) { a.port = in })
		}
	}
	// Accepted shapes, so the fuzzer starts from inputs that reach the
	// renderer: every path type, wildcard and empty host, the typed
	// annotations, a TLS host, a catch-all path.
	for _, mod := range []func(a *attack){
		func(a *attack) {},
		func(a *attack) { a.pathType = "Exact"; a.path = "/a.*(x)!$&+,;=:@~" },
		func(a *attack) { a.pathType = "ImplementationSpecific"; a.path = "" },
		func(a *attack) { a.pathType = "" },
		func(a *attack) { a.pathType = "Regex" },
		func(a *attack) { a.path = "/app/"; a.host = "" },
		func(a *attack) { a.path = "/"; a.host = "*.example.com" },
		func(a *attack) { a.host = "victim.example"; a.path = "/" },
		func(a *attack) { a.group = "front"; a.balance = "leastconn"; a.health = "true" },
		func(a *attack) { a.externalIP = "203.0.113.7"; a.balance = "source"; a.health = "false" },
		func(a *attack) { a.externalIP = "2001:db8::7" },
		func(a *attack) { a.tlsHost = "a.example" },
		func(a *attack) { a.tlsHost = "*.example.com"; a.port = "" },
		func(a *attack) { a.path = "/%41%7e" },
	} {
		add(mod)
	}
	return out
}
