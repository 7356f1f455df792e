package e2e

import (
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"pier.dev/pier/test/harness"
)

// extAuthManifests: the oauth2-proxy pattern. EXTRA is replaced by a
// second Ingress to force a reload.
const extAuthManifests = pierClass + `
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: app
  namespace: shop
  annotations:
    pier.dev/load-balancer: shop
    nginx.ingress.kubernetes.io/auth-url: http://oauth2-proxy.shop.svc.cluster.local:4180/oauth2/auth
    nginx.ingress.kubernetes.io/auth-signin: https://login.example/oauth2/start
    nginx.ingress.kubernetes.io/auth-response-headers: X-Auth-Request-User
spec:
  ingressClassName: pier
  rules:
    - host: app.example
      http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: app, port: {number: 80}}}}]}
---
apiVersion: v1
kind: Service
metadata: {name: app, namespace: shop}
spec: {ports: [{name: http, port: 80}]}
---
apiVersion: v1
kind: Service
metadata: {name: oauth2-proxy, namespace: shop}
spec: {ports: [{name: http, port: 4180}]}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: app-1, namespace: shop, labels: {kubernetes.io/service-name: app}}
addressType: IPv4
ports: [{name: http, port: APPPORT}]
endpoints:
  - addresses: ["127.0.0.1"]
    conditions: {ready: true}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: oauth2-proxy-1, namespace: shop, labels: {kubernetes.io/service-name: oauth2-proxy}}
addressType: IPv4
ports: [{name: http, port: AUTHPORT}]
endpoints:
  - addresses: ["127.0.0.1"]
    conditions: {ready: true}
EXTRA`

const extraIngress = `---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: more
  namespace: shop
  annotations:
    pier.dev/load-balancer: shop
spec:
  ingressClassName: pier
  rules:
    - host: more.example
      http: {paths: [{path: /, pathType: Exact, backend: {service: {name: app, port: {number: 80}}}}]}
`

// extraIngress's Exact path is the group's first, so its frontend gains
// a lookup and the shard reloads; a Prefix route to an existing Service
// would only add a map entry through the runtime API.

// TestExternalAuth runs auth-url through `pier run` against an auth
// server that lets a request through only with the cookie session=ok:
// without it the client is sent to auth-signin, with it the request
// reaches the app; after a reload (another Ingress added) the same holds.
func TestExternalAuth(t *testing.T) {
	manifests, state := harness.ShortTempDir(t), harness.ShortTempDir(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	auth := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.Contains(r.Header.Get("Cookie"), "session=ok") {
			w.WriteHeader(401)
			return
		}
		w.Header().Set("X-Auth-Request-User", "alice")
	})}
	go auth.Serve(l)
	t.Cleanup(func() { auth.Close() })
	s := strings.ReplaceAll(extAuthManifests, "APPPORT", strconv.Itoa(harness.StartEcho(t, "app", "app-pod")))
	s = strings.ReplaceAll(s, "AUTHPORT", strconv.Itoa(l.Addr().(*net.TCPAddr).Port))
	write := func(extra string) {
		harness.WriteFile(t, filepath.Join(manifests, "shop.yaml"), strings.ReplaceAll(s, "EXTRA", extra))
	}
	write("")
	p := harness.StartPier(t, harness.Options{Manifests: manifests, State: state})
	vip := p.Addresses("shop", "app")[0]
	client := &http.Client{Timeout: 5 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}
	check := func(when string) {
		t.Helper()
		req, _ := http.NewRequest("GET", "http://"+net.JoinHostPort(vip, strconv.Itoa(p.HTTPPort))+"/x", nil)
		req.Host = "app.example"
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", when, err)
		}
		resp.Body.Close()
		if resp.StatusCode != 302 || !strings.HasPrefix(resp.Header.Get("Location"), "https://login.example/oauth2/start?rd=http%3A%2F%2Fapp.example%2Fx") {
			t.Errorf("%s, no session: %d to %q", when, resp.StatusCode, resp.Header.Get("Location"))
		}
		req.Header.Set("Cookie", "session=ok")
		resp, err = client.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", when, err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("%s, with a session: %d, want 200", when, resp.StatusCode)
		}
	}
	check("first")
	reloads := p.Metric("pier_haproxy_reloads_total", `result="ok"`)
	write(extraIngress)
	harness.WaitFor(t, 30*time.Second, "the second Ingress served", func() bool {
		code, _, _, err := harness.Get(client, vip, p.HTTPPort, "more.example", "/")
		return err == nil && code == 200
	})
	// The new worker may serve before the reload is confirmed and counted.
	harness.WaitFor(t, 10*time.Second, "a reload (the abstract socket's hand-over exercised)", func() bool {
		return p.Metric("pier_haproxy_reloads_total", `result="ok"`) > reloads
	})
	check("after a reload")
}
