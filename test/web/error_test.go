package web

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"pier.dev/pier/internal/model"
	"pier.dev/pier/test/harness"
)

// refusedMarker is a response header of the refused Ingress: the wrapper
// below makes haproxy -c refuse any configuration that sets it. (Hosts
// are in the routing maps, not in the configuration.)
const refusedMarker = "X-Refuse-Me"

// refusingHAProxy writes a wrapper that runs the real HAProxy, except that
// `haproxy -c` fails, with forty lines of alerts as HAProxy prints them
// (more than the 4 KiB of its output pier keeps),
// for any configuration (file or staged folder) that holds refusedMarker.
// pier's render refuses what HAProxy would, so no manifest makes the real
// check fail: the fault is injected at the boundary. HAProxy's master
// re-executes itself by its own path, so reloads never pass through it.
func refusingHAProxy(t *testing.T) string {
	t.Helper()
	real, err := exec.LookPath("haproxy")
	if err != nil {
		t.Fatalf("needs haproxy: %v", err)
	}
	var alerts strings.Builder
	for i := 1; i < 40; i++ {
		fmt.Fprintf(&alerts, "echo '[ALERT]    (fault injected by the test) line %d: parsing [fragment.cfg:%d]: a long HAProxy refusal that says what is wrong and where, at length' >&2\n", i, i)
	}
	wrapper := filepath.Join(harness.ShortTempDir(t), "haproxy")
	script := `#!/bin/sh
if [ "$1" = "-c" ]; then
	for a in "$@"; do
		if [ -e "$a" ] && grep -rqs '` + refusedMarker + `' "$a"; then
` + alerts.String() + `
			exit 1
		fi
	done
fi
exec '` + real + `' "$@"
`
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return wrapper
}

const refusedIngress = `apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: refused
  namespace: demo
  annotations:
    pier.dev/response-headers: "` + refusedMarker + `: 1"
spec:
  ingressClassName: pier
  rules:
    - host: refuse.example
      http:
        paths:
          - path: /
            pathType: Prefix
            backend:
              service: {name: webservice-1, port: {number: 8888}}
`

