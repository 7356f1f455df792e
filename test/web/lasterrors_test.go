package web

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"pier.dev/pier/internal/api"
	"pier.dev/pier/test/harness"
)

// goneIngress routes gone.example to a Service with no endpoint: HAProxy
// answers 503 itself.
const goneIngress = `
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: gone, namespace: demo}
spec:
  ingressClassName: pier
  rules:
    - host: gone.example
      http:
        paths:
          - {path: /, pathType: Prefix, backend: {service: {name: gone, port: {number: 80}}}}
---
apiVersion: v1
kind: Service
metadata: {name: gone, namespace: demo}
spec:
  ports: [{name: http, port: 80}]
`

// TestLastErrorsPage: the 503s of a route with no member appear on the
// load balancer's page within a rate window (the page updates in place),
// a hostile path (no space: HAProxy refuses a request line with more) is
// text and runs nothing, and a path as long as pier
// keeps, one word with no place to break, does not widen the page past
// a 1280 px window.
func TestLastErrorsPage(t *testing.T) {
	ctx := newBrowser(t)
	p, manifests := startPier(t)
	harness.WriteFile(t, filepath.Join(manifests, "zz-gone.yaml"), goneIngress)
	vip := p.Addresses("demo", "gone")[0]
	var uuid string
	harness.WaitFor(t, 10*time.Second, "demo/gone's load balancer", func() bool {
		ing, err := p.Ingress("demo", "gone")
		if err != nil || len(ing.LoadBalancers) != 1 {
			return false
		}
		uuid = ing.LoadBalancers[0].UUID
		return uuid != ""
	})
	do(t, ctx, "open its page", chromedp.Navigate("http://"+p.API+"/ui/lb/"+uuid), chromedp.WaitVisible(chromedp.CSS("#no-errors")))
	long := "/" + strings.Repeat("averyverylongsegmentwithoutabreak", 40)
	rawGet(t, vip, p.HTTPPort, "gone.example", long)
	// The row shows the newest request of its kind by HAProxy's clock,
	// in milliseconds: the second must be accepted in a later one.
	time.Sleep(20 * time.Millisecond)
	rawGet(t, vip, p.HTTPPort, "gone.example", "/x/<img/src=x/onerror=window.__pierPwned=1>")
	poll(t, ctx, `document.querySelectorAll("#live tr.error").length === 1`, 25*time.Second)
	row := eval[string](t, ctx, `document.querySelector("#live tr.error").innerText`)
	for _, want := range []string{"503", "gone.example/x/<img/src=x/onerror=window.__pierPwned=1>", "demo/gone", "gone:80", "no member", "since"} {
		if !strings.Contains(row, want) {
			t.Errorf("error row %q: missing %q", row, want)
		}
	}
	if v := eval[string](t, ctx, `typeof window.__pierPwned`); v != "undefined" {
		t.Errorf("an injected script ran: window.__pierPwned is %s", v)
	}
	if n := eval[int](t, ctx, `document.querySelectorAll("#live img, #live script").length`); n != 0 {
		t.Errorf("%d img/script elements made it into the page", n)
	}
	// The long path came first: it is the kind's, and pier cut it.
	lbs, err := api.ListLoadBalancers(t.Context(), p.API)
	if err != nil {
		t.Fatal(err)
	}
	for _, lb := range lbs {
		for _, r := range lb.Status.Nodes {
			for _, e := range r.RecentErrors {
				if e.Count != 2 || e.Status != 503 || e.Route != "gone" {
					t.Errorf("%s: %+v, want the two 503s of demo/gone in one kind", lb.Name, e)
				}
			}
		}
	}
	screenshot(t, ctx, "lasterrors")
	// The newest request is the kind's: send the long path again and
	// wait for the page to show it.
	rawGet(t, vip, p.HTTPPort, "gone.example", long)
	poll(t, ctx, `document.querySelector("#live tr.error td.req").innerText.includes("averyverylong")`, 25*time.Second)
	width := eval[float64](t, ctx, `document.documentElement.scrollWidth`)
	if view := eval[float64](t, ctx, `document.documentElement.clientWidth`); width > view+1 {
		cells := eval[[]string](t, ctx, `Array.from(document.querySelectorAll("#live tr.error td")).map(c => c.getBoundingClientRect().width + ":" + c.innerText.slice(0, 30))`)
		t.Errorf("the page is %.0f px wide in a %.0f px window: %q", width, view, cells)
	}
	screenshot(t, ctx, "lasterrors-long")
}

// rawGet sends path as written (Go's client would escape it) and wants
// HAProxy's 503.
func rawGet(t *testing.T, addr string, port int, host, path string) {
	t.Helper()
	c, err := net.DialTimeout("tcp", net.JoinHostPort(addr, strconv.Itoa(port)), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", path, host)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("GET %s: %d, want 503", path, resp.StatusCode)
	}
}
