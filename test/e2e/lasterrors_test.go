package e2e

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"pier.dev/pier/internal/model"
	"pier.dev/pier/test/harness"
)

// lastErrorsManifests: Ingress shop/web sends web.example/ to the echo
// backend, /bad to Service bad, whose one member answers every request
// with its own 502 (BADPORT), and /gone to Service gone, which has no
// endpoint (HAProxy answers 503 itself).
const lastErrorsManifests = pierClass + `
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
          - {path: /bad, pathType: Prefix, backend: {service: {name: bad, port: {number: 80}}}}
          - {path: /gone, pathType: Prefix, backend: {service: {name: gone, port: {number: 80}}}}
---
apiVersion: v1
kind: Service
metadata: {name: gone, namespace: shop}
spec:
  ports: [{name: http, port: 80}]
---
apiVersion: v1
kind: Service
metadata: {name: bad, namespace: shop}
spec:
  ports: [{name: http, port: 80}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: bad-a
  namespace: shop
  labels: {kubernetes.io/service-name: bad}
addressType: IPv4
ports: [{name: http, port: BADPORT}]
endpoints:
  - addresses: ["127.0.0.1"]
    conditions: {ready: true}
    targetRef: {kind: Pod, name: bad-pod}
` + shopEcho

// hostilePath is a path a client may send that must stay text on every
// page and in pier get.
const hostilePath = "/gone/<script>alert(1)</script>"

