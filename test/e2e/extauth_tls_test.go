package e2e

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"pier.dev/pier/test/harness"
)

// authHost is the cluster DNS name of the auth Service of namespace
// oauth2-proxy, what the auth Service's certificate carries.
const authHost = "oauth2-proxy.oauth2-proxy.svc.cluster.local"

// extAuthTLSManifests: the oauth2-proxy guides' pattern with oauth2-proxy
// in a namespace of its own, over https, and the guides' auth-signin:
// shop/app checks its Service's certificate against the CA of its Secret
// auth-ca; shop/wrong-ca names a CA that did not sign it. AUTHPORT is
// the auth server, CA and WRONGCA the two CAs' PEM.
const extAuthTLSManifests = pierClass + `
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: app
  namespace: shop
  annotations:
    nginx.ingress.kubernetes.io/auth-url: https://` + authHost + `/oauth2/auth
    nginx.ingress.kubernetes.io/auth-signin: https://$host/oauth2/start?rd=$escaped_request_uri
    pier.dev/auth-url-ca-secret: auth-ca
spec:
  ingressClassName: pier
  rules:
    - host: app.example
      http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: app, port: {number: 80}}}}]}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: wrong-ca
  namespace: shop
  annotations:
    nginx.ingress.kubernetes.io/auth-url: https://` + authHost + `/oauth2/auth
    pier.dev/auth-url-ca-secret: other-ca
spec:
  ingressClassName: pier
  rules:
    - host: wrong.example
      http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: app, port: {number: 80}}}}]}
---
apiVersion: v1
kind: Secret
metadata: {name: auth-ca, namespace: shop}
stringData:
  ca.crt: CA
---
apiVersion: v1
kind: Secret
metadata: {name: other-ca, namespace: shop}
stringData:
  ca.crt: WRONGCA
---
apiVersion: v1
kind: Service
metadata: {name: app, namespace: shop}
spec: {ports: [{name: http, port: 80}]}
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
apiVersion: v1
kind: Service
metadata: {name: oauth2-proxy, namespace: oauth2-proxy}
spec: {ports: [{name: https, port: 443}]}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: oauth2-proxy-1, namespace: oauth2-proxy, labels: {kubernetes.io/service-name: oauth2-proxy}}
addressType: IPv4
ports: [{name: https, port: AUTHPORT}]
endpoints:
  - addresses: ["127.0.0.1"]
    conditions: {ready: true}
`

// tlsAuthServer serves auth answers over TLS with certificate cert/key:
// 202 when the request carries the cookie session=<session>, else 401.
// It records the SNI of the auth requests.
type tlsAuthServer struct {
	port int
	mu   sync.Mutex
	snis map[string]int
}

func startTLSAuth(t *testing.T, certPEM, keyPEM, session string) *tlsAuthServer {
	t.Helper()
	pair, err := tls.X509KeyPair([]byte(certPEM), []byte(keyPEM))
	if err != nil {
		t.Fatal(err)
	}
	a := &tlsAuthServer{snis: map[string]int{}}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/oauth2/auth" {
			return // a health check's handshake, or a stray request
		}
		a.mu.Lock()
		a.snis[r.TLS.ServerName]++
		a.mu.Unlock()
		if !strings.Contains(r.Header.Get("Cookie"), "session="+session) {
			w.WriteHeader(401)
			return
		}
		w.WriteHeader(202)
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{pair}}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // health checks close without a handshake
	srv.StartTLS()
	t.Cleanup(srv.Close)
	a.port = srv.Listener.Addr().(*net.TCPAddr).Port
	return a
}

func (a *tlsAuthServer) sni(name string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.snis[name]
}

// TestExternalAuthTLSAcrossNamespaces: an auth-url to an https Service
// of another namespace, which --auth-url-namespaces allows: without a
// session the client is sent to the guides' auth-signin with its host
// and escaped URI; with one the request is served, the auth request
// having gone over TLS with SNI the Service's name and a certificate the
// Ingress's CA signed; a CA that did not sign it fails every request
// (500). When the auth Service's endpoints change, the auth requests
// follow them. Without the flag the Ingress is refused, naming it.
func TestExternalAuthTLSAcrossNamespaces(t *testing.T) {
	ca, other := newE2ECA(t), newE2ECA(t)
	cert, key := ca.issue(t, authHost, x509.ExtKeyUsageServerAuth)
	auth := startTLSAuth(t, cert, key, "ok")
	manifests, state := harness.ShortTempDir(t), harness.ShortTempDir(t)
	write := func(authPort int) {
		harness.WriteFile(t, filepath.Join(manifests, "shop.yaml"), strings.NewReplacer(
			"APPPORT", strconv.Itoa(harness.StartEcho(t, "app", "app-pod")), "AUTHPORT", strconv.Itoa(authPort),
			"WRONGCA", indent(other.certPEM), "CA", indent(ca.certPEM)).Replace(extAuthTLSManifests))
	}
	write(auth.port)

	t.Run("refused without --auth-url-namespaces", func(t *testing.T) {
		p := harness.StartPier(t, harness.Options{Manifests: manifests, State: state})
		harness.WaitFor(t, 10*time.Second, "shop/app refused", func() bool {
			ing, err := p.Ingress("shop", "app")
			return err == nil && len(ing.Problems) > 0 && ing.Problems[0].Reason == "InvalidAnnotation" &&
				strings.Contains(ing.Problems[0].Message, "--auth-url-namespaces")
		})
		p.Stop()
	})

	p := harness.StartPier(t, harness.Options{Manifests: manifests, State: state,
		ExtraArgs: []string{"--auth-url-namespaces", "oauth2-proxy"}})
	client := &http.Client{Timeout: 5 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	get := func(ing, host, path, cookie string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest("GET", "http://"+net.JoinHostPort(p.Addresses("shop", ing)[0], strconv.Itoa(p.HTTPPort))+path, nil)
		req.Host = host
		if cookie != "" {
			req.Header.Set("Cookie", cookie)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	if resp := get("app", "app.example", "/x/y?a=1&b=2", ""); resp.StatusCode != 302 ||
		resp.Header.Get("Location") != "https://app.example/oauth2/start?rd=%2Fx%2Fy%3Fa%3D1%26b%3D2" {
		t.Errorf("no session: %d to %q, want 302 to https://app.example/oauth2/start?rd=%%2Fx%%2Fy%%3Fa%%3D1%%26b%%3D2",
			resp.StatusCode, resp.Header.Get("Location"))
	}
	if resp := get("app", "app.example", "/x", "session=ok"); resp.StatusCode != 200 {
		t.Errorf("with a session: %d, want 200", resp.StatusCode)
	}
	if n := auth.sni(authHost); n < 2 {
		t.Errorf("%d auth requests with SNI %s, want the two above (SNIs seen: %v)", n, authHost, auth.snis)
	}
	if resp := get("wrong-ca", "wrong.example", "/", "session=ok"); resp.StatusCode != 500 {
		t.Errorf("a CA that did not sign the auth Service's certificate: %d, want 500", resp.StatusCode)
	}

	// The auth Service moves to another endpoint, which lets session=two in.
	moved := startTLSAuth(t, cert, key, "two")
	write(moved.port)
	harness.WaitFor(t, 20*time.Second, "the auth requests follow the new endpoint", func() bool {
		return get("app", "app.example", "/", "session=two").StatusCode == 200
	})
}
