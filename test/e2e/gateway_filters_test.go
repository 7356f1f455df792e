package e2e

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"pier.dev/pier/test/harness"
)

// TestGatewayFilters serves examples/gateway/filters.yaml beside the
// Gateway example through `pier run` (real binary, real HAProxy): the
// backend sees the request headers changed and the path and Host
// rewritten, the client the response headers changed, and redirects
// carry the composed Location; the example's own routes are untouched.
func TestGatewayFilters(t *testing.T) {
	manifests, state := harness.ShortTempDir(t), harness.ShortTempDir(t)
	port := harness.FreePort(t)
	ps := strconv.Itoa(port)
	store := strconv.Itoa(harness.StartEcho(t, "webservice-1", "webserver-1-pod"))
	blog := strconv.Itoa(harness.StartEcho(t, "webservice-2", "webserver-2-pod"))
	for _, f := range []string{"gateway.yaml", "filters.yaml"} {
		b, err := os.ReadFile("../../examples/gateway/" + f)
		if err != nil {
			t.Fatal(err)
		}
		s := strings.Replace(string(b), "port: 8000", "port: "+ps, 1)
		s = strings.ReplaceAll(strings.ReplaceAll(s, "9001", store), "9004", blog)
		harness.WriteFile(t, filepath.Join(manifests, f), s)
	}
	p := harness.StartPier(t, harness.Options{Manifests: manifests, State: state})
	lb := p.ServingGateway("demo", "web")
	client := &http.Client{Timeout: 5 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	type echoed struct {
		Service string              `json:"service"`
		Path    string              `json:"path"`
		Host    string              `json:"host"`
		Headers map[string][]string `json:"headers"`
	}
	send := func(host, uri string, hdr map[string]string) (*http.Response, echoed) {
		t.Helper()
		req, err := http.NewRequest("GET", "http://"+net.JoinHostPort(lb.VIP, ps)+uri, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var e echoed
		if b, _ := io.ReadAll(resp.Body); resp.StatusCode == 200 {
			if err := json.Unmarshal(b, &e); err != nil {
				t.Fatalf("%s%s: %v: %q", host, uri, err, b)
			}
		}
		return resp, e
	}

	resp, e := send("filters.example", "/headers/a", map[string]string{"X-Debug": "1", "X-Env": "client", "X-Via": "client"})
	if resp.StatusCode != 200 || e.Service != "webservice-1" || e.Headers["X-Debug"] != nil ||
		!reflect.DeepEqual(e.Headers["X-Env"], []string{"demo"}) || !reflect.DeepEqual(e.Headers["X-Via"], []string{"client", "pier"}) ||
		resp.Header.Get("Cache-Control") != "no-store" {
		t.Errorf("/headers: %d %+v, Cache-Control %q", resp.StatusCode, e, resp.Header.Get("Cache-Control"))
	}
	resp, e = send("filters.example", "/api/v1/items?id=7", nil)
	if resp.StatusCode != 200 || e.Service != "webservice-2" || e.Path != "/v1/items?id=7" || e.Host != "internal.example" {
		t.Errorf("/api: %d %+v", resp.StatusCode, e)
	}
	for _, r := range []struct {
		uri      string
		code     int
		location string
	}{
		{"/old/page?x=1", 301, "http://filters.example:" + ps + "/new/page?x=1"},
		{"/old", 301, "http://filters.example:" + ps + "/new"},
		{"/moved?q=1", 302, "https://shop.example/?q=1"},
	} {
		resp, _ := send("filters.example:"+ps, r.uri, nil)
		if resp.StatusCode != r.code || resp.Header.Get("Location") != r.location {
			t.Errorf("%s: %d %q, want %d %q", r.uri, resp.StatusCode, resp.Header.Get("Location"), r.code, r.location)
		}
	}
	// The example's route on shop.example has no filters.
	resp, e = send("shop.example", "/blog/post", map[string]string{"X-Debug": "1"})
	if resp.StatusCode != 200 || e.Service != "webservice-2" || e.Path != "/blog/post" || e.Headers["X-Debug"] == nil ||
		resp.Header.Get("Cache-Control") != "" {
		t.Errorf("shop.example: %d %+v", resp.StatusCode, e)
	}
}
