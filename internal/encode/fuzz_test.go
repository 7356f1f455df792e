package encode

import (
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The fuzz targets share one property:
// for any input, either the validator refuses it with a printable message,
// or every emitter that accepts the value writes a line that HAProxy's
// tokenizer (modelled by Tokenize, checked against haproxy -c in
// oracle_test.go) splits into exactly the intended words, the value intact,
// on one line, with no comment and no expansion. `go test` runs the seeds
// (the injection payloads of seeds_test.go and valid examples); `go test -fuzz FuzzPath` explores.

func seed(f *testing.F, valid ...string) {
	for _, r := range badInputs() {
		if len(r.in) <= 8<<10 { // the 100 KiB and 1 MiB paths run in TestBadInputs
			f.Add(r.in)
		}
	}
	for _, s := range valid {
		f.Add(s)
	}
}

// emitAll pushes a validated value through every emitter that may take it.
func emitAll(t *testing.T, v Value) {
	t.Helper()
	line, err := ConfigLine(Lit("acl"), Lit("h"), Lit("var(txn.pier_host)"), Lit("-m"), Lit("str"), v.Word())
	if err != nil {
		t.Fatalf("config line refused a validated value %s: %v", Printable(v.s), err)
	}
	assertTokens(t, line, "acl", "h", "var(txn.pier_host)", "-m", "str", v.s)

	ml, err := MapLine(v.Word(), ID("be_", "0123abcd"))
	if strings.ContainsAny(v.s, " \t") || v.s[0] == '#' {
		if err == nil {
			t.Fatalf("map line accepted %s", Printable(v.s))
		}
	} else {
		if err != nil {
			t.Fatalf("map line refused %s: %v", Printable(v.s), err)
		}
		key, val, ok := parseMapLine(ml)
		if !ok || key != v.s || val != "be_0123abcd" {
			t.Fatalf("map line %s read back as %q %q %v", Printable(ml), key, val, ok)
		}
	}
	if _, err := NewCommand(Lit("get"), Lit("map"), v.Word()); err == nil {
		t.Fatalf("runtime command accepted a user value")
	}
	// A map command takes a user value only within the runtime
	// allow-list, and the CLI then reads exactly the intended words.
	if cmd, err := AddMap(FilePath("/x/routes.map"), v.Word(), ID("be_", "0123abcd")); err != nil {
		checkMessage(t, err)
	} else if words, ok := cliWords(cmd); !ok || !slices.Equal(words, []string{"add", "map", "/x/routes.map", v.s, "be_0123abcd"}) {
		t.Fatalf("map command %s: %q", Printable(cmd.line), words)
	}
}

// Map commands: route keys of the allow-list pass whole; anything the
// CLI would split, escape or cut is refused; a map is named by its file.
func TestMapCommands(t *testing.T) {
	file := FilePath("/var/lib/pier/haproxy/u/routes-80-host.exact-0123.map")
	key := RouteKey("www.example.com", "/api/v1")
	cmd, err := AddMap(file, key, ID("be_", "abc"))
	if err != nil || cmd.String() != "add map /var/lib/pier/haproxy/u/routes-80-host.exact-0123.map www.example.com/api/v1/ be_abc" {
		t.Fatalf("add map: %q %v", cmd.String(), err)
	}
	if cmd, err := DelMap(file, key); err != nil || cmd.String() != "del map /var/lib/pier/haproxy/u/routes-80-host.exact-0123.map www.example.com/api/v1/" {
		t.Fatalf("del map: %q %v", cmd.String(), err)
	}
	if cmd, err := SetMap(file, key, ID("be_", "def")); err != nil || !strings.HasPrefix(cmd.String(), "set map ") {
		t.Fatalf("set map: %q %v", cmd.String(), err)
	}
	// Valid paths (RouteKey takes them): ';' would end the command, the
	// others pass the CLI as they are.
	for _, tc := range []struct {
		path string
		ok   bool
	}{{"/a;b", false}, {"/a~b", true}, {"/a%41", true}, {"/a+b", true}, {"/a=b", true}, {"/a@b", true}, {"/a!b", true}} {
		k := RouteKey("", tc.path)
		if k.Err() != nil {
			t.Fatalf("path %q: %v", tc.path, k.Err())
		}
		cmd, err := AddMap(file, k, ID("be_", "abc"))
		if tc.ok && (err != nil || cmd.String() != "add map "+file.String()+" "+tc.path+"/ be_abc") {
			t.Errorf("path %q: %q %v", tc.path, cmd.String(), err)
		}
		if !tc.ok && err == nil {
			t.Errorf("path %q: accepted as %q", tc.path, cmd.String())
		}
	}
	if _, err := AddMap(Lit("/x/routes.map"), key, ID("be_", "abc")); err == nil {
		t.Error("a map named by a literal, not a file path, was accepted")
	}
	if _, err := AddMap(FilePath("/x/a b.map"), key, ID("be_", "abc")); err == nil {
		t.Error("a map file with a space was accepted")
	}
}

// parseMapLine models pat_ref_read_from_file_smp (src/pattern.c): one
// line, leading spaces skipped, '#' comment, key up to a space or tab,
// value up to CR/LF without trailing spaces.
func parseMapLine(line string) (key, value string, ok bool) {
	body, rest, found := strings.Cut(line, "\n")
	if !found || rest != "" || strings.IndexByte(body, 0) >= 0 {
		return "", "", false
	}
	body = strings.TrimLeft(body, " \t")
	if body == "" || body[0] == '#' || body[0] == '\r' {
		return "", "", false
	}
	i := strings.IndexAny(body, " \t\r")
	if i < 0 {
		return body, "", true
	}
	key, body = body[:i], strings.TrimLeft(body[i:], " \t")
	if j := strings.IndexAny(body, "\r\n"); j >= 0 {
		body = body[:j]
	}
	return key, strings.TrimRight(body, " \t"), true
}

// cliWords models the runtime API's reading of one command: the line is
// sound if it holds none of the CLI's special characters.
func cliWords(c Command) ([]string, bool) {
	if c.line == "" || strings.ContainsAny(c.line, ";\\\t\r\n\x00'\"#") || strings.Contains(c.line, "  ") {
		return nil, false
	}
	return strings.Split(c.line, " "), true
}

func FuzzHost(f *testing.F) {
	seed(f, "example.com", "foo.bar.com", "my-host", "xn--bcher-kva.example", "a-1.b-2")
	f.Fuzz(func(t *testing.T, s string) {
		v, err := Host(s)
		if err != nil {
			checkMessage(t, err)
			return
		}
		emitAll(t, v)
		line, err := CrtListLine(FilePath("/x/certs/a.pem"), v.Word())
		if err != nil || line != "/x/certs/a.pem "+s+"\n" {
			t.Fatalf("crt-list line %s: %v", Printable(line), err)
		}
	})
}

func FuzzWildcardHost(f *testing.F) {
	seed(f, "*.foo.com", "*.com", "*.a-b.example")
	f.Fuzz(func(t *testing.T, s string) {
		v, err := WildcardHost(s)
		if err != nil {
			checkMessage(t, err)
			return
		}
		if !strings.HasPrefix(s, "*.") || strings.Count(s, "*") != 1 {
			t.Fatalf("accepted %s", Printable(s))
		}
		emitAll(t, v)
		if _, err := CrtListLine(FilePath("/x/a.pem"), v.Word()); err != nil {
			t.Fatal(err)
		}
	})
}

func FuzzPath(f *testing.F) {
	seed(f, "/", "/foo", "/aaa/bbb", "/a%20b", "/~user/x;y=1", "/foo/")
	f.Fuzz(func(t *testing.T, s string) {
		v, err := Path(s, PathExact)
		_, err2 := Path(s, PathPrefix)
		if (err == nil) != (err2 == nil) {
			t.Fatalf("path kinds disagree on %s", Printable(s))
		}
		if err != nil {
			checkMessage(t, err)
			return
		}
		if v.s != s {
			t.Fatalf("validation changed the path")
		}
		emitAll(t, v)
		// The renderer derives "<prefix>/" for element-wise prefixes.
		if d, err := Path(strings.TrimSuffix(s, "/")+"/", PathPrefix); err == nil {
			emitAll(t, d)
		}
	})
}

func FuzzHeaderName(f *testing.F) {
	seed(f, "X-Forwarded-Proto", "x", "A-1")
	f.Fuzz(func(t *testing.T, s string) {
		v, err := HeaderName(s)
		if err != nil {
			checkMessage(t, err)
			return
		}
		emitAll(t, v)
	})
}

func FuzzHeaderValue(f *testing.F) {
	seed(f, "max-age=31536000; includeSubDomains", "text/html", "a b  c")
	f.Fuzz(func(t *testing.T, s string) {
		v, err := HeaderValue(s)
		if err != nil {
			checkMessage(t, err)
			return
		}
		emitAll(t, v)
	})
}

// FuzzHeaderSetValue: a value accepted for a header change is one word
// of a set-header line, read back by HAProxy's tokenizer with nothing
// interpreted and each '%' doubled for log-format; map files and runtime
// commands refuse it when it holds a single quote.
func FuzzHeaderSetValue(f *testing.F) {
	seed(f, "default-src 'self'; img-src *", `{"group":"a","max_age":10}`, "50%", "a#b", `'a" b`, `x\y`, "$HOME", " a")
	f.Fuzz(func(t *testing.T, s string) {
		v, err := HeaderSetValue(s)
		if err != nil {
			checkMessage(t, err)
			return
		}
		if strings.ContainsAny(s, `\$`) || (strings.Contains(s, "'") && strings.Contains(s, `"`)) {
			t.Fatalf("accepted %s", Printable(s))
		}
		w := v.HeaderSetWord()
		line, err := ConfigLine(Lit("http-response"), Lit("set-header"), Lit("X-A"), w)
		if err != nil {
			t.Fatalf("config line refused a validated value %s: %v", Printable(s), err)
		}
		assertTokens(t, line, "http-response", "set-header", "X-A", strings.ReplaceAll(s, "%", "%%"))
		if _, err := MapLine(w, ID("be_", "0123abcd")); err == nil && strings.Contains(s, "'") {
			t.Fatalf("map line accepted %s", Printable(s))
		}
	})
}

func FuzzURL(f *testing.F) {
	seed(f, "https://example.com/a?b=c", "http://10.0.0.1:8080/", "https://[2001:db8::1]/x", "http://a/%zz")
	f.Fuzz(func(t *testing.T, s string) {
		v, err := URL(s)
		if err != nil {
			checkMessage(t, err)
			return
		}
		again, err := URL(v.s)
		if err != nil || again.s != v.s {
			t.Fatalf("re-serialised URL %s is not stable: %v", Printable(v.s), err)
		}
		emitAll(t, v)
	})
}

func FuzzScalars(f *testing.F) {
	seed(f, "30s", "500ms", "0", "-5", "true", "GET", "1h", "9999999999")
	f.Fuzz(func(t *testing.T, s string) {
		if d, err := Duration(s, 0, 24*time.Hour); err == nil {
			w := Millis(d)
			if back, err := Duration(w.s, 0, 24*time.Hour); err != nil || back != d {
				t.Fatalf("duration %s -> %s -> %v", Printable(s), w.s, back)
			}
			line, _ := ConfigLine(Lit("timeout"), Lit("client"), w)
			assertTokens(t, line, "timeout", "client", w.s)
		} else {
			checkMessage(t, err)
		}
		if n, err := Int(s, -1000, 1000); err == nil {
			line, _ := ConfigLine(Lit("maxconn"), Num(n))
			assertTokens(t, line, "maxconn", strconv.Itoa(n))
		} else {
			checkMessage(t, err)
		}
		if v, err := Enum(s, "GET", "POST"); err == nil {
			emitAll(t, v)
		}
		if _, err := Bool(s); err == nil && s != "true" && s != "false" {
			t.Fatalf("bool accepted %s", Printable(s))
		}
	})
}

func FuzzIP(f *testing.F) {
	seed(f, "10.0.0.1", "::1", "2001:db8::1", "::ffff:10.1.2.3", "fe80::1%eth0", "10.0.0.0/8", "0.0.0.0")
	f.Fuzz(func(t *testing.T, s string) {
		if p, err := CIDR(s); err == nil {
			if again, err := CIDR(p.String()); err != nil || again != p {
				t.Fatalf("CIDR %s not canonical", Printable(s))
			}
		}
		a, err := IP(s)
		if err != nil {
			checkMessage(t, err)
			return
		}
		if again, err := IP(a.String()); err != nil || again != a {
			t.Fatalf("IP %s not canonical", Printable(s))
		}
		ap := AddrPort(a, 8080)
		line, err := ConfigLine(Lit("server"), Lit("s1"), ap)
		if err != nil {
			t.Fatal(err)
		}
		assertTokens(t, line, "server", "s1", netip.AddrPortFrom(a, 8080).String())
		cmd, err := SetServerAddr(ID("be_", "abc"), ID("s", "1"), a, 8080)
		if err != nil {
			t.Fatal(err)
		}
		words, ok := cliWords(cmd)
		want := []string{"set", "server", "be_abc/s1", "addr", a.String(), "port", "8080"}
		if !ok || !slices.Equal(words, want) {
			t.Fatalf("command %s: %q", Printable(cmd.line), words)
		}
	})
}

// FuzzQuoted checks the context encoder alone, whatever a validator
// would say: any quotable string written as a user word round-trips.
func FuzzQuoted(f *testing.F) {
	seed(f, "a b", "$HOME", "${X}", `a\b`, `"x"`, "#", "a#b c", "[x]", ".if")
	f.Fuzz(func(t *testing.T, s string) {
		w := Word{s: s, kind: kindUser, quote: true}
		line, err := ConfigLine(Lit(".notice"), w)
		if quotable(s) != nil {
			if err == nil {
				t.Fatalf("encoder accepted unquotable %s", Printable(s))
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		assertTokens(t, line, ".notice", s)
	})
}

// FuzzTokenize keeps the model itself honest: no panic, bounded words.
func FuzzTokenize(f *testing.F) {
	seed(f, `a "b c" 'd e' f\ g`, `"${X[*]}"`, `"${X-def}"`, `\x41`, `"$.LINE"`)
	f.Fuzz(func(t *testing.T, s string) {
		env := func(name string) (string, bool) { return "p q", !strings.HasPrefix(name, ".") || name == ".LINE" }
		toks, err := Tokenize(s, env)
		if err == nil && len(toks.Words) > MaxLineArgs {
			t.Fatalf("%d words without error", len(toks.Words))
		}
	})
}
