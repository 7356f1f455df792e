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

// canaryManifests: a main Ingress and its canary (weight 50, header
// X-Canary), each with its own Service and echo.
const canaryManifests = pierClass + `
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: shop, namespace: shop}
spec:
  ingressClassName: pier
  rules:
    - host: shop.example
      http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: v1, port: {number: 80}}}}]}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: shop-canary
  namespace: shop
  annotations:
    nginx.ingress.kubernetes.io/canary: "true"
    nginx.ingress.kubernetes.io/canary-weight: "50"
    nginx.ingress.kubernetes.io/canary-by-header: X-Canary
spec:
  ingressClassName: pier
  rules:
    - host: shop.example
      http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: v2, port: {number: 80}}}}]}
---
apiVersion: v1
kind: Service
metadata: {name: v1, namespace: shop}
spec: {ports: [{name: http, port: 80, targetPort: V1PORT}]}
---
apiVersion: v1
kind: Service
metadata: {name: v2, namespace: shop}
spec: {ports: [{name: http, port: 80, targetPort: V2PORT}]}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: v1-a, namespace: shop, labels: {kubernetes.io/service-name: v1}}
addressType: IPv4
ports: [{name: http, port: V1PORT}]
endpoints: [{addresses: ["127.0.0.1"], conditions: {ready: true}}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: v2-a, namespace: shop, labels: {kubernetes.io/service-name: v2}}
addressType: IPv4
ports: [{name: http, port: V2PORT}]
endpoints: [{addresses: ["127.0.0.1"], conditions: {ready: true}}]
`

// TestCanaryWeights runs `pier run` on a main Ingress and its canary:
// both get the same address, 1,000 requests split 50/50 within 10%
// (450-550 to the canary: more than three standard deviations, so the
// test does not flake), and the header forces either side.
func TestCanaryWeights(t *testing.T) {
	manifests, state := harness.ShortTempDir(t), harness.ShortTempDir(t)
	v1, v2 := harness.StartEcho(t, "v1", "v1-pod"), harness.StartEcho(t, "v2", "v2-pod")
	s := strings.ReplaceAll(canaryManifests, "V1PORT", strconv.Itoa(v1))
	harness.WriteFile(t, filepath.Join(manifests, "shop.yaml"), strings.ReplaceAll(s, "V2PORT", strconv.Itoa(v2)))
	p := harness.StartPier(t, harness.Options{Manifests: manifests, State: state})
	vip := p.Addresses("shop", "shop")[0]
	if got := p.Addresses("shop", "shop-canary"); len(got) == 0 || got[0] != vip {
		t.Errorf("canary addresses %v, want the main's %s", got, vip)
	}
	client := &http.Client{Timeout: 5 * time.Second}
	canary := 0
	for i := 0; i < 1000; i++ {
		code, reply, _, err := harness.Get(client, vip, p.HTTPPort, "shop.example", "/")
		if err != nil || code != 200 {
			t.Fatalf("request %d: %d %v", i, code, err)
		}
		if reply.Service == "v2" {
			canary++
		}
	}
	t.Logf("weight 50: %d of 1000 requests reached the canary", canary)
	if canary < 450 || canary > 550 {
		t.Errorf("weight 50: %d of 1000 to the canary, want 450-550", canary)
	}
	for header, want := range map[string]string{"always": "v2", "never": "v1"} {
		for i := 0; i < 20; i++ {
			req, _ := http.NewRequest("GET", "http://"+vip+":"+strconv.Itoa(p.HTTPPort)+"/", nil)
			req.Host = "shop.example"
			req.Header.Set("X-Canary", header)
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body := make([]byte, 512)
			n, _ := resp.Body.Read(body)
			resp.Body.Close()
			if !strings.Contains(string(body[:n]), `"`+want+`"`) {
				t.Fatalf("X-Canary: %s: reply %s, want service %s", header, body[:n], want)
			}
		}
	}
}
