package encode

import (
	"strings"
	"testing"
)

func TestSigninLocation(t *testing.T) {
	for in, want := range map[string]string{
		"https://login.example/start":     "https://login.example/start?rd=",
		"https://login.example/start?x=1": "https://login.example/start?x=1&rd=",
		"https://$host/oauth2/start":      "https://%[req.hdr(host),field(1,:),lower,url_enc]/oauth2/start?rd=",
		"https://${host}/a%20b":           "https://%[req.hdr(host),field(1,:),lower,url_enc]/a%%20b?rd=",
	} {
		w, err := SigninLocation(in)
		if err != nil || !strings.HasPrefix(w.String(), want) || !strings.HasSuffix(w.String(), rdExpression) {
			t.Errorf("%s: %q, %v", in, w.String(), err)
		}
	}
	// The oauth2-proxy guides' form names rd= itself: nothing is appended.
	for in, want := range map[string]string{
		"https://$host/oauth2/start?rd=$escaped_request_uri":  "https://%[req.hdr(host),field(1,:),lower,url_enc]/oauth2/start?rd=%[capture.req.uri,url_enc]",
		"$scheme://$best_http_host/start?x=1&rd=$request_uri": "%[ssl_fc,iif(https,http)]://%[req.hdr(host),lower,url_enc]/start?x=1&rd=%[capture.req.uri]",
	} {
		if w, err := SigninLocation(in); err != nil || w.String() != want {
			t.Errorf("%s: %q, %v; want %q", in, w.String(), err, want)
		}
	}
	for bad, why := range map[string]string{"": "", "/start": "", "javascript:alert(1)": "", "https://login.example/' if TRUE": "",
		"https://login.example/a b": "", "https://login.example/\n": "", "https://u:p@login.example/": "",
		"https://$remote_addr/start": "unknown variable $remote_addr", "https://$HOST/start": "starts no variable",
		"https://$/start": "starts no variable", "https://${host/start": "starts no variable", "$host/start": "",
		"https://login.example/$request_uri%[src]": "", "https://a.example/#$host": ""} {
		_, err := SigninLocation(bad)
		if err == nil || !strings.Contains(err.Error(), why) {
			t.Errorf("%q: %v, want an error saying %q", bad, err, why)
		}
	}
}

func TestHeaderList(t *testing.T) {
	a, _ := HeaderName("X-A")
	b, _ := HeaderName("X-B")
	if w, err := HeaderList([]Value{a, b}); err != nil || w.String() != "X-A,X-B" {
		t.Errorf("%q, %v", w.String(), err)
	}
	if w, err := HeaderList(nil); err != nil || w.String() != "-" {
		t.Errorf("empty: %q, %v", w.String(), err)
	}
	if _, err := HeaderList([]Value{{s: "X-A,X-B"}}); err == nil {
		t.Error("a comma inside a name accepted")
	}
}

// FuzzSigninLocation: what SigninLocation accepts emits as one config
// word that starts with the URL (its '%' doubled) and ends with the rd=
// expression.
func FuzzSigninLocation(f *testing.F) {
	seed(f, "https://login.example/start", "https://login.example/a%20b?x=1", "https://$host/x", "https://a.example/' x",
		"https://$host/oauth2/start?rd=$escaped_request_uri", "https://${host}/$x")
	f.Fuzz(func(t *testing.T, s string) {
		w, err := SigninLocation(s)
		if err != nil {
			checkMessage(t, err)
			return
		}
		line, err := ConfigLine(Lit("http-request"), Lit("redirect"), Lit("location"), w)
		if err != nil {
			t.Fatalf("%q: %v", s, err)
		}
		assertTokens(t, line, "http-request", "redirect", "location", w.String())
		if strings.Contains(s, "$") {
			return // variables become expressions (TestSigninLocation)
		}
		if !strings.HasPrefix(w.String(), strings.ReplaceAll(s, "%", "%%")) || !strings.HasSuffix(w.String(), rdExpression) {
			t.Fatalf("%q became %q", s, w.String())
		}
	})
}

// ObjectName: Kubernetes names and port names only; anything a config
// line or Lua argument could read as syntax is refused.
func TestObjectName(t *testing.T) {
	for _, ok := range []string{"shop", "web-1", "a.b.c", "8080", "http", strings.Repeat("a", 253)} {
		if w, err := ObjectName(ok); err != nil || w.String() != ok {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "shop;evil", "web'", "a b", "Web", "-a", "a-", ".a", "a.", "%[src]", "a\n", "a\x00", "a_b",
		strings.Repeat("a", 254)} {
		if _, err := ObjectName(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func FuzzObjectName(f *testing.F) {
	seed(f, "shop", "web-1", "a.b", "8080", "shop;evil", "web'", "%[src]", "a b")
	f.Fuzz(func(t *testing.T, s string) {
		w, err := ObjectName(s)
		if err != nil {
			checkMessage(t, err)
			return
		}
		line, err := ConfigLine(Lit("http-response"), Lit("lua.x"), w)
		if err != nil {
			t.Fatalf("%q: %v", s, err)
		}
		assertTokens(t, line, "http-response", "lua.x", s)
		if w.String() != s || strings.Trim(s, "abcdefghijklmnopqrstuvwxyz0123456789.-") != "" {
			t.Fatalf("%q became %q", s, w.String())
		}
	})
}
