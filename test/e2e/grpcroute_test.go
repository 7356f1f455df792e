package e2e

import (
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"pier.dev/pier/internal/model"
	"pier.dev/pier/test/harness"
)

// startGRPCBackend serves h2c (HTTP/2 without TLS, prior knowledge), as a
// gRPC server does, answering each request as gRPC would (content type,
// grpc-status trailer) with headers naming the backend and the :path and
// protocol it received.
func startGRPCBackend(t *testing.T, name string) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/grpc")
		w.Header().Set("X-Backend", name)
		w.Header().Set("X-Path", r.URL.Path)
		w.Header().Set("X-Proto", r.Proto)
		w.Header().Set("Trailer", "Grpc-Status")
		w.WriteHeader(http.StatusOK)
		w.Header().Set("Grpc-Status", "0")
	})
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, Protocols: new(http.Protocols)}
	srv.Protocols.SetUnencryptedHTTP2(true)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().(*net.TCPAddr).Port
}

// grpcCall makes a unary gRPC-shaped call over HTTP/2 without TLS and
// with prior knowledge only, as gRPC clients speak it (no HTTP/1.1
// request, no upgrade), and fails the test if the answer came over
// anything but HTTP/2.
func grpcCall(t *testing.T, vip string, port int, host, path string, header map[string]string) (int, http.Header, error) {
	t.Helper()
	h2c := new(http.Protocols)
	h2c.SetUnencryptedHTTP2(true)
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{Protocols: h2c}}
	defer client.CloseIdleConnections()
	req, err := http.NewRequest(http.MethodPost, "http://"+net.JoinHostPort(vip, strconv.Itoa(port))+path, strings.NewReader("\x00\x00\x00\x00\x00"))
	if err != nil {
		return 0, nil, err
	}
	req.Host = host
	req.Header.Set("Content-Type", "application/grpc")
	req.Header.Set("TE", "trailers")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	if resp.ProtoMajor != 2 {
		t.Errorf("%s %s: answered over %s", host, path, resp.Proto)
	}
	return resp.StatusCode, resp.Header, nil
}

func grpcService(name string, port int) string {
	return `
---
apiVersion: v1
kind: Service
metadata: {name: ` + name + `, namespace: demo}
spec:
  ports: [{name: grpc, port: 50051, targetPort: ` + strconv.Itoa(port) + `}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: ` + name + `-a
  namespace: demo
  labels: {kubernetes.io/service-name: ` + name + `}
addressType: IPv4
ports: [{name: grpc, port: ` + strconv.Itoa(port) + `}]
endpoints: [{addresses: ["127.0.0.1"], conditions: {ready: true}}]
`
}