// TestLastErrors: a member answering 502 and a Service with no member
// (HAProxy's 503) show in the load balancer's status (the API), its
// page, its Ingress's page and pier get errors, each with its route,
// Service, member or none, count and request id, within a rate window
// of pier run (10 s); a 404 and the 200s do not; a hostile path stays
// text.
func TestLastErrors(t *testing.T) {
	manifests, state := harness.ShortTempDir(t), harness.ShortTempDir(t)
	port, bad := harness.StartEcho(t, "echo", "echo-pod"), start502(t)
	harness.WriteFile(t, filepath.Join(manifests, "shop.yaml"), strings.NewReplacer(
		"ECHOPORT", strconv.Itoa(port), "BADPORT", strconv.Itoa(bad)).Replace(lastErrorsManifests))
	p := harness.StartPier(t, harness.Options{Manifests: manifests, State: state})
	vip := p.Addresses("shop", "web")[0]

	client := &http.Client{Timeout: 5 * time.Second}
	send := func(path, rid string, want int) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, "http://"+net.JoinHostPort(vip, strconv.Itoa(p.HTTPPort))+path, nil)
		req.Host = "web.example"
		if rid != "" {
			req.Header.Set("X-Request-ID", rid)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Fatalf("GET %s: %d, want %d", path, resp.StatusCode, want)
		}
	}
	// The health check of the 502 member only connects: it is up, and
	// gets the requests.
	harness.WaitFor(t, 10*time.Second, "the 502 member up", func() bool {
		_, r := servingReport(t, p)
		return r.Members == 2 && r.MembersUp == 2
	})
	sent := time.Now()
	for i := range 3 {
		send("/bad/cart", "e2e-bad-"+strconv.Itoa(i), 502)
	}
	send("/gone", "", 503)
	// HAProxy logs a request when its stream ends, on whichever thread
	// ran it: two requests on two connections may reach the agent in
	// either order, within the same millisecond. The hostile path must
	// be the kind's newest sample, so it goes once the first is counted.
	harness.WaitFor(t, 5*time.Second, "the first 503 counted", func() bool {
		return p.Metric("pier_ingress_requests_total", `service="gone"`) == 1
	})
	sendRaw(t, vip, p.HTTPPort, hostilePath, 503)
	for range 5 {
		send("/", "", 200)
	}
	if code, _, _, err := harness.Get(client, vip, p.HTTPPort, "nobody.example", "/"); code != 404 {
		t.Fatalf("GET a host no rule names: %d (%v), want 404", code, err)
	}

	var member, none model.RequestError
	harness.WaitFor(t, 3*agentRatesEvery, "the 502 and the 503 in the load balancer's status", func() bool {
		_, r := servingReport(t, p)
		member, none = model.RequestError{}, model.RequestError{}
		for _, e := range r.RecentErrors {
			switch e.Status {
			case 502:
				member = e
			case 503:
				none = e
			}
		}
		return member.Count == 3 && none.Count == 2
	})
	t.Logf("errors in the status %v after the first", time.Since(sent).Round(100*time.Millisecond))
	badMember := "127.0.0.1:" + strconv.Itoa(bad)
	if member.Namespace != "shop" || member.Route != "web" || member.RouteKind != "Ingress" || member.Service != "bad" ||
		member.Member != badMember || member.Pod != "bad-pod" || member.RequestID != "e2e-bad-2" || member.Path != "/bad/cart" ||
		member.Method != "GET" || member.Host != "web.example" || member.First.After(member.Last) || member.First.Before(sent.Add(-time.Second)) {
		t.Errorf("the member's 502: %+v", member)
	}
	if none.Route != "web" || none.Service != "gone" || none.Member != "" || none.Pod != "" || none.Path != hostilePath ||
		!strings.HasPrefix(none.TerminationState, "S") || none.RequestID == "" {
		t.Errorf("HAProxy's 503 (no member): %+v", none)
	}
	lb, r := servingReport(t, p)
	if len(r.RecentErrors) != 2 {
		t.Errorf("%d kinds, want 2 (no 200, no 404): %+v", len(r.RecentErrors), r.RecentErrors)
	}

	page := webPage(t, p, "/ui/lb/"+lb.UUID)
	for _, want := range []string{`<span class="bad">502</span>`, `<span class="bad">503</span>`, `<a href="/ui/ingress/shop/web">shop/web</a>`,
		"→ bad:80", "→ gone:80", badMember, "bad-pod", "no member", "e2e-bad-2", "web.example/bad/cart",
		"web.example/gone/&lt;script&gt;alert(1)&lt;/script&gt;"} {
		if !strings.Contains(page, want) {
			t.Errorf("load balancer's page: missing %q", want)
		}
	}
	if strings.Contains(page, "<script>alert") {
		t.Error("load balancer's page: the hostile path is markup")
	}
	if resp, err := p.Ingress("shop", "web"); err != nil || len(resp.LoadBalancers) != 1 || len(resp.LoadBalancers[0].RecentErrors) != 2 {
		t.Errorf("the Ingress in the API: %v, %+v; want its load balancer with the 2 kinds", err, resp)
	}
	ing := webPage(t, p, "/ui/ingress/shop/web")
	if n := strings.Count(ing, `<tr class="error">`); n != 2 || !strings.Contains(ing, "e2e-bad-2") {
		t.Errorf("Ingress page: %d error rows, want 2 with the 502's request id", n)
	}

	out, err := exec.Command(harness.PierBin(t), "get", "errors", "--api-addr", p.API).CombinedOutput()
	if err != nil {
		t.Fatalf("pier get errors: %v\n%s", err, out)
	}
	t.Logf("pier get errors:\n%s", out)
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 3 || !strings.Contains(string(out), "Ingress/shop/web") || !strings.Contains(string(out), badMember) ||
		!strings.Contains(string(out), "GET web.example"+hostilePath) {
		t.Errorf("pier get errors:\n%s", out)
	}
	out, err = exec.Command(harness.PierBin(t), "get", "loadbalancers", "--api-addr", p.API).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "LAST-5XX") || !strings.Contains(string(out), " 50") {
		t.Errorf("pier get loadbalancers: %v\n%s", err, out)
	}
}

// start502 serves a member that answers every request with its own 502.
func start502(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				c.SetDeadline(time.Now().Add(5 * time.Second))
				br := bufio.NewReader(c)
				for {
					req, err := http.ReadRequest(br)
					if err != nil {
						return // a health check: connect and close
					}
					io.Copy(io.Discard, req.Body)
					if _, err := io.WriteString(c, "HTTP/1.1 502 Bad Gateway\r\nContent-Length: 3\r\n\r\nbad"); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port
}

// sendRaw sends path as written (Go's client would escape it) and checks
// the status.
func sendRaw(t *testing.T, addr string, port int, path string, want int) {
	t.Helper()
	c, err := net.DialTimeout("tcp", net.JoinHostPort(addr, strconv.Itoa(port)), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: web.example\r\nConnection: close\r\n\r\n", path)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	resp.Body.Close()
	if resp.StatusCode != want {
		t.Fatalf("GET %s: %d, want %d", path, resp.StatusCode, want)
	}
}
