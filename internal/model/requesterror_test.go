package model_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"pier.dev/pier/internal/model"
)

func TestPrintable(t *testing.T) {
	for _, c := range []struct {
		in   string
		max  int
		want string
	}{
		{"/shop/cart", 256, "/shop/cart"},
		{"/a%20b", 256, "/a%20b"}, // the client's own escapes are kept
		{"/日本", 256, "/日本"},
		{"/x\x1b[31mred", 256, "/x%1B[31mred"},
		{"/tab\there", 256, "/tab%09here"},
		{"/nl\r\nX-Injected: 1", 256, "/nl%0D%0AX-Injected: 1"},
		{"admin\u202Egnp.exe", 256, "admin%E2%80%AEgnp.exe"},
		{"zero\u200Bwidth", 256, "zero%E2%80%8Bwidth"},
		{"bad\xffutf8", 256, "bad%FFutf8"},
		{"nul\x00", 256, "nul%00"},
		{"<script>alert(1)</script>", 256, "<script>alert(1)</script>"}, // markup is the pages' to escape
		{"abcdefghij", 5, "ab…"},
		{"日本語", 7, "日…"}, // never cut inside a character
		{"abcdef", 2, "ab"},
		{"x", 0, ""},
	} {
		got := model.Printable(c.in, c.max)
		if got != c.want {
			t.Errorf("Printable(%q, %d) = %q, want %q", c.in, c.max, got, c.want)
		}
		if len(got) > c.max || !utf8.ValidString(got) {
			t.Errorf("Printable(%q, %d) = %q: %d bytes, valid UTF-8 %v", c.in, c.max, got, len(got), utf8.ValidString(got))
		}
		if again := model.Printable(got, c.max); again != got {
			t.Errorf("Printable is not stable on %q: %q", got, again)
		}
	}
}

// TestBoundedKeepsEveryFieldWithinItsBound: a report of hostile values at
// many times their bounds stays within the schema's maxLength of each
// field, and a sane one is unchanged.
func TestBoundedKeepsEveryFieldWithinItsBound(t *testing.T) {
	long := strings.Repeat("\u202E<x>", 1000)
	e := model.RequestError{Status: 502, Method: long, Host: long, Path: long, Namespace: long, Route: long, RouteKind: long,
		Service: long, ServicePort: long, Member: long, Pod: long, TerminationState: long, RequestID: long}.Bounded()
	for name, f := range map[string]struct {
		v   string
		max int
	}{
		"method": {e.Method, model.MaxErrorMethod}, "host": {e.Host, model.MaxErrorHost}, "path": {e.Path, model.MaxErrorPath},
		"namespace": {e.Namespace, model.MaxErrorName}, "route": {e.Route, model.MaxErrorRoute}, "routeKind": {e.RouteKind, model.MaxErrorKind},
		"service": {e.Service, model.MaxErrorName}, "servicePort": {e.ServicePort, model.MaxErrorPort}, "member": {e.Member, model.MaxErrorMember},
		"pod": {e.Pod, model.MaxErrorName}, "terminationState": {e.TerminationState, model.MaxErrorTerm}, "requestID": {e.RequestID, model.MaxErrorRequestID},
	} {
		if len(f.v) > f.max || f.v == "" || strings.Contains(f.v, "\u202E") {
			t.Errorf("%s: %q (%d bytes), want a non-empty value of at most %d bytes without the override", name, f.v, len(f.v), f.max)
		}
	}
	sane := model.RequestError{Status: 503, Method: "GET", Host: "web.example:8080", Path: "/gone", Namespace: "shop", Route: "web",
		RouteKind: "Ingress", Service: "gone", ServicePort: "80", TerminationState: "SC--", RequestID: "eac14d8a-2460-4362-aef6-3e20e73e5348"}
	if got := sane.Bounded(); got != sane {
		t.Errorf("Bounded changed a sane error:\n%+v\n%+v", got, sane)
	}
}

func TestRequestErrorOf(t *testing.T) {
	shared := model.RequestError{Namespace: "team", Route: "blog,shop", RouteKind: model.KindIngress}
	for _, c := range []struct {
		kind, ns, name string
		want           bool
	}{
		{model.KindIngress, "team", "shop", true},
		{model.KindIngress, "team", "blog", true},
		{model.KindIngress, "team", "blog,shop", false},
		{model.KindIngress, "team", "sho", false},
		{model.KindIngress, "other", "shop", false},
		{model.KindHTTPRoute, "team", "shop", false},
	} {
		if got := shared.Of(c.kind, c.ns, c.name); got != c.want {
			t.Errorf("Of(%s, %s, %s) = %v, want %v", c.kind, c.ns, c.name, got, c.want)
		}
	}
	if (model.RequestError{Namespace: "team", RouteKind: model.KindIngress}).Of(model.KindIngress, "team", "") {
		t.Error("an answer no route chose belongs to no route")
	}
}
