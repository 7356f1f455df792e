// Package web drives pier's web view in headless Chromium against a real
// `pier run` (the binary, real HAProxy, the examples/ manifests): the
// overview lists the seed examples with their addresses and the health
// and reload counts their agent reports, a load balancer opens onto its
// pools and members, an edited manifest shows up without a reload, a
// member joining counts a runtime update, and hostile strings stay text.
// A Gateway, its listeners and its attached and refused routes are read
// the same way (gateway_test.go).
// The failover history, which needs a pair, is rendered from a store
// holding two agents' reports (failover_test.go). Screenshots of every page are
// written to $PIER_WEB_ARTIFACTS (default test/web/artifacts, ignored by
// git); docs/img/ holds reviewed copies.
//
// Without Chromium the test skips, unless CI is set: then it fails, since
// hack/deps.sh installs Chromium.
package web

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"pier.dev/pier/test/harness"
)

// browser finds Chromium: Debian's chromium package, or what $CHROMIUM names.
func browser(t *testing.T) string {
	t.Helper()
	names := []string{"chromium", "chromium-browser", "google-chrome"}
	if p := os.Getenv("CHROMIUM"); p != "" {
		names = []string{p}
	}
	for _, name := range names {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("chromium is not installed and CI is set: hack/deps.sh installs it (apt-get install chromium)")
	}
	t.Skip("chromium is not installed (apt-get install chromium, or run hack/deps.sh); set CI=true to make this a failure")
	return ""
}

// newBrowser starts a fresh headless Chromium with its own profile; the
// pages it opens only ever go to 127.0.0.1.
func newBrowser(t *testing.T) context.Context {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(browser(t)),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("hide-scrollbars", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1400, 900),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(actx)
	ctx, cancelTimeout := context.WithTimeout(ctx, 2*time.Minute)
	t.Cleanup(func() { cancelTimeout(); cancelCtx(); cancelAlloc() })
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1280, 400)); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

func artifacts(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("PIER_WEB_ARTIFACTS")
	if dir == "" {
		dir = "artifacts"
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	path := filepath.Join(artifacts(t), name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
}

func eval[T any](t *testing.T, ctx context.Context, js string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](js))
	if err != nil {
		t.Fatalf("evaluate %s: %v", js, err)
	}
	return v
}

func do(t *testing.T, ctx context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// startPier runs the real binary on a copy of examples/, their
// EndpointSlices pointed at echo backends started for the test: HAProxy
// checks every member, and a member nobody serves shows down.
func startPier(t *testing.T) (*harness.Pier, string) {
	t.Helper()
	manifests, state := harness.ShortTempDir(t), harness.ShortTempDir(t)
	files, err := filepath.Glob("../../examples/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples: %v", err)
	}
	ports := map[string]int{
		"9001": harness.StartEcho(t, "webservice-1", "webserver-1-pod"),
		"9002": harness.StartEcho(t, "webservice-dev", "webserver-dev-pod"),
		"9003": harness.StartEcho(t, "webservice-qa", "webserver-qa-pod"),
		"9004": harness.StartEcho(t, "webservice-2", "webserver-2-pod"),
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		s := string(b)
		for fixed, port := range ports {
			s = strings.ReplaceAll(s, fixed, strconv.Itoa(port))
		}
		harness.WriteFile(t, filepath.Join(manifests, filepath.Base(f)), s)
	}
	return harness.StartPier(t, harness.Options{Manifests: manifests, State: state}), manifests
}

var examples = []string{"simple-fanout", "single-service", "virtual-hosting"}

