package annotation

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"pier.dev/pier/internal/model"
)

// noControl: nothing a parser accepts may carry a byte that could end or
// split a config or map line.
func noControl(t *testing.T, in, out string) {
	if strings.ContainsFunc(out, func(r rune) bool { return r < 0x20 || r == 0x7f || r == '\'' || r == ' ' }) {
		t.Fatalf("%q accepted as %q", in, out)
	}
}

func FuzzParseSize(f *testing.F) {
	for _, s := range []string{"0", "1m", "8k", "1024g", "1m;evil", "1\n", "-1", "99999999999999g"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		n, err := parseSize(v)
		if err == nil && (n < 0 || n > maxSize || strings.ContainsAny(v, ";\n ")) {
			t.Fatalf("%q accepted as %d", v, n)
		}
	})
}

func FuzzParseSeconds(f *testing.F) {
	for _, s := range []string{"1", "60", "3600", "3601", "0", "5;evil", "5s", " 5"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		d, err := parseSeconds(v)
		if err == nil && (d < time.Millisecond || d > time.Hour || strings.ContainsAny(v, "; \n\t-+.")) {
			t.Fatalf("%q accepted as %v", v, d)
		}
	})
}

func FuzzParseCIDRList(f *testing.F) {
	for _, s := range []string{"10.0.0.0/8", "10.0.0.0/8, 192.168.0.0/16", "::1", "1.2.3.4", "10.0.0.0/8;evil", "10.0.0.0/8\n", "fe80::1%eth0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		list, err := parseCIDRList(v)
		if err != nil {
			return
		}
		for _, p := range list {
			noControl(t, v, p)
			if strings.ContainsAny(p, ";%") {
				t.Fatalf("%q accepted as %q", v, p)
			}
		}
		again, err := parseCIDRList(strings.Join(list, ","))
		if err != nil || strings.Join(again, ",") != strings.Join(list, ",") {
			t.Fatalf("%q: canonical form %v does not parse to itself (%v)", v, list, err)
		}
	})
}

func FuzzParseRedirectURL(f *testing.F) {
	for _, s := range []string{"https://a.example", "https://a.example/a%20b?x=1", "http://a/\r\nX: y", "javascript:x",
		"http://user:pw@host/", "http://a/$HOME", "https://a.example;evil", "https://a.example/'"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		u, err := parseRedirectURL(v)
		if err != nil {
			return
		}
		noControl(t, v, u)
		if u != v || !(strings.HasPrefix(u, "http://") || strings.HasPrefix(u, "https://")) || strings.ContainsAny(u, "\"\\#") {
			t.Fatalf("%q accepted as %q", v, u)
		}
	})
}

func FuzzParseRedirectCode(f *testing.F) {
	for _, s := range []string{"301", "308", "300", "301;evil", "0301"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		if c, err := parseRedirectCode(v); err == nil && (c < 301 || c > 308 || len(v) != 3) {
			t.Fatalf("%q accepted as %d", v, c)
		}
	})
}

// The proxy-ssl-* parsers: whatever they accept is a bare host name, an
// on/off word or a Secret reference, with nothing a config line reads as
// syntax.
func FuzzParseProxySSL(f *testing.F) {
	for _, s := range []string{"on", "off", "api.internal", "ns/upstream", "upstream", "on;evil", "a.example\n", "ns/x/y", "*.a.example", "A.example", "a.example:443"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		if name, err := parseProxySSLName(v); err == nil {
			noControl(t, v, name)
			if name != v || strings.Trim(name, "abcdefghijklmnopqrstuvwxyz0123456789.-") != "" {
				t.Fatalf("name %q accepted as %q", v, name)
			}
		}
		if on, err := parseOnOff("x", v); err == nil && v != map[bool]string{true: "on", false: "off"}[on] {
			t.Fatalf("on/off %q accepted as %v", v, on)
		}
		if ref, err := parseProxySSLSecret(v); err == nil {
			noControl(t, v, ref)
			if strings.Trim(ref, "abcdefghijklmnopqrstuvwxyz0123456789.-/") != "" || strings.Count(ref, "/") > 1 {
				t.Fatalf("secret %q accepted as %q", v, ref)
			}
		}
	})
}

// FuzzParseHeaderLines: an accepted header annotation yields changes
// whose names and values hold no byte that could end a config line or
// that HAProxy interprets in double quotes ('\\', '$'), never both kinds
// of quote, and that parse again to themselves. ('%' is allowed: the
// renderer doubles it, and render's integration test sends it literally.)
func FuzzParseHeaderLines(f *testing.F) {
	for _, s := range []string{"X-A: b", "X-A: b\n-X-B\n", "X-A;evil: b", "X-A: b\r\nX-Evil: c", "X-A: %[src]", "-Host", "X-A: 'b'", "X-A:  b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		ops, err := parseHeaderLines("request-headers", v)
		if err != nil {
			return
		}
		var again []string
		for _, op := range ops {
			if strings.ContainsFunc(op.Name+op.Value, func(r rune) bool { return r < 0x20 || r >= 0x7f || strings.ContainsRune("\\$", r) }) ||
				(strings.Contains(op.Value, "'") && strings.Contains(op.Value, `"`)) ||
				strings.ContainsAny(op.Name, ": ;'\"#%") {
				t.Fatalf("%q accepted as %+v", v, op)
			}
			if op.Op == "remove" {
				again = append(again, "-"+op.Name)
			} else {
				again = append(again, op.Name+": "+op.Value)
			}
		}
		back, err := parseHeaderLines("request-headers", strings.Join(again, "\n"))
		if err != nil || len(back) != len(ops) {
			t.Fatalf("%q: %v does not parse to itself (%v)", v, ops, err)
		}
	})
}

// FuzzParseCustomHTTPErrors: an accepted custom-http-errors is 1 to
// model.MaxCustomErrorCodes distinct sorted statuses 400-599, the input
// holds only digits, commas and spaces, and the canonical list parses
// again to itself.
func FuzzParseCustomHTTPErrors(f *testing.F) {
	for _, s := range []string{"404", "404,503", " 404 , 503 ", "404;evil", "404,200", "600", "0404", "404\n", "", "4e2", "404,404"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		codes, err := parseCustomHTTPErrors(v)
		if err != nil {
			return
		}
		if len(codes) == 0 || len(codes) > model.MaxCustomErrorCodes || strings.Trim(v, "0123456789, ") != "" {
			t.Fatalf("%q accepted as %v", v, codes)
		}
		parts := make([]string, len(codes))
		for i, c := range codes {
			if c < 400 || c > 599 || (i > 0 && codes[i-1] >= c) {
				t.Fatalf("%q accepted as %v", v, codes)
			}
			parts[i] = strconv.Itoa(c)
		}
		again, err := parseCustomHTTPErrors(strings.Join(parts, ","))
		if err != nil || !slices.Equal(again, codes) {
			t.Fatalf("%q: canonical form %v does not parse to itself (%v)", v, codes, err)
		}
	})
}