// TestGRPCRouteH2C: `pier run` (real HAProxy) serves GRPCRoutes on an
// HTTP listener over h2c with prior knowledge: an Exact service and
// method to one backend, the rest of the service to another, each
// reached over h2c; a method of no route gets 404. A GRPCRoute whose
// service is not a gRPC name (";evil") is refused and serves nothing,
// while the others and an HTTPRoute on the same Gateway keep serving.
func TestGRPCRouteH2C(t *testing.T) {
	manifests, state := harness.ShortTempDir(t), harness.ShortTempDir(t)
	port := harness.FreePort(t)
	doc := `apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: pier}
spec: {controllerName: pier.dev/gateway-controller}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: web, namespace: demo}
spec:
  gatewayClassName: pier
  listeners: [{name: http, protocol: HTTP, port: ` + strconv.Itoa(port) + `}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: GRPCRoute
metadata: {name: echo, namespace: demo}
spec:
  parentRefs: [{name: web}]
  hostnames: [grpc.example]
  rules:
  - matches: [{method: {service: pkg.Echo, method: Get}}]
    backendRefs: [{name: grpc-a, port: 50051}]
  - matches: [{method: {service: pkg.Echo}}]
    backendRefs: [{name: grpc-b, port: 50051}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: GRPCRoute
metadata: {name: evil, namespace: demo}
spec:
  parentRefs: [{name: web}]
  hostnames: [evil.example]
  rules:
  - matches: [{method: {service: "pkg.Echo;evil", method: Get}}]
    backendRefs: [{name: grpc-a, port: 50051}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: site, namespace: demo}
spec:
  parentRefs: [{name: web}]
  hostnames: [shop.example]
  rules: [{backendRefs: [{name: site, port: 80}]}]
---
apiVersion: v1
kind: Service
metadata: {name: site, namespace: demo}
spec:
  ports: [{name: http, port: 80, targetPort: 9001}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: site-a
  namespace: demo
  labels: {kubernetes.io/service-name: site}
addressType: IPv4
ports: [{name: http, port: 9001}]
endpoints: [{addresses: ["127.0.0.1"], conditions: {ready: true}}]
` + grpcService("grpc-a", startGRPCBackend(t, "a")) + grpcService("grpc-b", startGRPCBackend(t, "b"))
	doc = strings.ReplaceAll(doc, "9001", strconv.Itoa(harness.StartEcho(t, "site", "site-pod")))
	harness.WriteFile(t, filepath.Join(manifests, "grpc.yaml"), doc)
	p := harness.StartPier(t, harness.Options{Manifests: manifests, State: state})

	lb := p.ServingGateway("demo", "web")
	for _, l := range lb.Listeners {
		for _, pol := range l.Policies {
			if pol.Source.Name == "evil" {
				t.Errorf("the GRPCRoute with service \"pkg.Echo;evil\" is served: policy %s %+v", pol.ID, pol.Rules)
			}
		}
	}
	for _, pool := range lb.Pools {
		if strings.HasPrefix(pool.Service, "grpc-") && pool.Protocol != model.BackendGRPC {
			t.Errorf("pool %s: protocol %q, want GRPC", pool.Name, pool.Protocol)
		}
	}
	call := func(host, path string) (int, http.Header, error) {
		return grpcCall(t, lb.VIP, port, host, path, nil)
	}
	// What this test asserts is the routing, so it starts once both
	// members answer. On a loaded CI machine a request in HAProxy's first
	// 30 ms was once answered 503 with no server chosen: a member was
	// DOWN. A health check that fails then does that (a server starts UP,
	// and one failed check puts it DOWN until rise × inter later).
	harness.WaitFor(t, 15*time.Second, "both gRPC members answer", func() bool {
		a, _, errA := call("grpc.example", "/pkg.Echo/Get")
		b, _, errB := call("grpc.example", "/pkg.Echo/List")
		return errA == nil && errB == nil && a == 200 && b == 200
	})
	for _, c := range []struct{ host, path, want string }{
		{"grpc.example", "/pkg.Echo/Get", "a"},
		{"grpc.example", "/pkg.Echo/List", "b"},
		{"grpc.example", "/other.Svc/Get", "404"},
		{"evil.example", "/pkg.Echo;evil/Get", "400"}, // HAProxy refuses the :path itself
		{"evil.example", "/pkg.Echo/Get", "404"},
	} {
		code, hdr, err := call(c.host, c.path)
		got := strconv.Itoa(code)
		if code == 200 {
			got = hdr.Get("X-Backend")
			if hdr.Get("X-Proto") != "HTTP/2.0" || hdr.Get("X-Path") != c.path {
				t.Errorf("%s %s: the backend saw %s %s", c.host, c.path, hdr.Get("X-Proto"), hdr.Get("X-Path"))
			}
		}
		if err != nil || got != c.want {
			t.Errorf("%s %s: got %s (%v), want %s", c.host, c.path, got, err, c.want)
		}
	}
	code, reply, _, err := harness.Get(&http.Client{Timeout: 5 * time.Second}, lb.VIP, port, "shop.example", "/")
	if err != nil || code != 200 || reply.Service != "site" {
		t.Errorf("the HTTPRoute beside them: %d %+v %v", code, reply, err)
	}
}

// TestGRPCRouteExample serves examples/gateway/grpc.yaml (with
// gateway.yaml's GatewayClass): each call reaches the backend its rule
// names, by method, by service with a header, by service alone, and a
// service of no rule gets 404.
func TestGRPCRouteExample(t *testing.T) {
	manifests, state := harness.ShortTempDir(t), harness.ShortTempDir(t)
	port := harness.FreePort(t)
	s := strings.Replace(readExample(t, "grpc.yaml"), "port: 50051", "port: "+strconv.Itoa(port), 1)
	for backend, name := range map[string]string{"9201": "echo", "9202": "stream", "9203": "canary"} {
		s = strings.ReplaceAll(s, backend, strconv.Itoa(startGRPCBackend(t, name)))
	}
	gatewayExample(t, manifests, "grpc.yaml", s)
	p := harness.StartPier(t, harness.Options{Manifests: manifests, State: state})
	lb := p.ServingGateway("demo", "grpc")
	backendOf := func(path string, header map[string]string) string {
		code, hdr, err := grpcCall(t, lb.VIP, port, "grpc.example", path, header)
		if err != nil {
			return err.Error()
		}
		if code != 200 {
			return strconv.Itoa(code)
		}
		return hdr.Get("X-Backend")
	}
	// Health checks in HAProxy's first moments: see TestGRPCRouteH2C.
	harness.WaitFor(t, 15*time.Second, "every backend answers", func() bool {
		return backendOf("/echo.v1.Echo/Get", nil) == "echo" && backendOf("/echo.v1.Echo/Stream", nil) == "stream" &&
			backendOf("/echo.v1.Echo/Get", map[string]string{"x-canary": "yes"}) == "canary"
	})
	for _, c := range []struct {
		path   string
		header map[string]string
		want   string
	}{
		{"/echo.v1.Echo/Get", nil, "echo"},
		{"/echo.v1.Echo/Stream", nil, "stream"},
		{"/echo.v1.Echo/Stream", map[string]string{"x-canary": "yes"}, "stream"}, // the method's rule is more specific
		{"/echo.v1.Echo/Get", map[string]string{"x-canary": "yes"}, "canary"},
		{"/echo.v1.Echo/Get", map[string]string{"x-canary": "no"}, "echo"},
		{"/other.v1.Svc/Get", nil, "404"},
	} {
		if got := backendOf(c.path, c.header); got != c.want {
			t.Errorf("%s %v: got %s, want %s", c.path, c.header, got, c.want)
		}
	}
}
