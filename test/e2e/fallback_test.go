package e2e

import (
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"pier.dev/pier/test/harness"
)

// fallbackManifests: Service app has no ready endpoint (APPREADY), live
// has one; the Ingresses app and live name default-backend error-pages,
// plain routes to app without it.
const fallbackManifests = pierClass + `
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: app
  namespace: shop
  annotations:
    pier.dev/load-balancer: shop
    nginx.ingress.kubernetes.io/default-backend: error-pages
spec:
  ingressClassName: pier
  rules:
    - host: app.example
      http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: app, port: {number: 80}}}}]}
    - host: live.example
      http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: live, port: {number: 80}}}}]}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: plain
  namespace: shop
  annotations:
    pier.dev/load-balancer: shop
spec:
  ingressClassName: pier
  rules:
    - host: plain.example
      http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: app, port: {number: 80}}}}]}
---
apiVersion: v1
kind: Service
metadata: {name: app, namespace: shop}
spec: {ports: [{name: http, port: 80}]}
---
apiVersion: v1
kind: Service
metadata: {name: live, namespace: shop}
spec: {ports: [{name: http, port: 80}]}
---
apiVersion: v1
kind: Service
metadata: {name: error-pages, namespace: shop}
spec: {ports: [{name: http, port: 8080}, {name: metrics, port: 9090}]}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: app-1, namespace: shop, labels: {kubernetes.io/service-name: app}}
addressType: IPv4
ports: [{name: http, port: APPPORT}]
endpoints:
  - addresses: ["127.0.0.1"]
    conditions: {ready: APPREADY, serving: APPREADY}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: live-1, namespace: shop, labels: {kubernetes.io/service-name: live}}
addressType: IPv4
ports: [{name: http, port: LIVEPORT}]
endpoints:
  - addresses: ["127.0.0.1"]
    conditions: {ready: true}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: error-pages-1, namespace: shop, labels: {kubernetes.io/service-name: error-pages}}
addressType: IPv4
ports: [{name: http, port: ERRPORT}, {name: metrics, port: 1}]
endpoints:
  - addresses: ["127.0.0.1"]
    conditions: {ready: true}
`

// TestDefaultBackend runs `pier run` with default-backend: while app has
// no ready endpoint its Ingress's requests are answered by error-pages
// (its first port), another Ingress's route to app still gets 503, and a
// route whose Service has an endpoint is served by it; once app's
// endpoint is ready, app answers.
func TestDefaultBackend(t *testing.T) {
	manifests, state := harness.ShortTempDir(t), harness.ShortTempDir(t)
	ports := map[string]int{
		"APPPORT":  harness.StartEcho(t, "app", "app-pod"),
		"LIVEPORT": harness.StartEcho(t, "live", "live-pod"),
		"ERRPORT":  harness.StartEcho(t, "error-pages", "errors-pod"),
	}
	write := func(ready bool) {
		s := strings.ReplaceAll(fallbackManifests, "APPREADY", strconv.FormatBool(ready))
		for k, v := range ports {
			s = strings.ReplaceAll(s, k, strconv.Itoa(v))
		}
		harness.WriteFile(t, filepath.Join(manifests, "shop.yaml"), s)
	}
	write(false)
	p := harness.StartPier(t, harness.Options{Manifests: manifests, State: state})
	vip := p.Addresses("shop", "app")[0]
	client := &http.Client{Timeout: 5 * time.Second}
	get := func(host string) (int, string) {
		code, reply, _, err := harness.Get(client, vip, p.HTTPPort, host, "/x")
		if err != nil {
			t.Fatalf("%s: %v", host, err)
		}
		return code, reply.Service
	}
	for _, tc := range []struct {
		host, from string
		code       int
	}{
		{"app.example", "error-pages", 200},
		{"live.example", "live", 200},
		{"plain.example", "", 503},
	} {
		if code, from := get(tc.host); code != tc.code || from != tc.from {
			t.Errorf("%s: %d from %q, want %d from %q", tc.host, code, from, tc.code, tc.from)
		}
	}
	write(true)
	harness.WaitFor(t, 30*time.Second, "app answers once its endpoint is ready", func() bool {
		code, from := get("app.example")
		return code == 200 && from == "app"
	})
	if code, from := get("plain.example"); code != 200 || from != "app" {
		t.Errorf("plain.example: %d from %q, want 200 from app", code, from)
	}
}
