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

// stripManifests: the ingress-nginx docs' prefix-strip Ingress, as
// written for ingress-nginx (ImplementationSpecific, use-regex).
const stripManifests = pierClass + `
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: rewrite
  namespace: web
  annotations:
    nginx.ingress.kubernetes.io/use-regex: "true"
    nginx.ingress.kubernetes.io/rewrite-target: /$2
spec:
  ingressClassName: pier
  rules:
    - host: rewrite.bar.com
      http:
        paths:
          - path: /something(/|$)(.*)
            pathType: ImplementationSpecific
            backend: {service: {name: http-svc, port: {number: 80}}}
`

// httpSvcManifests is Service http-svc of namespace web, one ready
// endpoint at 127.0.0.1:PODPORT: the backend of the rewrite tests.
const httpSvcManifests = `
apiVersion: v1
kind: Service
metadata: {name: http-svc, namespace: web}
spec: {ports: [{name: http, port: 80}]}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: http-svc-1, namespace: web, labels: {kubernetes.io/service-name: http-svc}}
addressType: IPv4
ports: [{name: http, port: PODPORT}]
endpoints:
  - addresses: ["127.0.0.1"]
    conditions: {ready: true}
`

// startWithHTTPSvc runs `pier run` on ingresses and httpSvcManifests,
// with an echo backend behind http-svc.
func startWithHTTPSvc(t *testing.T, ingresses string) *harness.Pier {
	t.Helper()
	manifests, state := harness.ShortTempDir(t), harness.ShortTempDir(t)
	pod := harness.StartEcho(t, "http-svc", "pod")
	m := strings.ReplaceAll(ingresses+"---"+httpSvcManifests, "PODPORT", strconv.Itoa(pod))
	harness.WriteFile(t, filepath.Join(manifests, "web.yaml"), m)
	return harness.StartPier(t, harness.Options{Manifests: manifests, State: state})
}

// TestRewriteStripPrefix runs the ingress-nginx docs' rewrite example
// through `pier run`: /something, /something/ and /something/new reach
// the backend as /, / and /new (a query string is kept); /somethingelse is not routed (404).
func TestRewriteStripPrefix(t *testing.T) {
	p := startWithHTTPSvc(t, stripManifests)
	vip := p.Addresses("web", "rewrite")[0]
	client := &http.Client{Timeout: 5 * time.Second}
	for path, want := range map[string]string{"/something": "/", "/something/": "/", "/something/new": "/new",
		"/something/a/b?x=1": "/a/b?x=1"} {
		code, reply, _, err := harness.Get(client, vip, p.HTTPPort, "rewrite.bar.com", path)
		if err != nil || code != 200 || reply.Path != want {
			t.Errorf("%s: %d %q (%v), want 200 with path %q", path, code, reply.Path, err, want)
		}
	}
	if code, _, _, err := harness.Get(client, vip, p.HTTPPort, "rewrite.bar.com", "/somethingelse"); err != nil || code != 404 {
		t.Errorf("/somethingelse: %d (%v), want 404", code, err)
	}
}
