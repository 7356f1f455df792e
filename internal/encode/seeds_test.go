package encode

import (
	"slices"
	"strings"
	"testing"
)

// badRow is one payload of RELIABILITY.md's bad-input matrix (B1-B16) and
// what the validator for its field must do with it.
type badRow struct {
	row, field, in string
	accept         bool // the allow-list admits it; it must then round-trip
}

func badInputs() []badRow {
	rows := []badRow{
		{"B1", "path", "/a\n    http-request return status 200 string pwned\n#", false},
		{"B2", "path", "/a'\n  acl x always_true '", false},
		{"B2", "path", "/a\"b", false},
		{"B2", "path", "/a'b", false},
		{"B3", "path", "/a\r", false},
		{"B3", "path", "/a\r\nX: y", false},
		{"B3", "path", "/a\x00b", false},
		{"B3", "path", "/a\tb", false},
		{"B3", "path", "/a\x7f", false},
		{"B4", "path", "/a b", false},
		{"B4", "path", "/a #b", false},
		{"B4", "path", "/a#b", false},
		{"B5", "path", "/a\\", false},
		{"B5", "path", "/a\\\\b", false},
		{"B5", "path", "/a\\x0a", false},
		{"B6", "path", "/$HOME", true}, // '$' is a pchar; single quotes keep it literal
		{"B6", "path", "/${SECRET}", false},
		{"B6", "path", "/\"$PATH\"", false},
		{"B7", "path", "/a.*", true}, // matched with -m str/beg, never as a regex
		{"B7", "path", "/(a|b)", false},
		{"B7", "path", "/a{3}", false},
		{"B7", "path", "/a)", true}, // never inside converter arguments
		{"B7", "path", "/a,b", true},
		{"B8", "path", "/" + strings.Repeat("a", 4<<10), false},
		{"B8", "path", "/" + strings.Repeat("a", 100<<10), false},
		{"B9", "path", "/é", false},
		{"B9", "path", "/\u202egnp.exe", false},
		{"B9", "path", "/a\u200bb", false},
		{"B9", "path", "/\uff0fetc", false},
		{"B9", "path", "/\xff", false},
		{"B10", "path", "/%0a", false},
		{"B10", "path", "/%00", false},
		{"B10", "path", "/%2e%2e/", false},
		{"B10", "path", "/%zz", false},
		{"B10", "path", "/%2F", false},
		{"B11", "path", "/x\tother_backend", false},
		{"B11", "path", "/x\nvictim.example/\tattacker_backend", false},
		{"B12", "host", "a.example\n", false},
		{"B12", "host", "A.EXAMPLE", false},
		{"B12", "host", "exa mple.com", false},
		{"B12", "host", "*.*.example", false},
		{"B12", "host", "bücher.example", false},
		{"B12", "host", strings.Repeat("a", 63) + "." + strings.Repeat("b", 63) + "." + strings.Repeat("c", 63) + "." + strings.Repeat("d", 62), false},
		{"B12", "host", "10.0.0.1", false},
		{"B13", "header value", "v\nhttp-request deny", false},
		{"B13", "header value", "v' if TRUE #", false},
		{"B13", "header value", "v\"$HOME\"", false},
		{"B13", "header value", "v\\", false},
		{"B13", "header value", "v#x", false},
		{"B14", "enum", "GET;evil", false},
		{"B14", "enum", "GETX", false},
		{"B14", "bool", "true\n", false},
		{"B14", "int", "99999999999999999999", false},
		{"B14", "duration", "-1s", false},
		{"B14", "duration", "1h\n", false},
		{"B14", "duration", " 10s", false},
		{"B15", "url", "http://a/\r\nX: y", false},
		{"B15", "url", "javascript:x", false},
		{"B15", "url", "http://user:pw@host/", false},
		{"B15", "url", "http://a/$HOME", true},
		{"B16", "header name", "X-A: b", false},
		{"B16", "header name", "X\nY", false},
		{"B16", "header value", "a'b", false},
		{"B16", "header value", "a\r\nb", false},
		{"B16", "header value", "a\x00b", false},
		{"B16", "header value", strings.Repeat("v", 64<<10), false},
	}
	// B12 again for the wildcard validator: same payloads, other entry point.
	for _, r := range slices.Clone(rows) {
		if r.field == "host" {
			r.field = "wildcard host"
			rows = append(rows, r)
		}
	}
	rows = append(rows, badRow{"B8", "path", "/" + strings.Repeat("a", 1<<20), false})
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
