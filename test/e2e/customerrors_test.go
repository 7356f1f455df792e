package e2e

import (
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"pier.dev/pier/test/harness"
)

// customErrorsManifests: Ingress app (custom-http-errors 404,503 with
// default-backend error-pages) and plain (neither) route to the same
// Service app.
const customErrorsManifests = pierClass + `
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: app
  namespace: shop
  annotations:
    pier.dev/load-balancer: shop
    nginx.ingress.kubernetes.io/default-backend: error-pages
    nginx.ingress.kubernetes.io/custom-http-errors: "404,503"
spec:
  ingressClassName: pier
  rules:
    - host: app.example
      http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: app, port: {name: http}}}}]}
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
      http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: app, port: {name: http}}}}]}
---
apiVersion: v1
kind: Service
metadata: {name: app, namespace: shop}
spec: {ports: [{name: http, port: 80}]}
---
apiVersion: v1
kind: Service
metadata: {name: error-pages, namespace: shop}
spec: {ports: [{name: http, port: 8080}]}
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
metadata: {name: error-pages-1, namespace: shop, labels: {kubernetes.io/service-name: error-pages}}
addressType: IPv4
ports: [{name: http, port: ERRPORT}]
endpoints:
  - addresses: ["127.0.0.1"]
    conditions: {ready: true}
`

// serve starts an HTTP server on 127.0.0.1 and returns its port.
func serve(t *testing.T, h http.HandlerFunc) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return l.Addr().(*net.TCPAddr).Port
}

// TestCustomHTTPErrors runs custom-http-errors through `pier run`: app's
// 404 reaches the client as a 404 with error-pages' page, error-pages
// having got X-Code, X-Original-URI, X-Namespace, X-Ingress-Name,
// X-Service-Name and X-Service-Port; a 200 and plain's 404 pass
// untouched.
func TestCustomHTTPErrors(t *testing.T) {
	manifests, state := harness.ShortTempDir(t), harness.ShortTempDir(t)
	var mu sync.Mutex
	var seen http.Header
	ports := map[string]int{
		"APPPORT": serve(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/plain")
			if strings.HasPrefix(r.URL.Path, "/missing") {
				w.WriteHeader(404)
				io.WriteString(w, "app 404")
				return
			}
			io.WriteString(w, "app ok")
		}),
		"ERRPORT": serve(t, func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			seen = r.Header.Clone()
			mu.Unlock()
			w.Header().Set("Content-Type", "text/html")
			io.WriteString(w, "<h1>"+r.Header.Get("X-Code")+" from error-pages</h1>")
		}),
	}
	s := customErrorsManifests
	for k, v := range ports {
		s = strings.ReplaceAll(s, k, strconv.Itoa(v))
	}
	harness.WriteFile(t, filepath.Join(manifests, "shop.yaml"), s)
	p := harness.StartPier(t, harness.Options{Manifests: manifests, State: state})
	vip := p.Addresses("shop", "app")[0]
	client := &http.Client{Timeout: 10 * time.Second}
	get := func(host, path string) (int, string, string) {
		req, err := http.NewRequest("GET", "http://"+net.JoinHostPort(vip, strconv.Itoa(p.HTTPPort))+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s%s: %v", host, path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("Content-Type"), string(b)
	}
	harness.WaitFor(t, 30*time.Second, "app.example is served", func() bool {
		code, _, _ := get("app.example", "/")
		return code == 200
	})
	if code, ct, body := get("app.example", "/missing?x=1"); code != 404 || ct != "text/html" || body != "<h1>404 from error-pages</h1>" {
		t.Errorf("app.example/missing: %d %q %q, want 404 with error-pages' page", code, ct, body)
	}
	mu.Lock()
	h := seen
	mu.Unlock()
	for k, want := range map[string]string{"X-Code": "404", "X-Original-URI": "/missing?x=1", "X-Namespace": "shop",
		"X-Ingress-Name": "app", "X-Service-Name": "app", "X-Service-Port": "http"} {
		if got := h.Get(k); got != want {
			t.Errorf("error-pages got %s %q, want %q", k, got, want)
		}
	}
	for _, tc := range []struct {
		host, path string
		code       int
		body       string
	}{
		{"app.example", "/", 200, "app ok"},
		{"plain.example", "/missing", 404, "app 404"},
	} {
		if code, ct, body := get(tc.host, tc.path); code != tc.code || ct != "text/plain" || body != tc.body {
			t.Errorf("%s%s: %d %q %q, want %d %q untouched", tc.host, tc.path, code, ct, body, tc.code, tc.body)
		}
	}
}
