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

// upstreamManifests: two Services whose ClusterIP:port is one echo
// ("via-clusterip") and whose endpoints are another ("via-endpoints");
// the Ingress of the first asks for service-upstream, the second not.
const upstreamManifests = pierClass + `
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: two-hop
  namespace: shop
  annotations:
    pier.dev/load-balancer: shop
    nginx.ingress.kubernetes.io/service-upstream: "true"
    nginx.ingress.kubernetes.io/proxy-next-upstream-tries: "2"
spec:
  ingressClassName: pier
  rules:
    - host: two-hop.example
      http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: a, port: {number: CLUSTERPORT}}}}]}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: direct
  namespace: shop
  annotations:
    pier.dev/load-balancer: shop
spec:
  ingressClassName: pier
  rules:
    - host: direct.example
      http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: b, port: {number: CLUSTERPORT}}}}]}
---
apiVersion: v1
kind: Service
metadata: {name: a, namespace: shop}
spec:
  clusterIP: 127.0.0.1
  ports: [{name: http, port: CLUSTERPORT, targetPort: PODPORT}]
---
apiVersion: v1
kind: Service
metadata: {name: b, namespace: shop}
spec:
  clusterIP: 127.0.0.1
  ports: [{name: http, port: CLUSTERPORT, targetPort: PODPORT}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: a-1
  namespace: shop
  labels: {kubernetes.io/service-name: a}
addressType: IPv4
ports: [{name: http, port: PODPORT}]
endpoints:
  - addresses: ["127.0.0.1"]
    conditions: {ready: true}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: b-1
  namespace: shop
  labels: {kubernetes.io/service-name: b}
addressType: IPv4
ports: [{name: http, port: PODPORT}]
endpoints:
  - addresses: ["127.0.0.1"]
    conditions: {ready: true}
`

// TestServiceUpstream runs `pier run` with service-upstream: the Ingress
// that asks for it reaches the Service's ClusterIP:port (standing in for
// kube-proxy), the other one the endpoints.
func TestServiceUpstream(t *testing.T) {
	manifests, state := harness.ShortTempDir(t), harness.ShortTempDir(t)
	cluster := harness.StartEcho(t, "via-clusterip", "kube-proxy")
	pod := harness.StartEcho(t, "via-endpoints", "pod")
	s := strings.ReplaceAll(upstreamManifests, "CLUSTERPORT", strconv.Itoa(cluster))
	harness.WriteFile(t, filepath.Join(manifests, "shop.yaml"), strings.ReplaceAll(s, "PODPORT", strconv.Itoa(pod)))
	p := harness.StartPier(t, harness.Options{Manifests: manifests, State: state})
	vip := p.Addresses("shop", "two-hop")[0]
	client := &http.Client{Timeout: 5 * time.Second}
	for host, want := range map[string]string{"two-hop.example": "via-clusterip", "direct.example": "via-endpoints"} {
		code, reply, _, err := harness.Get(client, vip, p.HTTPPort, host, "/")
		if err != nil || code != 200 || reply.Service != want {
			t.Errorf("%s: %d %q (%v), want 200 from %s", host, code, reply.Service, err, want)
		}
	}
}
