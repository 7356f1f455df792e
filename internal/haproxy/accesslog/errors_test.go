package accesslog

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"pier.dev/pier/internal/haproxy/render"
	"pier.dev/pier/internal/model"
)

// errorLine is a line of HAProxy's with the fields that make an error
// kind, at t seconds (milliseconds after the dot).
func errorLine(t, backend, server, addr string, status int, path, term string) []byte {
	b, _ := json.Marshal(map[string]any{"t": json.Number(t), "ca": "192.0.2.1", "cp": 40000, "m": "GET", "h": "a.test:8080",
		"p": path, "st": status, "bo": 120, "bi": 80, "ta": 12, "tc": 1, "tr": 9, "tw": 0,
		"f": "fe_" + testUUID + "_80", "b": backend, "s": server, "sa": addr, "sp": "8080", "id": "rid-" + t, "ts": term})
	return b
}

// TestRecentErrors reads lines as HAProxy sends them: the 5xx are listed
// by kind with their route, member, first and last time and count, the
// newest kind first; a 4xx and a 2xx are not; sampling and off do not
// hide them; hostile paths arrive bounded and percent-encoded.
func TestRecentErrors(t *testing.T) {
	var out bytes.Buffer
	l := New(Config{Socket: "/run/x.sock", Output: &out, Options: render.AccessLogOptions{Default: model.AccessLogOn, Metrics: true}})
	lb := group()
	lb.AccessLog = "off"
	l.Set(lb)
	p1, p2 := "be_"+testUUID+"_p1", "be_"+testUUID+"_p2"
	l.handle(errorLine("1796174603.086", p2, "s1", "10.0.0.7", 502, "/api/a", "SH--"))
	l.handle(errorLine("1796174603.090", p2, "s1", "10.0.0.7", 200, "/api/ok", "----"))
	l.handle(errorLine("1796174603.100", p1, "<NOSRV>", "-", 503, "/shop\x1b[2J<script>alert(1)</script>"+strings.Repeat("x", 400), "SC--"))
	l.handle(errorLine("1796174604.500", p2, "s1", "10.0.0.7", 502, "/api/b", "SH--"))
	l.handle(errorLine("1796174604.600", "pier_404_"+testUUID, "<NOSRV>", "-", 404, "/nothing", "----"))
	got := l.RecentErrors(testUUID)
	if len(got) != 2 {
		t.Fatalf("%d kinds, want 2: %+v", len(got), got)
	}
	at := func(s string) time.Time {
		var sec, ms int64
		fmt.Sscanf(s, "%d.%d", &sec, &ms)
		return time.Unix(sec, ms*int64(time.Millisecond)).UTC()
	}
	want := model.RequestError{First: at("1796174603.086"), Last: at("1796174604.500"), Count: 2, Status: 502,
		Method: "GET", Host: "a.test:8080", Path: "/api/b", Namespace: "team", Route: "blog", RouteKind: "Ingress",
		Service: "api", ServicePort: "http", Member: "10.0.0.7:8080", Pod: "api-7f9", TerminationState: "SH--", RequestID: "rid-1796174604.500"}
	if got[0] != want {
		t.Errorf("newest kind:\ngot  %+v\nwant %+v", got[0], want)
	}
	noMember := got[1]
	if noMember.Status != 503 || noMember.Member != "" || noMember.Pod != "" || noMember.Route != "blog,shop" || noMember.Service != "web" ||
		noMember.Count != 1 || !noMember.First.Equal(at("1796174603.100")) || noMember.TerminationState != "SC--" {
		t.Errorf("the 503 no member answered: %+v", noMember)
	}
	if p := noMember.Path; len(p) > model.MaxErrorPath || strings.Contains(p, "\x1b") || !strings.HasPrefix(p, "/shop%1B[2J<script>") || !strings.HasSuffix(p, "…") {
		t.Errorf("hostile path %q (%d bytes): want it percent-encoded and cut at %d bytes", p, len(p), model.MaxErrorPath)
	}
	if out.Len() != 0 {
		t.Errorf("access log off, yet written: %s", out.String())
	}

	// Set again (an apply): the list stays; Delete: it goes.
	l.Set(group())
	if n := len(l.RecentErrors(testUUID)); n != 2 {
		t.Errorf("%d kinds after Set, want the 2", n)
	}
	l.Delete(testUUID)
	if e := l.RecentErrors(testUUID); e != nil {
		t.Errorf("after Delete: %+v", e)
	}
}

// TestErrorRingKeepsTheKindsLastSeen: a flood of one kind is one entry;
// past MaxRecentErrors kinds the one least recently seen goes, and a
// kind seen again moves to the front.
func TestErrorRingKeepsTheKindsLastSeen(t *testing.T) {
	var g errorRing
	t0 := time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC)
	kind := func(i int) errorKey { return errorKey{route: fmt.Sprint("r", i), status: 502} }
	for n := range 1000 {
		g.add(kind(0), model.RequestError{Last: t0.Add(time.Duration(n) * time.Millisecond), Route: "r0", Status: 502})
	}
	for i := 1; i <= model.MaxRecentErrors; i++ {
		g.add(kind(i), model.RequestError{Last: t0.Add(time.Duration(i) * time.Second), Route: fmt.Sprint("r", i), Status: 502})
	}
	l := g.list()
	if len(l) != model.MaxRecentErrors || l[0].Route != fmt.Sprint("r", model.MaxRecentErrors) || l[len(l)-1].Route != "r1" {
		t.Fatalf("after %d more kinds: %d entries, newest %q, oldest %q; want r0 gone", model.MaxRecentErrors, len(l), l[0].Route, l[len(l)-1].Route)
	}
	g.add(kind(1), model.RequestError{Last: t0.Add(time.Minute), Route: "r1", Status: 502})
	l = g.list()
	if l[0].Route != "r1" || l[0].Count != 2 || !l[0].First.Equal(t0.Add(time.Second)) || !l[0].Last.Equal(t0.Add(time.Minute)) || l[len(l)-1].Route != "r2" {
		t.Errorf("r1 seen again: front %+v, last %q", l[0], l[len(l)-1].Route)
	}
	// A line a little out of order (another HAProxy process's) is
	// counted, and the entry keeps the newest request and its time.
	g.add(kind(1), model.RequestError{Last: t0.Add(time.Minute), Route: "r1", Status: 502, Path: "/newest"})
	g.add(kind(1), model.RequestError{Last: t0.Add(30 * time.Second), Route: "r1", Status: 502, Path: "/older"})
	if l = g.list(); !l[0].Last.Equal(t0.Add(time.Minute)) || l[0].Count != 4 || l[0].Path != "/newest" || !l[0].First.Equal(t0.Add(time.Second)) {
		t.Errorf("out of order: %+v, want the newest request, counted 4 times since the first", l[0])
	}
	// One older than the first moves the first back.
	g.add(kind(1), model.RequestError{Last: t0.Add(-time.Second), Route: "r1", Status: 502, Path: "/oldest"})
	if l = g.list(); !l[0].First.Equal(t0.Add(-time.Second)) || l[0].Path != "/newest" || l[0].Count != 5 {
		t.Errorf("older than the first: %+v", l[0])
	}
	// The list is a copy.
	l[0].Route = "changed"
	if g.list()[0].Route != "r1" {
		t.Error("list shares the ring's entries")
	}
}