// TestLoadBalancerErrorShown runs pier run with one load balancer whose
// configuration HAProxy refuses, beside the examples: the API's and the
// web view's Ingress pages give its ERROR and the whole message, the
// overview's row stays one line high and links to it, and pier lint with
// the same HAProxy gives the verdict run gives.
func TestLoadBalancerErrorShown(t *testing.T) {
	ctx := newBrowser(t)
	wrapper := refusingHAProxy(t)
	manifests, state := harness.ShortTempDir(t), harness.ShortTempDir(t)
	files, _ := filepath.Glob("../../examples/*.yaml")
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		harness.WriteFile(t, filepath.Join(manifests, filepath.Base(f)), string(b))
	}
	harness.WriteFile(t, filepath.Join(manifests, "refused.yaml"), refusedIngress)
	p := harness.StartPier(t, harness.Options{Manifests: manifests, State: state, ExtraArgs: []string{"--haproxy", wrapper}})
	for _, name := range examples {
		p.Addresses("demo", name)
	}

	var lb model.State
	var message string
	harness.WaitFor(t, 20*time.Second, "demo/refused's load balancer in ERROR", func() bool {
		ing, err := p.Ingress("demo", "refused")
		if err != nil || len(ing.LoadBalancers) != 1 {
			return false
		}
		lb, message = ing.LoadBalancers[0].State, ing.LoadBalancers[0].Message
		return lb == model.StateError
	})
	if !strings.Contains(message, "haproxy -c rejected") || !strings.Contains(message, "(fault injected by the test) line 1:") {
		t.Errorf("API: message %q", message)
	}
	if ing, _ := p.Ingress("demo", "single-service"); len(ing.LoadBalancers) != 1 || ing.LoadBalancers[0].State != model.StateActive || !ing.LoadBalancers[0].Serving {
		t.Errorf("API: single-service's load balancers %+v, want one ACTIVE and serving", ing.LoadBalancers)
	}

	base := "http://" + p.API
	t.Run("the Ingress page gives the state and the whole message", func(t *testing.T) {
		do(t, ctx, "open the Ingress", chromedp.Navigate(base+"/ui/ingress/demo/refused"), chromedp.WaitVisible(chromedp.CSS(".lb-message")))
		text := eval[string](t, ctx, `document.querySelector(".lb-message").innerText`)
		if !strings.Contains(text, tail(message)) || !strings.Contains(text, "line 2:") {
			t.Errorf("Ingress page: the message is not whole (want it to end %q):\n%s", tail(message), text)
		}
		if state := eval[string](t, ctx, `document.querySelector("dd .state").innerText`); state != "ERROR" {
			t.Errorf("Ingress page: load balancer state %q", state)
		}
		screenshot(t, ctx, "ingress-error")
	})

	t.Run("the overview's row stays one row high", func(t *testing.T) {
		do(t, ctx, "open overview", chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS("#lb-rows tr.row-ERROR")))
		poll(t, ctx, `document.querySelectorAll("#lb-rows tr.row.row-ACTIVE").length === 3`, 10*time.Second)
		// The ERROR row and the line of its message under it.
		heights := eval[[]float64](t, ctx, `["tr.row-ERROR", "tr.row-msg", "tr.row-ACTIVE"].map(s => document.querySelector("#lb-rows " + s).getBoundingClientRect().height)`)
		if heights[0]+heights[1] > 2*heights[2] {
			t.Errorf("the ERROR row is %.0f px high and its message %.0f px, an ACTIVE row %.0f px", heights[0], heights[1], heights[2])
		}
		width := eval[float64](t, ctx, `document.querySelector("table.lbs").getBoundingClientRect().width`)
		if view := eval[float64](t, ctx, `document.documentElement.clientWidth`); width > view+1 {
			cells := eval[[]string](t, ctx, `Array.from(document.querySelectorAll("#lb-rows tr.row-ERROR td")).map(c => c.getBoundingClientRect().width + ":" + c.innerText.slice(0, 40))`)
			t.Errorf("the table is %.0f px wide in a %.0f px window: %q", width, view, cells)
		}
		row := eval[string](t, ctx, `document.querySelector("#lb-rows tr.row-ERROR").innerText + "\n" + document.querySelector("#lb-rows tr.row-msg").innerText`)
		if strings.Contains(row, "line 2:") || strings.Contains(row, tail(message)) || !strings.Contains(row, "ERROR") ||
			!strings.Contains(row, "haproxy -c rejected") {
			t.Errorf("ERROR row %q: want the state and the first line of the message only", row)
		}
		more := eval[string](t, ctx, `document.querySelector("#lb-rows tr.row-msg a.msg-more").getAttribute("href")`)
		do(t, ctx, "open the load balancer", chromedp.Navigate(base+more), chromedp.WaitVisible(chromedp.CSS("p.msg")))
		if text := eval[string](t, ctx, `document.querySelector("p.msg").innerText`); !strings.Contains(text, tail(message)) {
			t.Errorf("load balancer page: the message is not whole (want it to end %q):\n%s", tail(message), text)
		}
		do(t, ctx, "back to the overview", chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS("#lb-rows tr.row-ERROR")))
		screenshot(t, ctx, "overview-error")
	})

	t.Run("lint gives run's verdict", func(t *testing.T) {
		var out bytes.Buffer
		cmd := exec.Command(harness.PierBin(t), "lint", "-f", manifests, "--haproxy", wrapper)
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err == nil {
			t.Errorf("pier lint exited 0:\n%s", out.String())
		}
		// The examples' rules without a host are spread over three load
		// balancers: a difference lint reports.
		for _, want := range []string{"demo/refused          refused                  its load balancer demo/refused would be in ERROR, serving nothing: ",
			"(fault injected by the test) line 1:", "demo/single-service   serves with differences", "0 serve, 3 serve with differences, 1 refused"} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("pier lint lacks %q:\n%s", want, out.String())
			}
		}
		if strings.Contains(out.String(), "line 2:") {
			t.Errorf("pier lint's line for demo/refused holds more than the first line of the refusal:\n%s", out.String())
		}
	})
}

// tail is the end of a message, what only its whole text holds.
func tail(s string) string {
	if len(s) > 40 {
		return s[len(s)-40:]
	}
	return s
}
