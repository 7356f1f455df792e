package e2e

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"pier.dev/pier/test/harness"
)

// TestAPIRefusesForeignHost: DNS rebinding against `pier run`. A web page
// of evil.example, whose name the attacker re-points at 127.0.0.1, reads
// pier's API and web view as same-origin: the request reaches the
// listener with Host evil.example. pier must answer 421 to it, on the
// API and the web view alike, and keep answering its own address,
// localhost and a name listed with --api-allowed-hosts.
func TestAPIRefusesForeignHost(t *testing.T) {
	manifests, state := harness.ShortTempDir(t), harness.ShortTempDir(t)
	examples(t, manifests)
	p := harness.StartPier(t, harness.Options{Manifests: manifests, State: state,
		ExtraArgs: []string{"--api-allowed-hosts", "pier.example"}})
	_, port, _ := strings.Cut(p.API, ":")
	for _, tc := range []struct {
		host string
		want int
	}{
		{"evil.example", 421},
		{"evil.example:" + port, 421},
		{"127.0.0.1.nip.io:" + port, 421},
		{p.API, 200}, // what the README's curl lines send
		{"localhost:" + port, 200},
		{"pier.example:" + port, 200},
	} {
		for _, path := range []string{"/loadbalancers", "/ingresses/demo/simple-fanout", "/", "/metrics"} {
			req, err := http.NewRequest("GET", "http://"+p.API+path, nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Host = tc.host
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Errorf("GET %s with Host %s: %d, want %d", path, tc.host, resp.StatusCode, tc.want)
			}
			if tc.want == 421 && (strings.Contains(string(body), "demo") || strings.Contains(string(body), "<html")) {
				t.Errorf("GET %s with Host %s: the refusal leaks the answer: %.200s", path, tc.host, body)
			}
		}
	}
}
