package e2e

import (
	"context"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"pier.dev/pier/internal/api"
	"pier.dev/pier/internal/model"
	"pier.dev/pier/test/harness"
)

// healthManifests: Ingress shop/web sends web.example to Service echo,
// whose two endpoints are the echo backend (ECHOPORT) and a port where
// nothing listens (DEADPORT), and /gone to Service gone, which has no
// endpoint (HAProxy answers 503).
const healthManifests = pierClass + `
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: web, namespace: shop}
spec:
  ingressClassName: pier
  rules:
    - host: web.example
      http:
        paths:
          - {path: /, pathType: Prefix, backend: {service: {name: echo, port: {number: 80}}}}
          - {path: /gone, pathType: Prefix, backend: {service: {name: gone, port: {number: 80}}}}
---
apiVersion: v1
kind: Service
metadata: {name: gone, namespace: shop}
spec:
  ports: [{name: http, port: 80}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: echo-dead
  namespace: shop
  labels: {kubernetes.io/service-name: echo}
addressType: IPv4
ports: [{name: http, port: DEADPORT}]
endpoints:
  - addresses: ["127.0.0.1"]
    conditions: {ready: true}
    targetRef: {kind: Pod, name: dead-pod}
` + shopEcho

// TestMemberHealthAndTraffic: a member that refuses connections shows
// down in the API, the web view and `pier get`, as HAProxy's default
// health checks see it, and gets no request; the load balancer's
// requests per second and 5xx share follow the traffic sent.
func TestMemberHealthAndTraffic(t *testing.T) {
	manifests, state := harness.ShortTempDir(t), harness.ShortTempDir(t)
	port, dead := harness.StartEcho(t, "echo", "echo-pod"), harness.FreePort(t)
	harness.WriteFile(t, filepath.Join(manifests, "shop.yaml"), strings.NewReplacer(
		"ECHOPORT", strconv.Itoa(port), "DEADPORT", strconv.Itoa(dead)).Replace(healthManifests))
	p := harness.StartPier(t, harness.Options{Manifests: manifests, State: state})
	vip := p.Addresses("shop", "web")[0]
	served := time.Now()
	deadMember := "127.0.0.1:" + strconv.Itoa(dead)

	// Down within a check (inter 2s) and a members read (every 2 s on a
	// node of few load balancers), with a second for the loop's tick and
	// a margin for a loaded machine.
	var lb *model.LoadBalancer
	var report model.NodeStatus
	harness.WaitFor(t, 8*time.Second, "the refusing member reported down", func() bool {
		lb, report = servingReport(t, p)
		return report.Members == 2 && report.MembersUp == 1 && len(report.MembersDown) == 1 && report.MembersDown[0] == deadMember
	})
	t.Logf("member down in the API %v after the Ingress was served", time.Since(served).Round(100*time.Millisecond))
	page := webPage(t, p, "/ui/lb/"+lb.UUID)
	if !strings.Contains(page, `<td class="addr">127.0.0.1</td><td>`+strconv.Itoa(dead)+`</td>`) ||
		!strings.Contains(page, `down: <span class="addr">`+deadMember+`</span>`) {
		t.Errorf("detail page does not list %s down:\n%s", deadMember, page)
	}
	if n := strings.Count(page, `<td class="member-health"><span class="bad">down</span>`); n != 1 {
		t.Errorf("%d members marked down on the detail page, want 1", n)
	}
	if n := strings.Count(page, `<td class="member-health"><span class="ok">up</span>`); n != 1 {
		t.Errorf("%d members marked up on the detail page, want 1", n)
	}
	if overview := webPage(t, p, "/"); !strings.Contains(overview, ">1 / 2 up</span>") {
		t.Errorf("overview does not say 1 / 2 up:\n%s", overview)
	}

	// Every request to the echo Service reaches the member that serves:
	// the one down gets none. Four in five go there, one in five to the
	// Service with no endpoint: a 20% 5xx share, in bursts, until one
	// falls in one rate window (a window may split a burst).
	client := &http.Client{Timeout: 5 * time.Second}
	burst := func() {
		for range 10 {
			for i := range 5 {
				path, want := "/", 200
				if i == 4 {
					path, want = "/gone", 503
				}
				if code, _, _, err := harness.Get(client, vip, p.HTTPPort, "web.example", path); code != want {
					t.Fatalf("GET %s: %d (%v), want %d", path, code, err, want)
				}
			}
		}
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		burst()
		if waitRates(t, p, 2*agentRatesEvery+4*time.Second) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no rate window measured a 20% 5xx share")
		}
	}
	out, err := exec.Command(harness.PierBin(t), "get", "loadbalancers", "--api-addr", p.API).CombinedOutput()
	if err != nil {
		t.Fatalf("pier get: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 2 {
		t.Fatalf("pier get:\n%s", out)
	}
	if f := strings.Fields(lines[1]); len(f) < 11 || f[8] != "1/2" || f[10] != "20%" {
		t.Errorf("pier get row %q: want members 1/2 and a 20%% 5xx share", lines[1])
	}
}

// agentRatesEvery is pier run's rate window (agent.StatsEvery).
const agentRatesEvery = 10 * time.Second

// waitRates waits up to d for the serving report to measure requests
// and a 5xx share of 20%.
func waitRates(t *testing.T, p *harness.Pier, d time.Duration) bool {
	t.Helper()
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		if _, r := servingReport(t, p); r.RequestsPerSecond > 0 && r.ErrorShare == 0.2 {
			t.Logf("rates: %v req/s, %v 5xx", r.RequestsPerSecond, r.ErrorShare)
			return true
		}
	}
	return false
}

// servingReport is the only load balancer and its active node's report.
func servingReport(t *testing.T, p *harness.Pier) (*model.LoadBalancer, model.NodeStatus) {
	t.Helper()
	lbs, err := api.ListLoadBalancers(context.Background(), p.API)
	if err != nil || len(lbs) != 1 {
		t.Fatalf("load balancers: %d, %v", len(lbs), err)
	}
	r, _ := lbs[0].Status.Report(lbs[0].Placement.Active)
	return lbs[0], r
}

// webPage fetches a page of the web view.
func webPage(t *testing.T, p *harness.Pier, path string) string {
	t.Helper()
	resp, err := http.Get("http://" + p.API + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %v", path, resp.StatusCode, err)
	}
	return string(b)
}