func TestWebView(t *testing.T) {
	ctx := newBrowser(t)
	p, manifests := startPier(t)
	addrs := map[string][]string{}
	for _, name := range examples {
		addrs[name] = p.Addresses("demo", name)
	}
	base := "http://" + p.API

	t.Run("overview lists the examples with their addresses", func(t *testing.T) {
		do(t, ctx, "open overview", chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS("#lb-rows tr.row")))
		rows := eval[[]string](t, ctx, `Array.from(document.querySelectorAll("#lb-rows tr.row")).map(r => r.innerText)`)
		if len(rows) != 3 {
			t.Fatalf("overview rows: %q", rows)
		}
		for i, name := range examples { // sorted by name
			for _, want := range append([]string{"demo/" + name, "haproxy"}, addrs[name]...) {
				if !strings.Contains(rows[i], want) {
					t.Errorf("row %d %q: missing %q", i, rows[i], want)
				}
			}
		}
		// The page waits for the agent: all three end ACTIVE.
		poll(t, ctx, `document.querySelectorAll("#lb-rows tr.row.row-ACTIVE").length === 3`, 10*time.Second)
		// The agent reports what HAProxy's health checks see: every member
		// up (each has its echo backend), and counts of reloads / runtime
		// updates.
		health := eval[[]string](t, ctx, `Array.from(document.querySelectorAll("#lb-rows tr.row td.health")).map(c => c.innerText)`)
		reloads := eval[[]string](t, ctx, `Array.from(document.querySelectorAll("#lb-rows tr.row td.reloads")).map(c => c.innerText)`)
		for i, name := range examples {
			if m := allUp.FindStringSubmatch(health[i]); m == nil || m[1] != m[2] || m[1] == "0" {
				t.Errorf("%s: health %q, want every member up", name, health[i])
			}
			if !counts.MatchString(reloads[i]) {
				t.Errorf("%s: reloads / runtime %q", name, reloads[i])
			}
		}
		// The script polls: its status line says so once a poll came back.
		poll(t, ctx, `document.getElementById("live-status").innerText.startsWith("live")`, 3*time.Second)
		screenshot(t, ctx, "overview")
	})

	t.Run("a load balancer opens onto its pools and members", func(t *testing.T) {
		do(t, ctx, "open simple-fanout", chromedp.Navigate(base+"/"),
			chromedp.Click(chromedp.Search(`//a[@class="lb-name" and text()="demo/simple-fanout"]`)),
			chromedp.WaitVisible(chromedp.CSS("details.pool")))
		text := eval[string](t, ctx, `document.getElementById("live").innerText`)
		for _, want := range []string{"Pool demo_webservice-dev_80", "Pool demo_webservice-qa_http", "127.0.0.1",
			"PATH STARTS_WITH /dev", "Listener http", addrs["simple-fanout"][0], addrs["simple-fanout"][1], "active", "ACTIVE"} {
			if !strings.Contains(text, want) {
				t.Errorf("detail page: missing %q in\n%s", want, text)
			}
		}
		members := eval[int](t, ctx, `document.querySelectorAll("tr.member").length`)
		if members != 2 {
			t.Errorf("detail page: %d member rows, want 2", members)
		}
		// pier run has one node and no VRRP: the node row, no holder, no history.
		placement := eval[string](t, ctx, `document.querySelector("table.nodes tr.node").innerText`)
		if !strings.Contains(placement, "2 / 2 up") || !strings.Contains(placement, "current") {
			t.Errorf("placement row %q: want 2 / 2 up and the current spec", placement)
		}
		for _, want := range []string{"Placement and failover history", "No node reports VRRP MASTER", "No failover recorded."} {
			if !strings.Contains(text, want) {
				t.Errorf("detail page: missing %q", want)
			}
		}
		// The fragment the agent wrote, read back from the state folder.
		conf := eval[string](t, ctx, `(document.getElementById("haproxy-conf") || {}).innerText || ""`)
		if !strings.Contains(conf, "# pier load balancer ") || !strings.Contains(conf, "frontend fe_") {
			t.Errorf("detail page: haproxy.conf not shown, got %q", conf)
		}
		screenshot(t, ctx, "loadbalancer")
		do(t, ctx, "open its Ingress", chromedp.Click(chromedp.CSS(`dd a[href="/ui/ingress/demo/simple-fanout"]`)),
			chromedp.WaitVisible(chromedp.CSS("table.policies")))
		text = eval[string](t, ctx, `document.getElementById("live").innerText`)
		for _, want := range []string{"webservice-dev:80", "/qa", "Prefix", addrs["simple-fanout"][0]} {
			if !strings.Contains(text, want) {
				t.Errorf("Ingress page: missing %q", want)
			}
		}
		screenshot(t, ctx, "ingress")
	})

	t.Run("an edited manifest appears without a reload", func(t *testing.T) {
		do(t, ctx, "open overview", chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS("#lb-rows tr.row")))
		eval[bool](t, ctx, `window.__sameDocument = true`)
		start := time.Now()
		harness.WriteFile(t, filepath.Join(manifests, "zz-live.yaml"), liveIngress)
		poll(t, ctx, `document.getElementById("lb-rows").innerText.includes("demo/live-added")`, 2*time.Second)
		t.Logf("new load balancer shown %s after the file was written", time.Since(start).Round(time.Millisecond))
		if !eval[bool](t, ctx, `window.__sameDocument === true`) {
			t.Error("the page was reloaded: the live update must replace the table body only")
		}
		// Removing it removes the row, again in place.
		if err := os.Remove(filepath.Join(manifests, "zz-live.yaml")); err != nil {
			t.Fatal(err)
		}
		poll(t, ctx, `!document.getElementById("lb-rows").innerText.includes("demo/live-added")`, 2*time.Second)
	})

	t.Run("a member joining counts a runtime update, not a reload", func(t *testing.T) {
		do(t, ctx, "open overview", chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS("#lb-rows tr.row")))
		row := `Array.from(document.querySelectorAll("#lb-rows tr.row")).find(r => r.innerText.includes("demo/single-service"))`
		before := counts.FindStringSubmatch(eval[string](t, ctx, row+`.querySelector("td.reloads").innerText`))
		if before == nil {
			t.Fatal("no reload counts on the single-service row")
		}
		harness.WriteFile(t, filepath.Join(manifests, "zz-member.yaml"),
			strings.ReplaceAll(secondEndpoint, "SECONDPORT", strconv.Itoa(harness.StartEcho(t, "webservice-1", "webserver-1-b"))))
		poll(t, ctx, row+`.querySelector("td.health").innerText.startsWith("2 / 2 up")`, 5*time.Second)
		after := counts.FindStringSubmatch(eval[string](t, ctx, row+`.querySelector("td.reloads").innerText`))
		if after == nil || after[1] != before[1] || atoi(after[2]) != atoi(before[2])+1 {
			t.Errorf("reloads / runtime updates went from %q to %q, want one more runtime update and no reload", before[0], after)
		}
		screenshot(t, ctx, "overview")
		if err := os.Remove(filepath.Join(manifests, "zz-member.yaml")); err != nil {
			t.Fatal(err)
		}
		poll(t, ctx, row+`.querySelector("td.health").innerText.startsWith("1 / 1 up")`, 5*time.Second)
	})

	t.Run("hostile strings render as text", func(t *testing.T) {
		harness.WriteFile(t, filepath.Join(manifests, "zz-hostile.yaml"), hostileIngress)
		do(t, ctx, "open Ingresses", chromedp.Navigate(base+"/ui/ingresses"))
		poll(t, ctx, `document.body.innerText.includes("hostile")`, 5*time.Second)
		do(t, ctx, "open the hostile Ingress", chromedp.Click(chromedp.Search(`//a[text()="hostile"]`)),
			chromedp.WaitVisible(chromedp.CSS("table.problems")))
		if v := eval[string](t, ctx, `typeof window.__pierPwned`); v != "undefined" {
			t.Errorf("an injected script ran: window.__pierPwned is %s", v)
		}
		text := eval[string](t, ctx, `document.body.textContent`)
		for _, want := range []string{`<img src=x onerror=window.__pierPwned=3>.example`, `"><img src=x onerror="window.__pierPwned=2">`,
			`<script>window.__pierPwned=4</script>`, "admin‹U+202E›gnp.exe", "InvalidAnnotation"} {
			if !strings.Contains(text, want) {
				t.Errorf("Ingress page text: missing the literal %q", want)
			}
		}
		if n := eval[int](t, ctx, `document.querySelectorAll("#live img, #live script").length`); n != 0 {
			t.Errorf("%d img/script elements made it into the page", n)
		}
		if strings.Contains(text, "\u202E") {
			t.Error("a right-to-left override reached the page unmarked")
		}
		screenshot(t, ctx, "hostile")
		// The overview counts the problem.
		do(t, ctx, "overview", chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS("#problem-count")))
		if c := eval[string](t, ctx, `document.getElementById("problem-count").innerText`); !strings.HasPrefix(c, "1 ") {
			t.Errorf("problem count %q, want 1", c)
		}
	})

	t.Run("works with JavaScript off", func(t *testing.T) {
		noJS := newBrowserNoJS(t)
		do(t, noJS, "open overview", chromedp.Navigate(base+"/ui/?namespace=demo"), chromedp.WaitReady(chromedp.CSS("#lb-rows")))
		n, err := chromedp.Run(noJS, chromedp.Nodes(chromedp.CSSAll("#lb-rows tr.row"), chromedp.AtLeast(0)))
		if err != nil || len(n) != 3 {
			t.Errorf("JS off: %d rows (%v), want 3", len(n), err)
		}
		if ran := eval[bool](t, noJS, `document.documentElement.classList.contains("js")`); ran {
			t.Error("app.js ran: JavaScript was not off")
		}
		screenshot(t, noJS, "overview-nojs")
	})
}

