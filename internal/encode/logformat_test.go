package encode

import (
	"net/netip"
	"testing"
)

func TestLogFormatURL(t *testing.T) {
	w, err := LogFormatURL("https://a.example/a%20b?x=$HOME")
	if err != nil {
		t.Fatal(err)
	}
	line, err := ConfigLine(Lit("http-request"), Lit("redirect"), Lit("location"), w)
	if err != nil || line != "http-request redirect location 'https://a.example/a%%20b?x=$HOME'" {
		t.Fatalf("%q %v", line, err)
	}
	for _, bad := range []string{"HTTPS://a.example", "https://a.example/'", "https://a.example/\n", "javascript:x",
		"https://u:p@a.example/", "https://a.example;evil", "https://a.example/#x"} {
		if _, err := LogFormatURL(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestPrefixWord(t *testing.T) {
	if w := Prefix(netip.MustParsePrefix("10.0.0.0/8")); w.Err() != nil || w.String() != "10.0.0.0/8" {
		t.Errorf("%q %v", w.String(), w.Err())
	}
	for _, bad := range []netip.Prefix{netip.MustParsePrefix("10.1.2.3/8"), {}} {
		if Prefix(bad).Err() == nil {
			t.Errorf("%v accepted", bad)
		}
	}
	if Num64(1<<40).String() != "1099511627776" {
		t.Error("Num64")
	}
}

func TestLogFormatWord(t *testing.T) {
	v, err := Path("/a%20b", PathExact)
	if err != nil {
		t.Fatal(err)
	}
	if w := v.LogFormatWord(); w.Err() != nil || w.String() != "/a%%20b" {
		t.Errorf("%q %v", w.String(), w.Err())
	}
	if w := (Value{s: `a\b`}).LogFormatWord(); w.Err() == nil {
		t.Error("backslash accepted")
	}
}

func TestAccessLogFormat(t *testing.T) {
	w := AccessLogFormat(LogTime("t"), LogWord("ca", "ci"), LogNumber("st", "ST"), LogSample("h", "capture.req.hdr(0)"))
	line, err := ConfigLine(Lit("log-format"), w)
	want := `log-format '{"t":%Ts.%ms,"ca":"%ci","st":%ST,"h":"%[capture.req.hdr(0),json(utf8s)]"}'`
	if err != nil || line != want {
		t.Fatalf("%q %v, want %q", line, err, want)
	}
	bad := map[string]Word{
		"no fields":       AccessLogFormat(),
		"zero field":      AccessLogFormat(LogField{}),
		"twice":           AccessLogFormat(LogNumber("a", "ST"), LogNumber("a", "B")),
		"key charset":     AccessLogFormat(LogNumber(`a"`, "ST")),
		"key upper":       AccessLogFormat(LogNumber("A", "ST")),
		"number alias":    AccessLogFormat(LogNumber("a", "HP")),
		"word alias":      AccessLogFormat(LogWord("a", "HU")),
		"sample bracket":  AccessLogFormat(LogSample("a", "req.hdr(x)]%[src")),
		"sample quote":    AccessLogFormat(LogSample("a", `str(")`)),
		"sample percent":  AccessLogFormat(LogSample("a", "str(%)")),
		"sample space":    AccessLogFormat(LogSample("a", "str( )")),
		"sample empty":    AccessLogFormat(LogSample("a", "")),
		"sample escape":   AccessLogFormat(LogSample("a", `str(\)`)),
		"sample squote":   AccessLogFormat(LogSample("a", "str(')")),
		"sample newline":  AccessLogFormat(LogSample("a", "str(\n)")),
		"sample too long": AccessLogFormat(LogSample("a", "str(aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa)")),
	}
	for name, w := range bad {
		if _, err := ConfigLine(Lit("log-format"), w); err == nil {
			t.Errorf("%s accepted", name)
		}
	}
}
