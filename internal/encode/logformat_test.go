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
