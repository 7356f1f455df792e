package conformance

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/cucumber/godog"
)

func sample() exchange {
	return exchange{
		req: &capturedRequest{
			Path: "/sub-path", Host: "my-host", Method: "GET", Proto: "HTTP/1.1",
			Headers: map[string][]string{"User-Agent": {"Go-http-client/1.1"}, "X-Two": {"a", "b"}},
			Service: "echo-service",
		},
		res: &capturedResponse{
			StatusCode: 200, Proto: "HTTP/1.1",
			Headers: http.Header{"Content-Length": {"123"}, "Server": {"haproxy"}},
		},
	}
}

func TestAssertions(t *testing.T) {
	e := sample()
	tests := []struct {
		name string
		err  error
		ok   bool
	}{
		{"status", e.statusCode(200), true},
		{"status mismatch", e.statusCode(404), false},
		{"served by", e.servedBy("echo-service"), true},
		{"served by other", e.servedBy("foo-exact"), false},
		{"path with slash", e.requestPath("/sub-path"), true},
		{"path without slash gets one", e.requestPath("sub-path"), true},
		{"empty path is root", exchange{req: &capturedRequest{Path: "/"}, res: e.res}.requestPath(""), true},
		{"path is exact", e.requestPath("sub"), false},
		{"path keeps query", exchange{req: &capturedRequest{Path: "/a?b"}, res: e.res}.requestPath("a"), false},
		{"host", e.requestHost("my-host"), true},
		{"host mismatch", e.requestHost("other"), false},
		{"method", e.method("GET"), true},
		{"method mismatch", e.method("POST"), false},
		{"response proto", e.responseProto("HTTP/1.1"), true},
		{"response proto mismatch", e.responseProto("HTTP/2.0"), false},
		{"request proto", e.requestProto("HTTP/1.1"), true},
		{"header any value", e.responseHeader("Server", "*"), true},
		{"header missing", e.responseHeader("Date", "*"), false},
		{"header key exact", e.responseHeader("server", "*"), false},
		{"header value", e.requestHeader("User-Agent", "Go-http-client/1.1"), true},
		{"header one of values", e.requestHeader("X-Two", "b"), true},
		{"header value mismatch", e.requestHeader("User-Agent", "curl"), false},
		{"nothing sent", exchange{}.statusCode(200), false},
	}
	for _, tc := range tests {
		if (tc.err == nil) != tc.ok {
			t.Errorf("%s: err = %v, want ok=%v", tc.name, tc.err, tc.ok)
		}
	}
	if err := (exchange{}).servedBy("x"); !errors.Is(err, errNoRequest) {
		t.Errorf("check before any request: %v, want errNoRequest", err)
	}
}

// table builds a step table through its JSON form, which spares this
// package a direct dependency on the cucumber messages module.
func table(rows ...[]string) *godog.Table {
	type cell struct {
		Value string `json:"value"`
	}
	type row struct {
		Cells []cell `json:"cells"`
	}
	var doc struct {
		Rows []row `json:"rows"`
	}
	for _, r := range rows {
		var cells []cell
		for _, v := range r {
			cells = append(cells, cell{v})
		}
		doc.Rows = append(doc.Rows, row{cells})
	}
	raw, err := json.Marshal(doc)
	if err != nil {
		panic(err)
	}
	tb := &godog.Table{}
	if err := json.Unmarshal(raw, tb); err != nil {
		panic(err)
	}
	return tb
}

func TestHeaderTable(t *testing.T) {
	var seen []string
	record := func(k, v string) error { seen = append(seen, k+"="+v); return nil }

	good := table([]string{"key", "value"}, []string{"Content-Length", "*"}, []string{"Server", "*"})
	if err := headerTable(good, record); err != nil {
		t.Fatal(err)
	}
	if strings.Join(seen, ",") != "Content-Length=*,Server=*" {
		t.Errorf("checked %v, want the two data rows", seen)
	}

	failing := func(k, v string) error { return errors.New("missing " + k) }
	if err := headerTable(good, failing); err == nil || !strings.Contains(err.Error(), "Content-Length") {
		t.Errorf("a failing row: %v", err)
	}
	for name, tb := range map[string]*godog.Table{
		"no rows":       nil,
		"header only":   table([]string{"key", "value"}),
		"bad header":    table([]string{"name", "value"}, []string{"A", "*"}),
		"three columns": table([]string{"key", "value"}, []string{"A", "*", "x"}),
	} {
		if err := headerTable(tb, record); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestDistinctPods(t *testing.T) {
	p := podsByStatus{}
	for i := range 100 {
		p.add(200, "pod-"+string(rune('a'+i%10)))
	}
	p.add(502, "")
	if err := p.distinctPods(200, 10); err != nil {
		t.Errorf("10 pods: %v", err)
	}
	if err := p.distinctPods(200, 9); err == nil {
		t.Error("10 pods passed as 9")
	}
	if err := p.distinctPods(404, 10); err == nil {
		t.Error("no 404 responses passed")
	}
	if got := p.String(); got != "200: 10 pods; 502: 1 pods" {
		t.Errorf("String() = %q", got)
	}
}
