package encode

import (
	"slices"
	"strings"
	"testing"
)

// badRow is one hostile payload (row names the kind of attack) and what
// the validator for its field must do with it.
type badRow struct {
	row, field, in string
	accept         bool // the allow-list admits it; it must then round-trip
}

func badInputs() []badRow {
	rows := []badRow{
		{"newline", "path", "/a\n    http-request return status 200 string pwned\n#", false},
		{"quote", "path", "/a'\n  acl x always_true '", false},
		{"quote", "path", "/a\"b", false},
		{"quote", "path", "/a'b", false},
		{"control-byte", "path", "/a\r", false},
		{"control-byte", "path", "/a\r\nX: y", false},
		{"control-byte", "path", "/a\x00b", false},
		{"control-byte", "path", "/a\tb", false},
		{"control-byte", "path", "/a\x7f", false},
		{"space-or-hash", "path", "/a b", false},
		{"space-or-hash", "path", "/a #b", false},
		{"space-or-hash", "path", "/a#b", false},
		{"backslash", "path", "/a\\", false},
		{"backslash", "path", "/a\\\\b", false},
		{"backslash", "path", "/a\\x0a", false},
		{"dollar", "path", "/$HOME", true}, // '$' is a pchar; single quotes keep it literal
		{"dollar", "path", "/${SECRET}", false},
		{"dollar", "path", "/\"$PATH\"", false},
		{"regex-char", "path", "/a.*", true}, // matched with -m str/beg, never as a regex
		{"regex-char", "path", "/(a|b)", false},
		{"regex-char", "path", "/a{3}", false},
		{"regex-char", "path", "/a)", true}, // never inside converter arguments
		{"regex-char", "path", "/a,b", true},
		{"long", "path", "/" + strings.Repeat("a", 4<<10), false},
		{"long", "path", "/" + strings.Repeat("a", 100<<10), false},
		{"non-ascii", "path", "/é", false},
		{"non-ascii", "path", "/\u202egnp.exe", false},
		{"non-ascii", "path", "/a\u200bb", false},
		{"non-ascii", "path", "/\uff0fetc", false},
		{"non-ascii", "path", "/\xff", false},
		{"percent-escape", "path", "/%0a", false},
		{"percent-escape", "path", "/%00", false},
		{"percent-escape", "path", "/%2e%2e/", false},
		{"percent-escape", "path", "/%zz", false},
		{"percent-escape", "path", "/%2F", false},
		{"map-line", "path", "/x\tother_backend", false},
		{"map-line", "path", "/x\nvictim.example/\tattacker_backend", false},
		{"bad-host", "host", "a.example\n", false},
		{"bad-host", "host", "A.EXAMPLE", false},
		{"bad-host", "host", "exa mple.com", false},
		{"bad-host", "host", "*.*.example", false},
		{"bad-host", "host", "bücher.example", false},
		{"bad-host", "host", strings.Repeat("a", 63) + "." + strings.Repeat("b", 63) + "." + strings.Repeat("c", 63) + "." + strings.Repeat("d", 62), false},
		{"bad-host", "host", "10.0.0.1", false},
		{"annotation-injection", "header value", "v\nhttp-request deny", false},
		{"annotation-injection", "header value", "v' if TRUE #", false},
		{"annotation-injection", "header value", "v\"$HOME\"", false},
		{"annotation-injection", "header value", "v\\", false},
		{"annotation-injection", "header value", "v#x", false},
		{"typed-value", "enum", "GET;evil", false},
		{"typed-value", "enum", "GETX", false},
		{"typed-value", "bool", "true\n", false},
		{"typed-value", "int", "99999999999999999999", false},
		{"typed-value", "duration", "-1s", false},
		{"typed-value", "duration", "1h\n", false},
		{"typed-value", "duration", " 10s", false},
		{"url", "url", "http://a/\r\nX: y", false},
		{"url", "url", "javascript:x", false},
		{"url", "url", "http://user:pw@host/", false},
		{"url", "url", "http://a/$HOME", true},
		{"header", "header name", "X-A: b", false},
		{"header", "header name", "X\nY", false},
		{"header", "header value", "a'b", false},
		{"header", "header value", "a\r\nb", false},
		{"header", "header value", "a\x00b", false},
		{"header", "header value", strings.Repeat("v", 64<<10), false},
	}
	// The bad hosts again for the wildcard validator: same payloads, other entry point.
	for _, r := range slices.Clone(rows) {
		if r.field == "host" {
			r.field = "wildcard host"
			rows = append(rows, r)
		}
	}
	rows = append(rows, badRow{"long", "path", "/" + strings.Repeat("a", 1<<20), false})
	return rows
}

