package e2e

import (
	"net/http"
	"testing"
	"time"

	"pier.dev/pier/test/harness"
)

// regexManifests: a use-regex Ingress with rewrite-target /$1, and a
// plain Ingress of the same host sharing its load balancer.
const regexManifests = pierClass + `
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: api
  namespace: web
  annotations:
    nginx.ingress.kubernetes.io/use-regex: "true"
    nginx.ingress.kubernetes.io/rewrite-target: /$1
    pier.dev/load-balancer: shared
spec:
  ingressClassName: pier
  rules:
    - host: regex.bar.com
      http:
        paths:
          - path: /api/v[0-9]+/(.*)
            pathType: ImplementationSpecific
            backend: {service: {name: http-svc, port: {number: 80}}}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: docs
  namespace: web
  annotations:
    pier.dev/load-balancer: shared
spec:
  ingressClassName: pier
  rules:
    - host: regex.bar.com
      http:
        paths:
          - path: /docs
            pathType: Prefix
            backend: {service: {name: http-svc, port: {number: 80}}}
`

// TestRegexPaths runs use-regex with a capture-group rewrite through
// `pier run`: /api/v1/users/42?x=1 reaches the backend as /users/42?x=1;
// the plain Ingress's /docs/a is unchanged; /API/v1/users (case-sensitive)
// and /x/api/v1/users (anchored) are not routed (404).
func TestRegexPaths(t *testing.T) {
	p := startWithHTTPSvc(t, regexManifests)
	vip := p.Addresses("web", "api")[0]
	client := &http.Client{Timeout: 5 * time.Second}
	for path, want := range map[string]string{"/api/v1/users/42?x=1": "/users/42?x=1", "/api/v22/": "/", "/docs/a?b=1": "/docs/a?b=1"} {
		code, reply, _, err := harness.Get(client, vip, p.HTTPPort, "regex.bar.com", path)
		if err != nil || code != 200 || reply.Path != want {
			t.Errorf("%s: %d %q (%v), want 200 with path %q", path, code, reply.Path, err, want)
		}
	}
	for _, path := range []string{"/API/v1/users", "/x/api/v1/users", "/api/vx/users"} {
		if code, _, _, err := harness.Get(client, vip, p.HTTPPort, "regex.bar.com", path); err != nil || code != 404 {
			t.Errorf("%s: %d (%v), want 404", path, code, err)
		}
	}
}
