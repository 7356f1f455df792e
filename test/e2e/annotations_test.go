package e2e

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"pier.dev/pier/test/harness"
)

// pierClass is the IngressClass of pier's controller that the
// manifests below start with.
const pierClass = `
apiVersion: networking.k8s.io/v1
kind: IngressClass
metadata: {name: pier}
spec: {controller: pier.dev/ingress-controller}
---
`

// shopEcho is the Service echo of namespace shop and its one endpoint,
// the echo backend the test starts on ECHOPORT.
const shopEcho = `
---
apiVersion: v1
kind: Service
metadata: {name: echo, namespace: shop}
spec:
  ports: [{name: http, port: 80, targetPort: ECHOPORT}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: echo-a
  namespace: shop
  labels: {kubernetes.io/service-name: echo}
addressType: IPv4
ports: [{name: http, port: ECHOPORT}]
endpoints:
  - addresses: ["127.0.0.1"]
    conditions: {ready: true}
    targetRef: {kind: Pod, name: echo-pod}
`

// annotationManifests: two Ingresses sharing one load balancer and one
// Service, one guarded by ingress-nginx annotations, one plain; one
// redirecting; one with an invalid value; one with a snippet that
// denies every client, which refuses it (served without the snippet it
// would let everyone in).
const annotationManifests = pierClass + `
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: guarded
  namespace: shop
  annotations:
    pier.dev/load-balancer: shop
    nginx.ingress.kubernetes.io/whitelist-source-range: "127.0.0.1"
    nginx.ingress.kubernetes.io/proxy-body-size: "1k"
spec:
  ingressClassName: pier
  rules:
    - host: guarded.example
      http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: echo, port: {number: 80}}}}]}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: open
  namespace: shop
  annotations:
    pier.dev/load-balancer: shop
    nginx.ingress.kubernetes.io/configuration-snippet: "deny all;"
spec:
  ingressClassName: pier
  rules:
    - host: open.example
      http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: echo, port: {number: 80}}}}]}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: moved
  namespace: shop
  annotations:
    pier.dev/load-balancer: shop
    nginx.ingress.kubernetes.io/permanent-redirect: https://new.example/x
    nginx.ingress.kubernetes.io/permanent-redirect-code: "308"
spec:
  ingressClassName: pier
  rules:
    - host: moved.example
      http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: echo, port: {number: 80}}}}]}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: bad
  namespace: shop
  annotations:
    nginx.ingress.kubernetes.io/proxy-body-size: "1m;evil"
spec:
  ingressClassName: pier
  rules:
    - host: bad.example
      http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: echo, port: {number: 80}}}}]}
` + shopEcho

// TestIngressNginxAnnotations runs `pier run` on Ingresses written for
// ingress-nginx and checks what a user checks with curl.
func TestIngressNginxAnnotations(t *testing.T) {
	manifests, state := harness.ShortTempDir(t), harness.ShortTempDir(t)
	port := harness.StartEcho(t, "echo", "echo-pod")
	harness.WriteFile(t, filepath.Join(manifests, "shop.yaml"),
		strings.ReplaceAll(annotationManifests, "ECHOPORT", strconv.Itoa(port)))
	p := harness.StartPier(t, harness.Options{Manifests: manifests, State: state})
	vip := p.Addresses("shop", "guarded")[0]
	addr := net.JoinHostPort(vip, strconv.Itoa(p.HTTPPort))

	for _, tc := range []struct {
		what, from, req string
		status          int
		location        string
	}{
		{"allowed source", "127.0.0.1", get("guarded.example"), 200, ""},
		{"other source", "127.0.0.2", get("guarded.example"), 403, ""},
		{"snippet refused, not served open", "127.0.0.2", get("open.example"), 404, ""},
		{"body within the limit", "127.0.0.1", post("guarded.example", 1024, false), 200, ""},
		{"body over the limit", "127.0.0.1", post("guarded.example", 1025, false), 413, ""},
		{"chunked body over the limit", "127.0.0.1", post("guarded.example", 4096, true), 413, ""},
		{"permanent redirect", "127.0.0.2", get("moved.example"), 308, "https://new.example/x"},
	} {
		resp := send(t, addr, tc.from, tc.req)
		if resp.StatusCode != tc.status || resp.Header.Get("Location") != tc.location {
			t.Errorf("%s: %d Location %q, want %d %q", tc.what, resp.StatusCode, resp.Header.Get("Location"), tc.status, tc.location)
		}
	}

	bad, err := p.Ingress("shop", "bad")
	if err != nil || len(bad.Problems) == 0 || bad.Problems[0].Reason != "InvalidAnnotation" ||
		len(bad.Status.LoadBalancer.Ingress) != 0 {
		t.Errorf("bad: want an InvalidAnnotation refusal and no address, got %+v %v", bad, err)
	}
	open, err := p.Ingress("shop", "open")
	if err != nil || len(open.Problems) != 1 || open.Problems[0].Reason != "SnippetRefused" ||
		!strings.Contains(open.Problems[0].Message, "for deny use denylist-source-range") ||
		len(open.Status.LoadBalancer.Ingress) != 0 {
		t.Errorf("open: want one SnippetRefused naming the source ranges and no address, got %+v %v", open, err)
	}
}

func get(host string) string {
	return "GET / HTTP/1.1\r\nHost: " + host + "\r\nConnection: close\r\n\r\n"
}

func post(host string, size int, chunked bool) string {
	body := strings.Repeat("a", size)
	head := "POST / HTTP/1.1\r\nHost: " + host + "\r\nConnection: close\r\n"
	if chunked {
		return head + "Transfer-Encoding: chunked\r\n\r\n" + strconv.FormatInt(int64(size), 16) + "\r\n" + body + "\r\n0\r\n\r\n"
	}
	return head + "Content-Length: " + strconv.Itoa(size) + "\r\n\r\n" + body
}

// send writes one raw request from the local address from.
func send(t *testing.T, addr, from, req string) *http.Response {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 5 * time.Second}
	conn, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(conn, req); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}
