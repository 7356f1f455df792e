package bench

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"pier.dev/pier/internal/source"
	"pier.dev/pier/internal/translate"
)

// stateDir stands in for --state-dir in rendered paths; nothing is written.
const stateDir = "/var/lib/pier"

type controlCase struct {
	name     string
	snap     func() *source.Snapshot
	lbs      int // load balancers the snapshot must translate to
	policies int // policies of the first load balancer's listener
}

var controlCases = []controlCase{
	{name: "ingresses=100", snap: func() *source.Snapshot { return ManyIngresses(100) }, lbs: 100, policies: 2},
	{name: "ingresses=1000", snap: func() *source.Snapshot { return ManyIngresses(1000) }, lbs: 1000, policies: 2},
	{name: "ingresses=10000", snap: func() *source.Snapshot { return ManyIngresses(10000) }, lbs: 10000, policies: 2},
	{name: "group-paths=1000", snap: func() *source.Snapshot { return GroupIngresses(1000) }, lbs: 1, policies: 1000},
}

// BenchmarkControlPlane times, per snapshot, translate.Ingresses plus
// render.Config of every load balancer ("pier"), and json.Marshal of the
// same snapshot ("json"): the baseline the report divides by. Both run
// back to back on the same objects, so their ratio cancels most of the
// machine's speed and load.
func BenchmarkControlPlane(b *testing.B) {
	opts := translate.DefaultOptions()
	for _, c := range controlCases {
		snap := c.snap()
		b.Run(c.name+"/pier", func(b *testing.B) {
			var lbs, bytes int
			for b.Loop() {
				var err error
				if lbs, bytes, err = TranslateAndRender(snap, opts, stateDir); err != nil {
					b.Fatal(err)
				}
			}
			if lbs != c.lbs {
				b.Fatalf("%d load balancers, want %d", lbs, c.lbs)
			}
			b.ReportMetric(float64(bytes), "conf-bytes/op")
		})
		b.Run(c.name+"/json", func(b *testing.B) {
			var n int
			for b.Loop() {
				out, err := json.Marshal(snap)
				if err != nil {
					b.Fatal(err)
				}
				n = len(out)
			}
			b.ReportMetric(float64(n), "json-bytes/op")
		})
	}
}

// TestControlPlaneFixtures checks the benchmark snapshots translate as
// described, with no problems, and render.
func TestControlPlaneFixtures(t *testing.T) {
	opts := translate.DefaultOptions()
	for _, c := range controlCases {
		if c.lbs > 1000 && testing.Short() {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			snap := c.snap()
			res := translate.Ingresses(snap, opts)
			if len(res.Problems) > 0 {
				t.Fatalf("problems: %v", res.Problems)
			}
			if len(res.LoadBalancers) != c.lbs {
				t.Fatalf("%d load balancers, want %d", len(res.LoadBalancers), c.lbs)
			}
			if got := len(res.LoadBalancers[0].Listeners[0].Policies); got != c.policies {
				t.Errorf("first load balancer has %d policies, want %d", got, c.policies)
			}
			if _, _, err := TranslateAndRender(snap, opts, stateDir); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestDataPlaneFixture checks the 50-policy load balancer translates and
// renders, and that the reference config keeps pier's timeouts and maxconn.
func TestDataPlaneFixture(t *testing.T) {
	conf, lb, err := DataPlaneConfig(9001, 9002, "127.0.0.1", 8080, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if len(lb.Pools) != 11 {
		t.Errorf("%d pools, want 11", len(lb.Pools))
	}
	ref := ReferenceConfig("127.0.0.1:8081", "127.0.0.1:9001")
	// The TCP defaults (ssl-passthrough's, unused here) are left out:
	// the reference has only the HTTP proxies the benchmark runs.
	httpConf := withoutSection(conf, "defaults pier_tcp")
	for _, word := range []string{"maxconn", "timeout"} {
		if a, b := linesStarting(httpConf, word), linesStarting(ref, word); fmt.Sprint(a) != fmt.Sprint(b) {
			t.Errorf("%s lines differ:\npier:      %q\nreference: %q", word, a, b)
		}
	}
}

// TestRoutingNginxFixture checks the nginx reference of the routing
// measurement: every route of the fixture has its location, the catch-all
// is the default server's, and nginx (when installed) accepts the file.
func TestRoutingNginxFixture(t *testing.T) {
	dir := t.TempDir()
	_, lb, err := RoutingConfig(120, 8080, 8081, 18080, dir)
	if err != nil {
		t.Fatal(err)
	}
	conf, err := RoutingNginx(lb, "127.0.0.1:18082", "127.0.0.1:8080", "127.0.0.1:8081", dir)
	if err != nil {
		t.Fatal(err)
	}
	s := string(conf)
	for _, want := range []string{
		"server_name " + RoutingFirstHost + ";\n        location = /health { proxy_pass http://be_target; }",
		"listen 127.0.0.1:18082 default_server;\n        server_name _;\n        location / { proxy_pass http://be_target; }",
		"location = /api/v1 { proxy_pass http://be_decoy_",
		"location /api/v1/ { proxy_pass http://be_decoy_",
		"upstream be_target { server 127.0.0.1:8080; keepalive 64; }",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("nginx config lacks %q", want)
		}
	}
	// The first route and the catch-all, then 118 Prefix routes cycling
	// through /api/v1, /api, /static and /: two locations each but for
	// the 29 "/".
	if n, want := strings.Count(s, "location "), 2+(118-29)*2+29; n != want {
		t.Errorf("%d locations, want %d", n, want)
	}
	if _, err := exec.LookPath("nginx"); err != nil {
		t.Log("nginx not installed: its check of the file skipped")
		return
	}
	cfg := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(cfg, conf, 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("nginx", "-t", "-q", "-p", dir, "-e", filepath.Join(dir, "error.log"), "-c", cfg).CombinedOutput(); err != nil {
		t.Errorf("nginx -t: %v\n%s", err, out)
	}
}
