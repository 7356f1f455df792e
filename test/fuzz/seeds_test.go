package fuzz

import "strings"

// badRow is one payload of RELIABILITY.md's bad-input matrix, in the Go
// string notation of the document, and the field it targets.
type badRow struct{ row, field, in string }

// badInputs are rows B1-B16. The 1 MiB path of B8 is left to
// TestHugePath: as a fuzz seed it would slow every mutation.
func badInputs() []badRow {
	long := strings.Repeat("a", 63) + "." + strings.Repeat("b", 63) + "." + strings.Repeat("c", 63) + "." + strings.Repeat("d", 62)
	return []badRow{
		{"B1", "path", "/a\n    http-request return status 200 string pwned\n#"},
		{"B2", "path", "/a'\n  acl x always_true '"}, {"B2", "path", "/a\"b"}, {"B2", "path", "/a'b"},
		{"B3", "path", "/a\r"}, {"B3", "path", "/a\r\nX: y"}, {"B3", "path", "/a\x00b"},
		{"B3", "path", "/a\tb"}, {"B3", "path", "/a\x7f"},
		{"B4", "path", "/a b"}, {"B4", "path", "/a #b"}, {"B4", "path", "/a#b"},
		{"B5", "path", "/a\\"}, {"B5", "path", "/a\\\\b"}, {"B5", "path", "/a\\x0a"},
		{"B6", "path", "/$HOME"}, {"B6", "path", "/${SECRET}"}, {"B6", "path", "/\"$PATH\""},
		{"B7", "path", "/a.*"}, {"B7", "path", "/(a|b)"}, {"B7", "path", "/a{3}"},
		{"B7", "path", "/a)"}, {"B7", "path", "/a,b"},
		{"B8", "path", "/" + strings.Repeat("a", 4<<10)}, {"B8", "path", "/" + strings.Repeat("a", 100<<10)},
		{"B9", "path", "/é"}, {"B9", "path", "/\u202egnp.exe"}, {"B9", "path", "/a\u200bb"},
		{"B9", "path", "/\uff0fetc"}, {"B9", "path", "/\xff"},
		{"B10", "path", "/%0a"}, {"B10", "path", "/%00"}, {"B10", "path", "/%2e%2e/"},
		{"B10", "path", "/%zz"}, {"B10", "path", "/%2F"},
		{"B11", "path", "/x\tother_backend"}, {"B11", "path", "/x\nvictim.example/\tattacker_backend"},
		{"B12", "host", "a.example\n"}, {"B12", "host", "A.EXAMPLE"}, {"B12", "host", "exa mple.com"},
		{"B12", "host", "*.*.example"}, {"B12", "host", "bücher.example"}, {"B12", "host", long},
		{"B12", "host", "10.0.0.1"},
		{"B13", "string", "v\nhttp-request deny"}, {"B13", "string", "v' if TRUE #"},
		{"B13", "string", "v\"$HOME\""}, {"B13", "string", "v\\"}, {"B13", "string", "v#x"},
		{"B14", "enum", "GET;evil"}, {"B14", "enum", "GETX"}, {"B14", "enum", "true\n"},
		{"B14", "enum", "99999999999999999999"}, {"B14", "enum", "-1s"}, {"B14", "enum", "1h\n"},
		{"B14", "enum", " 10s"},
		{"B15", "url", "http://a/\r\nX: y"}, {"B15", "url", "javascript:x"},
		{"B15", "url", "http://user:pw@host/"}, {"B15", "url", "http://a/$HOME"},
		{"B16", "header", "X-A: b"}, {"B16", "header", "X\nY"}, {"B16", "header", "a'b"},
		{"B16", "header", "a\r\nb"}, {"B16", "header", "a\x00b"},
		{"B16", "header", strings.Repeat("v", 64<<10)},
	}
}

// valid is an Ingress every rule accepts; seeds change one field of it.
func valid() attack {
	return attack{host: "a.example", path: "/app", pathType: "Prefix", service: "web", port: "http"}
}

// seedAttacks places each bad row in every field it can reach. pier has
// no free-text, URL or header annotation (yet), so B13-B16 go into the
// string-typed group name and the typed annotations, and into the service
// and port names, which are user strings too.
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