// newBrowserNoJS is a second tab with JavaScript disabled.
func newBrowserNoJS(t *testing.T) context.Context {
	t.Helper()
	ctx := newBrowser(t)
	if err := chromedp.Do(ctx, disableScripts()); err != nil {
		t.Fatal(err)
	}
	return ctx
}

func poll(t *testing.T, ctx context.Context, cond string, d time.Duration) {
	t.Helper()
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](cond, chromedp.WithPollingTimeout(d), chromedp.WithPollingInterval(50*time.Millisecond))); err != nil {
		t.Fatalf("waiting %s for %s: %v", d, cond, err)
	}
}

var (
	// allUp matches a health cell: "2 / 2 up in 2 pools".
	allUp = regexp.MustCompile(`^(\d+) / (\d+) up`)
	// counts matches a reloads cell: "0 / 3".
	counts = regexp.MustCompile(`^(\d+) / (\d+)$`)
)

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

// secondEndpoint gives webservice-1 (single-service's backend) a second
// ready endpoint, a second echo backend on SECONDPORT: a member change
// within the pool's server slots.
const secondEndpoint = `
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: webservice-1-b
  namespace: demo
  labels: {kubernetes.io/service-name: webservice-1}
addressType: IPv4
ports: [{name: http, port: SECONDPORT}]
endpoints:
  - addresses: ["127.0.0.1"]
    conditions: {ready: true}
`

const liveIngress = `
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: live-added, namespace: demo}
spec:
  ingressClassName: pier
  defaultBackend: {service: {name: webservice-1, port: {number: 8888}}}
`

// hostileIngress carries markup in a host and annotations, and a
// right-to-left override. (A hostile metadata.name never gets this far:
// pier's manifest reader refuses names that are not RFC 1123, as the API
// server does; the handler tests cover names.)
const hostileIngress = `
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: hostile
  namespace: demo
  annotations:
    pier.dev/load-balancer: "\"><img src=x onerror=\"window.__pierPwned=2\">"
    note: "<script>window.__pierPwned=4</script>"
    owner: "admin\u202Egnp.exe"
spec:
  ingressClassName: pier
  rules:
    - host: "<img src=x onerror=window.__pierPwned=3>.example"
      http:
        paths:
          - path: /
            pathType: Prefix
            backend: {service: {name: webservice-1, port: {number: 8888}}}
`

func disableScripts() chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := cdp.Call(ctx, t, emulation.SetScriptExecutionDisabled, emulation.SetScriptExecutionDisabledParams{Value: true})
		return err
	})
}
