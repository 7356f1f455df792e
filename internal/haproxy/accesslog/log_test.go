package accesslog

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"pier.dev/pier/internal/haproxy/render"
	"pier.dev/pier/internal/metrics"
	"pier.dev/pier/internal/model"
)

const testUUID = "5f0c6a9e-0d7e-4b1a-9c51-2b7c1e0a4d10"

// group is a load balancer of two Ingresses: shop routes to web, blog
// to web as well and to api; api has a pod name.
func group() *model.LoadBalancer {
	src := func(n string) model.Source { return model.Source{Kind: "Ingress", Namespace: "team", Name: n} }
	return &model.LoadBalancer{UUID: testUUID, Name: "group:front", Provider: model.ProviderHAProxy,
		Sources: []model.Source{src("blog"), src("shop")},
		Listeners: []model.Listener{{Port: 80, Policies: []model.L7Policy{
			{PoolID: "p1", Source: src("shop")}, {PoolID: "p1", Source: src("blog")}, {PoolID: "p2", Source: src("blog")}}}},
		Pools: []model.Pool{{ID: "p1", Namespace: "team", Service: "web", Port: "80"},
			{ID: "p2", Namespace: "team", Service: "api", Port: "http", Members: []model.Member{{Address: "10.0.0.7", Port: 8080, Target: "api-7f9"}}}}}
}

func wireLine(backend, server string, status int) string {
	b, _ := json.Marshal(map[string]any{"t": json.Number("1796174603.086"), "ca": "192.0.2.1", "cp": 40000, "m": "GET", "h": "a.test",
		"p": "/x", "st": status, "bo": 120, "bi": 80, "ta": 12, "tc": 1, "tr": 9, "tw": 0,
		"f": "fe_" + testUUID + "_80", "b": backend, "s": server, "sa": "10.0.0.7", "sp": "8080", "id": "trace-1", "ts": "----"})
	return string(b)
}

func TestHandleNamesAndCounts(t *testing.T) {
	var out bytes.Buffer
	m := metrics.New()
	l := New(Config{Socket: "/run/x.sock", Output: &out, Metrics: m,
		Options: render.AccessLogOptions{Default: model.AccessLogOn, Metrics: true}})
	l.Set(group())
	l.handle([]byte(wireLine("be_"+testUUID+"_p2", "s1", 200)))
	l.handle([]byte(wireLine("be_"+testUUID+"_p1", "s2", 503)))
	l.handle([]byte(wireLine("pier_404_"+testUUID, "<NOSRV>", 404)))
	l.handle([]byte(`{"t":1,"f":"fe_00000000-0000-0000-0000-000000000000_80"}`))
	l.handle([]byte(`{"t":1,"f":"fe_` + testUUID + `_80","p":"/a`))
	l.out.Flush()
	var lines []Line
	for _, s := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var ln Line
		if err := json.Unmarshal([]byte(s), &ln); err != nil {
			t.Fatalf("%v: %s", err, s)
		}
		lines = append(lines, ln)
	}
	if len(lines) != 3 {
		t.Fatalf("%d lines, want 3:\n%s", len(lines), out.String())
	}
	want := Line{Time: "2026-12-02T01:23:23.086Z", ClientAddr: "192.0.2.1", ClientPort: 40000, Method: "GET", Host: "a.test", Path: "/x",
		Status: 200, BytesSent: 120, BytesReceived: 80, DurationMS: 12, ConnectMS: 1, ResponseMS: 9,
		Namespace: "team", Ingress: "blog", RouteKind: "Ingress", Service: "api", ServicePort: "http",
		Member: "10.0.0.7:8080", Pod: "api-7f9", RequestID: "trace-1", LoadBalancer: "group:front", TerminationState: "----"}
	if lines[0] != want {
		t.Errorf("got  %+v\nwant %+v", lines[0], want)
	}
	if l := lines[1]; l.Ingress != "blog,shop" || l.Service != "web" || l.Pod != "" {
		t.Errorf("shared pool: %+v", l)
	}
	if l := lines[2]; l.Ingress != "" || l.Service != "" || l.Member != "" || l.Namespace != "" {
		t.Errorf("answered by HAProxy, in a group: %+v", l)
	}
	for _, c := range []struct {
		labels []string
		want   float64
	}{
		{[]string{"team", "blog", "api", "2xx"}, 1},
		{[]string{"team", "blog,shop", "web", "5xx"}, 1},
		{[]string{"", "", "", "4xx"}, 1},
		{[]string{"team", "blog", "api", "5xx"}, 0},
	} {
		if got := testutil.ToFloat64(m.Requests.WithLabelValues(c.labels...)); got != c.want {
			t.Errorf("requests %v = %v, want %v", c.labels, got, c.want)
		}
	}
	for result, want := range map[string]float64{"written": 3, "unknown": 1, "malformed": 1} {
		if got := testutil.ToFloat64(m.AccessLogLines.WithLabelValues(result)); got != want {
			t.Errorf("lines %s = %v, want %v", result, got, want)
		}
	}
	if n := testutil.CollectAndCount(m.RequestSeconds); n != 3 {
		t.Errorf("%d duration series, want 3", n)
	}
	// Gone: its series go too.
	l.Delete(testUUID)
	if n := testutil.CollectAndCount(m.Requests); n != 0 {
		t.Errorf("%d request series after Delete", n)
	}
}

// With the metrics on, sample=N is the agent's: every line is counted,
// one in N written; off writes none and still counts.
func TestHandleSamples(t *testing.T) {
	for _, tt := range []struct {
		mode    string
		written int
	}{{"sample=4", 3}, {"off", 0}, {"on", 10}} {
		var out bytes.Buffer
		m := metrics.New()
		l := New(Config{Socket: "/run/x.sock", Output: &out, Metrics: m,
			Options: render.AccessLogOptions{Default: model.AccessLogOn, Metrics: true}})
		lb := group()
		lb.AccessLog = tt.mode
		l.Set(lb)
		for range 10 {
			l.handle([]byte(wireLine("be_"+testUUID+"_p2", "s1", 200)))
		}
		l.out.Flush()
		if got := strings.Count(out.String(), "\n"); got != tt.written {
			t.Errorf("%s: %d lines written, want %d", tt.mode, got, tt.written)
		}
		if got := testutil.ToFloat64(m.Requests.WithLabelValues("team", "blog", "api", "2xx")); got != 10 {
			t.Errorf("%s: %v requests counted, want 10", tt.mode, got)
		}
	}
}

// BenchmarkHandle is the agent's cost of one line: decode, name, count,
// write.
func BenchmarkHandle(b *testing.B) {
	var out bytes.Buffer
	l := New(Config{Socket: "/run/x.sock", Output: &out, Metrics: metrics.New(),
		Options: render.AccessLogOptions{Default: model.AccessLogOn, Metrics: true}})
	l.Set(group())
	line := []byte(wireLine("be_"+testUUID+"_p2", "s1", 200))
	b.ReportAllocs()
	for b.Loop() {
		l.handle(line)
		if out.Len() > 1<<20 {
			l.outMu.Lock()
			l.out.Flush()
			out.Reset()
			l.outMu.Unlock()
		}
	}
}
