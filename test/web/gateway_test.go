package web

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"pier.dev/pier/test/harness"
)

// TestGatewayWebView serves examples/gateway/gateway.yaml and two routes
// pier refuses through the real `pier run`, and reads them in Chromium:
// the Gateway's load balancer row names the Gateway and links to its
// page; that page lists the listener with attachedRoutes and its
// conditions (Programmed once HAProxy serves it), the route attached and
// the refused ones with their reasons; a hostile header value is text;
// the page works with JavaScript off. `pier get gateways` and `pier get
// httproutes` print the same status.
func TestGatewayWebView(t *testing.T) {
	ctx := newBrowser(t)
	manifests, state := harness.ShortTempDir(t), harness.ShortTempDir(t)
	b, err := os.ReadFile("../../examples/gateway/gateway.yaml")
	if err != nil {
		t.Fatal(err)
	}
	port := harness.FreePort(t)
	harness.WriteFile(t, filepath.Join(manifests, "gateway.yaml"), strings.Replace(string(b), "port: 8000", "port: "+strconv.Itoa(port), 1))
	harness.WriteFile(t, filepath.Join(manifests, "refused.yaml"), refusedRoutes)
	p := harness.StartPier(t, harness.Options{Manifests: manifests, State: state})
	base := "http://" + p.API

	t.Run("the load balancer row says which Gateway it is", func(t *testing.T) {
		do(t, ctx, "open overview", chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS("#lb-rows tr.row")))
		poll(t, ctx, `document.querySelectorAll("#lb-rows tr.row.row-ACTIVE").length === 1`, 20*time.Second)
		row := eval[string](t, ctx, `document.querySelector("#lb-rows tr.row").innerText`)
		if !strings.Contains(row, "demo/web (Gateway)") {
			t.Errorf("overview row %q: want the source demo/web (Gateway)", row)
		}
		// The refused route's problem counts on its Gateway's row and above the table.
		if c := eval[string](t, ctx, `document.querySelector("#lb-rows tr.row td.problems .bad").innerText`); c != "1" {
			t.Errorf("problems on the Gateway's row %q, want 1", c)
		}
		if c := eval[string](t, ctx, `document.getElementById("gw-problem-count").innerText`); !strings.HasPrefix(c, "1 Gateway API object") {
			t.Errorf("Gateway problem count %q", c)
		}
		screenshot(t, ctx, "gateway-overview")
		do(t, ctx, "open the Gateway", chromedp.Click(chromedp.CSS(`#lb-rows a[href="/ui/gateway/demo/web"]`)),
			chromedp.WaitVisible(chromedp.CSS("table.listeners")))
	})

	t.Run("the Gateway page shows listeners, attached and refused routes", func(t *testing.T) {
		do(t, ctx, "open the Gateway", chromedp.Navigate(base+"/ui/gateway/demo/web"), chromedp.WaitVisible(chromedp.CSS("table.listeners")))
		// Programmed=True once the agent reports the load balancer serving.
		poll(t, ctx, `document.getElementById("gw-conditions").innerText.includes("Programmed=True")`, 10*time.Second)
		listener := eval[string](t, ctx, `document.querySelector("#listener-rows tr").innerText`)
		for _, want := range []string{"http", "HTTP", strconv.Itoa(port), "Accepted=True", "Programmed=True", "HTTPRoute"} {
			if !strings.Contains(listener, want) {
				t.Errorf("listener row %q: missing %q", listener, want)
			}
		}
		// shop and bad-value select the listener (attachedRoutes counts a
		// route that is not accepted, as the spec says); no-section does not.
		if n := eval[string](t, ctx, `document.querySelector("#listener-rows td.attached").innerText`); n != "2" {
			t.Errorf("attachedRoutes %q, want 2", n)
		}
		if lb := eval[string](t, ctx, `document.getElementById("gw-lb").innerText`); lb != "gateway:demo/web" {
			t.Errorf("load balancer %q", lb)
		}
		tables := eval[[]string](t, ctx, `Array.from(document.querySelectorAll("table.attachments")).map(t => t.innerText)`)
		if len(tables) != 2 {
			t.Fatalf("%d attachment tables, want attached and refused", len(tables))
		}
		if !strings.Contains(tables[0], "demo/shop") || !strings.Contains(tables[0], "Accepted=True") || strings.Contains(tables[0], "bad-value") {
			t.Errorf("attached:\n%s", tables[0])
		}
		for _, want := range []string{"demo/bad-value", "Accepted=False/UnsupportedValue", "demo/no-section", "Accepted=False/NoMatchingParent"} {
			if !strings.Contains(tables[1], want) {
				t.Errorf("refused: missing %q in\n%s", want, tables[1])
			}
		}
		text := eval[string](t, ctx, `document.body.textContent`)
		if !strings.Contains(text, `<img src=x onerror=window.__pierPwned=5>`) {
			t.Error("the hostile header value is not shown as text in the route's problem")
		}
		if v := eval[string](t, ctx, `typeof window.__pierPwned`); v != "undefined" {
			t.Errorf("an injected script ran: window.__pierPwned is %s", v)
		}
		if n := eval[int](t, ctx, `document.querySelectorAll("#live img, #live script").length`); n != 0 {
			t.Errorf("%d img/script elements made it into the page", n)
		}
		screenshot(t, ctx, "gateway")
		do(t, ctx, "open the refused route", chromedp.Click(chromedp.CSS(`table.attachments a[href="/ui/httproute/demo/bad-value"]`)),
			chromedp.WaitVisible(chromedp.CSS("table.parents")))
		route := eval[string](t, ctx, `document.getElementById("live").innerText`)
		for _, want := range []string{"Accepted=False/UnsupportedValue", "pier.dev/gateway-controller", "header X-Evil=", "gw-store:80"} {
			if !strings.Contains(route, want) {
				t.Errorf("route page: missing %q", want)
			}
		}
		screenshot(t, ctx, "httproute")
	})

	t.Run("a new route appears without a reload", func(t *testing.T) {
		do(t, ctx, "open Gateways", chromedp.Navigate(base+"/ui/gateways"), chromedp.WaitVisible(chromedp.CSS("#route-rows tr")))
		eval[bool](t, ctx, `window.__sameDocument = true`)
		harness.WriteFile(t, filepath.Join(manifests, "zz-live.yaml"), liveRoute)
		poll(t, ctx, `document.getElementById("route-rows").innerText.includes("live-added")`, 3*time.Second)
		// Attached to the listener: attachedRoutes grows in the Gateway's row.
		poll(t, ctx, `document.querySelector("#gateway-rows tr").innerText.includes("\t3\t")`, 3*time.Second)
		if !eval[bool](t, ctx, `window.__sameDocument === true`) {
			t.Error("the page was reloaded: the live update must replace the table bodies only")
		}
		if err := os.Remove(filepath.Join(manifests, "zz-live.yaml")); err != nil {
			t.Fatal(err)
		}
		poll(t, ctx, `!document.getElementById("route-rows").innerText.includes("live-added")`, 3*time.Second)
	})

	t.Run("works with JavaScript off", func(t *testing.T) {
		noJS := newBrowserNoJS(t)
		do(t, noJS, "open Gateways", chromedp.Navigate(base+"/ui/gateways"), chromedp.WaitReady(chromedp.CSS("#gateway-rows")))
		rows := eval[[]string](t, noJS, `Array.from(document.querySelectorAll("#gateway-rows tr, #route-rows tr")).map(r => r.innerText)`)
		if len(rows) != 4 || !strings.Contains(rows[0], "web") || !strings.Contains(strings.Join(rows, "\n"), "NoMatchingParent") {
			t.Errorf("JS off: rows %q, want the Gateway and three routes", rows)
		}
		screenshot(t, noJS, "gateways-nojs")
	})

	t.Run("pier get gateways and httproutes", func(t *testing.T) {
		out, err := exec.Command(harness.PierBin(t), "get", "gateways", "--api-addr", p.API).CombinedOutput()
		if err != nil || !regexpMatch(`(?m)^demo\s+web\s+pier\s+\S+\s+True\s+\S+\s+\d+s$`, string(out)) {
			t.Errorf("pier get gateways: %v\n%s", err, out)
		}
		out, err = exec.Command(harness.PierBin(t), "get", "httproutes", "--api-addr", p.API).CombinedOutput()
		if err != nil || !regexpMatch(`(?m)^demo\s+bad-value\s+shop.example\s+demo/web\s+False/UnsupportedValue\s`, string(out)) ||
			!regexpMatch(`(?m)^demo\s+shop\s+shop.example\s+demo/web\s+True\s`, string(out)) {
			t.Errorf("pier get httproutes: %v\n%s", err, out)
		}
		out, err = exec.Command(harness.PierBin(t), "get", "loadbalancers", "--api-addr", p.API).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "Gateway/demo/web") {
			t.Errorf("pier get loadbalancers: %v\n%s", err, out)
		}
	})
}

func regexpMatch(re, s string) bool {
	ok, _ := regexp.MatchString(re, s)
	return ok
}

const liveRoute = `
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: live-added, namespace: demo}
spec:
  parentRefs: [{name: web}]
  hostnames: ["live.example"]
  rules:
    - backendRefs: [{name: gw-store, port: 80}]
`

// refusedRoutes: one route with a header value pier refuses (and markup
// in it), one whose sectionName names no listener of the Gateway.
const refusedRoutes = `
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: bad-value, namespace: demo}
spec:
  parentRefs: [{name: web}]
  hostnames: ["shop.example"]
  rules:
    - matches:
        - headers: [{name: X-Evil, value: "<img src=x onerror=window.__pierPwned=5>$"}]
      backendRefs: [{name: gw-store, port: 80}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: no-section, namespace: demo}
spec:
  parentRefs: [{name: web, sectionName: nope}]
  rules:
    - backendRefs: [{name: gw-store, port: 80}]
`
