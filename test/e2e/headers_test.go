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

// headersManifests: an Ingress with custom-headers naming a ConfigMap
// and pier.dev/response-headers, and one without, on one load balancer.
const headersManifests = pierClass + `
apiVersion: v1
kind: ConfigMap
metadata: {name: security-headers, namespace: shop}
data:
  X-Frame-Options: FRAME
  X-Content-Type-Options: nosniff
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: site
  namespace: shop
  annotations:
    pier.dev/load-balancer: shop
    nginx.ingress.kubernetes.io/custom-headers: security-headers
    pier.dev/response-headers: |
      Cache-Control: no-store
spec:
  ingressClassName: pier
  rules:
    - host: site.example
      http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}]}
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
      http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}]}
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: shop}
spec:
  ports: [{name: http, port: 80, targetPort: PODPORT}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: web-1
  namespace: shop
  labels: {kubernetes.io/service-name: web}
addressType: IPv4
ports: [{name: http, port: PODPORT}]
endpoints:
  - addresses: ["127.0.0.1"]
    conditions: {ready: true}
`

// TestCustomHeadersConfigMap runs `pier run` with custom-headers and its
// ConfigMap as a file: the Ingress's responses carry the ConfigMap's
// headers and the typed one, the other Ingress's do not; an edit of the
// ConfigMap alone is applied, and a bad value in it refuses that Ingress
// only (the other keeps serving).
func TestCustomHeadersConfigMap(t *testing.T) {
	manifests, state := harness.ShortTempDir(t), harness.ShortTempDir(t)
	pod := harness.StartEcho(t, "web", "pod")
	file := filepath.Join(manifests, "shop.yaml")
	m := strings.ReplaceAll(headersManifests, "PODPORT", strconv.Itoa(pod))
	harness.WriteFile(t, file, strings.ReplaceAll(m, "FRAME", "DENY"))
	p := harness.StartPier(t, harness.Options{Manifests: manifests, State: state})
	vip := p.Addresses("shop", "site")[0]
	client := &http.Client{Timeout: 5 * time.Second}
	headers := func(host string) (int, http.Header) {
		code, _, h, err := harness.Get(client, vip, p.HTTPPort, host, "/")
		if err != nil {
			t.Fatal(err)
		}
		return code, h
	}
	code, h := headers("site.example")
	if code != 200 || h.Get("X-Frame-Options") != "DENY" || h.Get("X-Content-Type-Options") != "nosniff" || h.Get("Cache-Control") != "no-store" {
		t.Errorf("site: %d %v", code, h)
	}
	if code, h := headers("plain.example"); code != 200 || h.Get("X-Frame-Options") != "" || h.Get("Cache-Control") == "no-store" {
		t.Errorf("plain: %d %v", code, h)
	}
	harness.WriteFile(t, file, strings.ReplaceAll(m, "FRAME", "SAMEORIGIN"))
	harness.WaitFor(t, 20*time.Second, "the ConfigMap edit is applied", func() bool {
		_, h := headers("site.example")
		return h.Get("X-Frame-Options") == "SAMEORIGIN"
	})
	harness.WriteFile(t, file, strings.ReplaceAll(m, "FRAME", `"DENY\r\nX-Evil: 1"`))
	harness.WaitFor(t, 20*time.Second, "the Ingress with a bad header value is refused", func() bool {
		code, _ := headers("site.example")
		return code == 404 || code == 503
	})
	if code, _ := headers("plain.example"); code != 200 {
		t.Errorf("plain after the bad edit: %d", code)
	}
}
