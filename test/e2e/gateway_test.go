package e2e

import (
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"pier.dev/pier/internal/model"
	"pier.dev/pier/test/harness"
)

// TestGatewayExample serves examples/gateway/gateway.yaml through `pier
// run` (real binary, real HAProxy): the Gateway gets its own load
// balancer and VIP, and requests to the VIP on the listener's port reach
// the backend its HTTPRoute names, by host and path.
func TestGatewayExample(t *testing.T) {
	manifests, state := harness.ShortTempDir(t), harness.ShortTempDir(t)
	b, err := os.ReadFile("../../examples/gateway/gateway.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// The listener's port is the Gateway's own: a free one, so parallel
	// runs of pier on this machine (same first VIP) do not collide.
	port := harness.FreePort(t)
	s := strings.Replace(string(b), "port: 8000", "port: "+strconv.Itoa(port), 1)
	s = strings.ReplaceAll(s, "9001", strconv.Itoa(harness.StartEcho(t, "webservice-1", "webserver-1-pod")))
	s = strings.ReplaceAll(s, "9004", strconv.Itoa(harness.StartEcho(t, "webservice-2", "webserver-2-pod")))
	harness.WriteFile(t, filepath.Join(manifests, "gateway.yaml"), s)
	p := harness.StartPier(t, harness.Options{Manifests: manifests, State: state})

	lb := p.ServingGateway("demo", "web")
	if lb.Provider != model.ProviderHAProxy || len(lb.Listeners) != 1 || lb.Listeners[0].Port != port {
		t.Fatalf("load balancer %s: provider %s, listeners %+v", lb.Name, lb.Provider, lb.Listeners)
	}
	client := &http.Client{Timeout: 5 * time.Second}
	for _, addr := range []string{lb.VIP, lb.FIP} {
		for _, r := range []struct{ host, path, want string }{
			{"shop.example", "/", "webservice-1"},
			{"shop.example", "/cart/1", "webservice-1"},
			{"shop.example", "/blog", "webservice-2"},
			{"shop.example", "/blog/post", "webservice-2"},
			{"SHOP.example:80", "/blog/post", "webservice-2"},
			{"shop.example", "/blogx", "webservice-1"},
			{"other.example", "/blog", "404"},
		} {
			code, reply, _, err := harness.Get(client, addr, port, r.host, r.path)
			got := strconv.Itoa(code)
			if code == 200 {
				got = reply.Service
			}
			if err != nil || got != r.want {
				t.Errorf("via %s:%d Host %q %s: got %s (%v), want %s", addr, port, r.host, r.path, got, err, r.want)
			}
		}
	}
}

// TestGatewayReferenceGrantFiles: in `pier run`, an HTTPRoute's backend in
// another namespace is not served (500, the spec's answer for an
// unresolved backend) until a ReferenceGrant in that namespace appears in
// the manifests; then HAProxy serves it, and the example's own routes keep
// serving throughout. A route with method and query matches routes by them.
func TestGatewayReferenceGrantFiles(t *testing.T) {
	manifests, state := harness.ShortTempDir(t), harness.ShortTempDir(t)
	b, err := os.ReadFile("../../examples/gateway/gateway.yaml")
	if err != nil {
		t.Fatal(err)
	}
	port := harness.FreePort(t)
	s := strings.Replace(string(b), "port: 8000", "port: "+strconv.Itoa(port), 1)
	s = strings.ReplaceAll(s, "9001", strconv.Itoa(harness.StartEcho(t, "webservice-1", "webserver-1-pod")))
	s = strings.ReplaceAll(s, "9004", strconv.Itoa(harness.StartEcho(t, "webservice-2", "webserver-2-pod")))
	apiPort := strconv.Itoa(harness.StartEcho(t, "api", "api-pod"))
	harness.WriteFile(t, filepath.Join(manifests, "gateway.yaml"), s)
	harness.WriteFile(t, filepath.Join(manifests, "api.yaml"), `apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: api, namespace: demo}
spec:
  parentRefs: [{name: web}]
  hostnames: ["api.example"]
  rules: [{backendRefs: [{name: api, namespace: backends, port: 80}]}]
---
apiVersion: v1
kind: Service
metadata: {name: api, namespace: backends}
spec:
  ports: [{name: http, port: 80, targetPort: `+apiPort+`}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: api-a
  namespace: backends
  labels: {kubernetes.io/service-name: api}
addressType: IPv4
ports: [{name: http, port: `+apiPort+`}]
endpoints: [{addresses: ["127.0.0.1"], conditions: {ready: true}, targetRef: {kind: Pod, name: api-pod}}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: matches, namespace: demo}
spec:
  parentRefs: [{name: web}]
  hostnames: ["match.example"]
  rules:
  - matches: [{method: POST}, {queryParams: [{name: env, value: canary}]}]
    backendRefs: [{name: gw-blog, port: 80}]
  - backendRefs: [{name: gw-store, port: 80}]
`)
	p := harness.StartPier(t, harness.Options{Manifests: manifests, State: state})
	lb := p.ServingGateway("demo", "web")
	client := &http.Client{Timeout: 5 * time.Second}
	send := func(method, host, path string) string {
		code, reply, _, err := harness.Send(client, method, lb.VIP, port, host, path)
		if err != nil {
			return err.Error()
		}
		if code == 200 {
			return reply.Service
		}
		return strconv.Itoa(code)
	}
	get := func(host string) string { return send(http.MethodGet, host, "/") }
	// A backend not permitted is unresolved: the spec's 500.
	if got := get("api.example"); got != "500" {
		t.Fatalf("api.example before any ReferenceGrant: %s, want 500", got)
	}
	// Method and query-parameter matches route (render's match maps).
	for _, tc := range []struct{ method, path, want string }{
		{http.MethodGet, "/", "webservice-1"},
		{http.MethodPost, "/", "webservice-2"},
		{http.MethodGet, "/x?env=canary", "webservice-2"},
		{http.MethodGet, "/x?env=prod", "webservice-1"},
	} {
		if got := send(tc.method, "match.example", tc.path); got != tc.want {
			t.Errorf("%s match.example%s: %s, want %s", tc.method, tc.path, got, tc.want)
		}
	}
	if got := get("shop.example"); got != "webservice-1" {
		t.Errorf("shop.example: %s", got)
	}
	harness.WriteFile(t, filepath.Join(manifests, "grant.yaml"), `apiVersion: gateway.networking.k8s.io/v1beta1
kind: ReferenceGrant
metadata: {name: from-demo, namespace: backends}
spec:
  from: [{group: gateway.networking.k8s.io, kind: HTTPRoute, namespace: demo}]
  to: [{group: "", kind: Service}]
`)
	harness.WaitFor(t, 20*time.Second, "api.example served after the ReferenceGrant", func() bool {
		return get("api.example") == "api"
	})
	if got := get("shop.example"); got != "webservice-1" {
		t.Errorf("shop.example after the grant: %s", got)
	}
}

// readExample is examples/gateway/<name>, for a test to put its own ports
// and members in.
func readExample(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("../../examples/gateway", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// gatewayExample writes into manifests the example doc (as name) beside
// the GatewayClass of examples/gateway/gateway.yaml, its first document:
// the other examples name that class and do not repeat it.
func gatewayExample(t *testing.T, manifests, name, doc string) {
	t.Helper()
	class, _, _ := strings.Cut(readExample(t, "gateway.yaml"), "\n---\n")
	harness.WriteFile(t, filepath.Join(manifests, "class.yaml"), class)
	harness.WriteFile(t, filepath.Join(manifests, name), doc)
}