// validate runs the validator for field and returns the config word it
// yields, if it accepts.
func validate(field, in string) (Word, error) {
	switch field {
	case "path":
		v, err := Path(in, PathPrefix)
		if _, err2 := Path(in, PathExact); (err == nil) != (err2 == nil) {
			panic("path kinds disagree on " + Printable(in))
		}
		return v.Word(), err
	case "host":
		v, err := Host(in)
		return v.Word(), err
	case "wildcard host":
		v, err := WildcardHost(in)
		return v.Word(), err
	case "header name":
		v, err := HeaderName(in)
		return v.Word(), err
	case "header value":
		v, err := HeaderValue(in)
		return v.Word(), err
	case "url":
		v, err := URL(in)
		return v.Word(), err
	case "enum":
		v, err := Enum(in, "GET", "POST")
		return v.Word(), err
	case "bool":
		_, err := Bool(in)
		return Lit("true"), err
	case "int":
		n, err := Int(in, 0, 1<<20)
		return Num(n), err
	case "duration":
		d, err := Duration(in, 0, 3600e9)
		return Millis(d), err
	}
	panic("unknown field " + field)
}

func TestBadInputs(t *testing.T) {
	for _, r := range badInputs() {
		w, err := validate(r.field, r.in)
		if (err == nil) != r.accept {
			t.Errorf("%s %s %s: accepted=%v, want %v (err %v)", r.row, r.field, Printable(r.in), err == nil, r.accept, err)
			continue
		}
		if err != nil {
			checkMessage(t, err)
			continue
		}
		line, lerr := ConfigLine(Lit(".notice"), w)
		if lerr != nil {
			t.Errorf("%s: encode %s: %v", r.row, Printable(r.in), lerr)
			continue
		}
		if r.field == "path" && w.String() != r.in {
			t.Errorf("%s: path changed by validation: %s", r.row, Printable(w.String()))
		}
		assertTokens(t, line, ".notice", w.String())
	}
}

// checkMessage holds the rule for refusal messages: printable ASCII only,
// bounded, so they can go into Events and logs as they are.
func checkMessage(t *testing.T, err error) {
	t.Helper()
	msg := err.Error()
	if len(msg) > 512 {
		t.Errorf("message too long (%d bytes): %.80s...", len(msg), msg)
	}
	for i := 0; i < len(msg); i++ {
		if msg[i] < 0x20 || msg[i] >= 0x7f {
			t.Errorf("message has raw byte 0x%02x: %s", msg[i], Printable(msg))
			return
		}
	}
}

// noEnv stands for any environment: expanding a variable changes the
// word, so a line that expands one cannot pass assertTokens.
func noEnv(name string) (string, bool) { return "EXPANDED(" + name + ")", true }

// assertTokens checks that line is exactly one line, and that the HAProxy
// tokenizer model makes exactly want of it, without comment, expansion,
// escape or truncation.
func assertTokens(t testing.TB, line string, want ...string) {
	t.Helper()
	if strings.ContainsAny(line, "\n\r\x00") {
		t.Fatalf("line contains CR, LF or NUL: %s", Printable(line))
	}
	got, err := Tokenize(line, noEnv)
	if err != nil {
		t.Fatalf("tokenize %s: %v", Printable(line), err)
	}
	if got.Comment || got.Env || got.Escape || got.Truncated || got.Scope {
		t.Fatalf("line %s: interpretation %+v", Printable(line), got)
	}
	if !slices.Equal(got.Words, want) {
		t.Fatalf("line %s: words %q, want %q", Printable(line), got.Words, want)
	}
}
