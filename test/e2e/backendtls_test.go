package e2e

import (
	"crypto/x509"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"pier.dev/pier/internal/model"
	"pier.dev/pier/test/harness"
)

const backendTLSManifests = `apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: pier}
spec: {controllerName: pier.dev/gateway-controller}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: web, namespace: shop}
spec:
  gatewayClassName: pier
  listeners: [{name: http, protocol: HTTP, port: GWPORT}]
  tls:
    backend:
      clientCertificateRef: {name: gateway-client}
---
apiVersion: v1
kind: Secret
metadata: {name: gateway-client, namespace: shop}
type: kubernetes.io/tls
stringData:
  tls.crt: CLIENTCRT
  tls.key: CLIENTKEY
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: routes, namespace: shop}
spec:
  parentRefs: [{name: web}]
  rules:
  - matches: [{headers: [{name: x-to, value: good}]}]
    backendRefs: [{name: good, port: 443}]
  - matches: [{headers: [{name: x-to, value: wrong-name}]}]
    backendRefs: [{name: wrong-name, port: 443}]
  - matches: [{headers: [{name: x-to, value: wrong-ca}]}]
    backendRefs: [{name: wrong-ca, port: 443}]
---
apiVersion: v1
kind: ConfigMap
metadata: {name: app-ca, namespace: shop}
data:
  ca.crt: CA
---
apiVersion: v1
kind: ConfigMap
metadata: {name: other-ca, namespace: shop}
data:
  ca.crt: WRONGCA
---
apiVersion: gateway.networking.k8s.io/v1
kind: BackendTLSPolicy
metadata: {name: good, namespace: shop}
spec:
  targetRefs: [{group: "", kind: Service, name: good}]
  validation:
    caCertificateRefs: [{group: "", kind: ConfigMap, name: app-ca}]
    hostname: app.shop.example
---
apiVersion: gateway.networking.k8s.io/v1
kind: BackendTLSPolicy
metadata: {name: wrong-name, namespace: shop}
spec:
  targetRefs: [{group: "", kind: Service, name: wrong-name}]
  validation:
    caCertificateRefs: [{group: "", kind: ConfigMap, name: app-ca}]
    hostname: other.shop.example
---
apiVersion: gateway.networking.k8s.io/v1
kind: BackendTLSPolicy
metadata: {name: wrong-ca, namespace: shop}
spec:
  targetRefs: [{group: "", kind: Service, name: wrong-ca}]
  validation:
    caCertificateRefs: [{group: "", kind: ConfigMap, name: other-ca}]
    hostname: app.shop.example
`

// TestBackendTLSPolicyFromFiles: `pier run` reads BackendTLSPolicies and
// the CA ConfigMaps they name from manifest files, and HAProxy checks the
// member's certificate as each says. Three Services send to one TLS
// member whose certificate names app.shop.example, signed by app-ca: the
// policy with that hostname and CA is served (the member saw it as the
// SNI); a policy naming another hostname, and one with a CA that did not
// sign it, are refused by the handshake, so no request reaches the
// member (503). The Gateway presents its client certificate
// (spec.tls.backend) to the member it verified.
func TestBackendTLSPolicyFromFiles(t *testing.T) {
	ca, other := newE2ECA(t), newE2ECA(t)
	cert, key := ca.issue(t, "app.shop.example", x509.ExtKeyUsageServerAuth)
	clientCert, clientKey := ca.issue(t, "gateway.shop.example", x509.ExtKeyUsageClientAuth)
	member := tlsMember(t, cert, key)
	manifests, state := harness.ShortTempDir(t), harness.ShortTempDir(t)
	port := harness.FreePort(t)
	doc := strings.NewReplacer("GWPORT", strconv.Itoa(port), "WRONGCA", indent(other.certPEM), "CA", indent(ca.certPEM),
		"CLIENTCRT", indent(clientCert), "CLIENTKEY", indent(clientKey)).
		Replace(backendTLSManifests) + service("good", member) + service("wrong-name", member) + service("wrong-ca", member)
	harness.WriteFile(t, filepath.Join(manifests, "shop.yaml"), doc)
	p := harness.StartPier(t, harness.Options{Manifests: manifests, State: state})
	var lb *model.LoadBalancer
	harness.WaitFor(t, 20*time.Second, "the Gateway's load balancer is active", func() bool {
		lb = p.GatewayLB("shop", "web")
		return lb != nil && lb.VIP != "" && lb.Status.State == model.StateActive
	})
	tls := 0
	for _, pool := range lb.Pools {
		if pool.UpstreamTLS != nil {
			tls++
		}
	}
	if tls != 3 {
		t.Errorf("%d pools verify their members' certificates, want 3: %+v", tls, lb.Pools)
	}
	client := &http.Client{Timeout: 5 * time.Second}
	get := func(to string) (int, string) {
		req, _ := http.NewRequest(http.MethodGet, "http://"+lb.VIP+":"+strconv.Itoa(port)+"/", nil)
		req.Host = "shop.example"
		req.Header.Set("X-To", to)
		resp, err := client.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		return resp.StatusCode, resp.Header.Get("X-Seen")
	}
	harness.WaitFor(t, 10*time.Second, "the verified member answers", func() bool {
		code, _ := get("good")
		return code == 200
	})
	if code, seen := get("good"); code != 200 || seen != "sni=app.shop.example client=gateway.shop.example" {
		t.Errorf("the policy's hostname and CA: %d, member saw %q; want 200 with SNI app.shop.example and the Gateway's client certificate", code, seen)
	}
	for _, to := range []string{"wrong-name", "wrong-ca"} {
		if code, seen := get(to); code != 503 || seen != "" {
			t.Errorf("%s: %d (member saw %q), want 503 with no request reaching the member", to, code, seen)
		}
	}
}
