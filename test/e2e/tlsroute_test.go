package e2e

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"pier.dev/pier/internal/model"
	"pier.dev/pier/test/harness"
)

// tlsHello connects to addr:port with SNI sni and returns the common
// name of the certificate the far end showed, and the X-Seen header of
// GET / over the connection (a passed-through member's SNI), or the
// error (a refused or closed connection).
func tlsHello(addr string, port int, sni string) (cn, seen string, err error) {
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 3 * time.Second}, "tcp", net.JoinHostPort(addr, strconv.Itoa(port)),
		&tls.Config{ServerName: sni, InsecureSkipVerify: true})
	if err != nil {
		return "", "", err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(3 * time.Second))
	cn = conn.ConnectionState().PeerCertificates[0].Subject.CommonName
	host := sni
	if host == "" {
		host = "none"
	}
	if _, err := io.WriteString(conn, "GET / HTTP/1.1\r\nHost: "+host+"\r\nConnection: close\r\n\r\n"); err != nil {
		return cn, "", err
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return cn, "", err
	}
	defer resp.Body.Close()
	return cn, resp.Header.Get("X-Seen"), nil
}

// TestTLSRoutePassthrough: `pier run` (real HAProxy) serves TLSRoutes on
// a Gateway's TLS listener (tls.mode Passthrough) beside an HTTPS
// listener on the same port. Through the VIP and the FIP, a TLS
// connection whose SNI a TLSRoute names reaches its member untouched
// (the client sees the member's certificate, the member the SNI): the
// exact db.apps.example before the wildcard *.apps.example, which spans
// labels. shop.example, the HTTPS listener's, is terminated with the
// listener's certificate and answered by its HTTPRoute. A name under a
// TLS listener's wildcard that no route serves (*.internal.example), and
// the hostname of a TLSRoute naming the Service "echo;evil", are
// refused, not terminated; an unknown SNI is not passed through. The routes are v1 (standard since v1.5) and
// v1alpha2.
func TestTLSRoutePassthrough(t *testing.T) {
	manifests, state := harness.ShortTempDir(t), harness.ShortTempDir(t)
	port := harness.FreePort(t)
	appsCert, appsKey := (*e2eCA)(nil).issue(t, "member.apps", x509.ExtKeyUsageServerAuth)
	dbCert, dbKey := (*e2eCA)(nil).issue(t, "member.db", x509.ExtKeyUsageServerAuth)
	shopCert, shopKey := (*e2eCA)(nil).issue(t, "shop.example", x509.ExtKeyUsageServerAuth)
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
  listeners:
  - {name: shop, protocol: HTTPS, port: ` + strconv.Itoa(port) + `, hostname: shop.example, tls: {certificateRefs: [{name: shop-tls}]}}
  - {name: apps, protocol: TLS, port: ` + strconv.Itoa(port) + `, hostname: "*.apps.example", tls: {mode: Passthrough}}
  - {name: internal, protocol: TLS, port: ` + strconv.Itoa(port) + `, hostname: "*.internal.example", tls: {mode: Passthrough}}
---
apiVersion: v1
kind: Secret
metadata: {name: shop-tls, namespace: demo}
type: kubernetes.io/tls
stringData:
  tls.crt: ` + indent(shopCert) + `
  tls.key: ` + indent(shopKey) + `
---
apiVersion: gateway.networking.k8s.io/v1
kind: TLSRoute
metadata: {name: apps, namespace: demo}
spec:
  parentRefs: [{name: web, sectionName: apps}]
  hostnames: ["*.apps.example"]
  rules: [{backendRefs: [{name: apps, port: 7000}]}]
---
apiVersion: gateway.networking.k8s.io/v1alpha2
kind: TLSRoute
metadata: {name: db, namespace: demo}
spec:
  parentRefs: [{name: web}]
  hostnames: [db.apps.example]
  rules: [{backendRefs: [{name: db, port: 7000}]}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: TLSRoute
metadata: {name: evil, namespace: demo}
spec:
  parentRefs: [{name: web, sectionName: apps}]
  hostnames: [bad.apps.example]
  rules: [{backendRefs: [{name: "echo;evil", port: 7000}]}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: site, namespace: demo}
spec:
  parentRefs: [{name: web, sectionName: shop}]
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
` + tcpService("apps", tlsMember(t, appsCert, appsKey)) + tcpService("db", tlsMember(t, dbCert, dbKey))
	doc = strings.ReplaceAll(doc, "9001", strconv.Itoa(harness.StartEcho(t, "site", "site-pod")))
	harness.WriteFile(t, filepath.Join(manifests, "tls.yaml"), doc)
	p := harness.StartPier(t, harness.Options{Manifests: manifests, State: state})

	lb := p.ServingGateway("demo", "web")
	for _, addr := range []string{lb.VIP, lb.FIP} {
		for sni, want := range map[string]string{
			"a.apps.example":   "member.apps sni=a.apps.example client=",
			"b.a.apps.example": "member.apps sni=b.a.apps.example client=",
			"db.apps.example":  "member.db sni=db.apps.example client=",
		} {
			cn, seen, err := tlsHello(addr, port, sni)
			if got := cn + " " + seen; err != nil || got != want {
				t.Errorf("via %s, SNI %s: %q (%v), want %q", addr, sni, got, err, want)
			}
		}
		// Terminated by the HTTPS listener and answered by its HTTPRoute.
		client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
			TLSClientConfig: &tls.Config{ServerName: "shop.example", InsecureSkipVerify: true},
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				return (&net.Dialer{}).DialContext(ctx, "tcp", net.JoinHostPort(addr, strconv.Itoa(port)))
			}}}
		resp, err := client.Get("https://shop.example/")
		if err != nil {
			t.Errorf("via %s, shop.example: %v", addr, err)
		} else {
			var reply harness.EchoReply
			_ = json.NewDecoder(resp.Body).Decode(&reply)
			resp.Body.Close()
			if resp.StatusCode != 200 || reply.Service != "site" || resp.TLS.PeerCertificates[0].Subject.CommonName != "shop.example" {
				t.Errorf("via %s, shop.example: %d %+v", addr, resp.StatusCode, reply)
			}
		}
		for _, sni := range []string{"db.internal.example", "bad.apps.example"} {
			if cn, seen, err := tlsHello(addr, port, sni); err == nil {
				t.Errorf("via %s, SNI %s: certificate %q, %q; want the connection refused", addr, sni, cn, seen)
			}
		}
		if cn, _, err := tlsHello(addr, port, "unknown.example"); err == nil && strings.HasPrefix(cn, "member.") {
			t.Errorf("via %s, SNI unknown.example: passed through to %q", addr, cn)
		}
	}
	harness.WaitFor(t, 10*time.Second, "the TLS listener Programmed", func() bool {
		for _, l := range gatewayListeners(t, p, "demo", "web") {
			if l.Name == "apps" {
				c := meta.FindStatusCondition(l.Conditions, string(gwv1.ListenerConditionProgrammed))
				return c != nil && c.Status == metav1.ConditionTrue
			}
		}
		return false
	})
	for _, l := range gatewayListeners(t, p, "demo", "web") {
		want := map[gwv1.SectionName]int32{"shop": 1, "apps": 3, "internal": 0}[l.Name]
		kind := gwv1.Kind(model.KindTLSRoute)
		if l.Name == "shop" {
			kind = model.KindHTTPRoute
		}
		if l.AttachedRoutes != want || len(l.SupportedKinds) == 0 || l.SupportedKinds[0].Kind != kind {
			t.Errorf("listener %s: attachedRoutes %d, supportedKinds %+v; want %d and %s", l.Name, l.AttachedRoutes, l.SupportedKinds, want, kind)
		}
	}
	// The name is refused before it reaches a file (HAProxy's
	// configuration or its SNI maps).
	err := filepath.WalkDir(state, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !(strings.HasSuffix(path, ".conf") || strings.HasSuffix(path, ".map")) {
			return nil
		}
		b, err := os.ReadFile(path)
		if err == nil && strings.Contains(string(b), "evil") {
			t.Errorf("%s holds \"evil\"", path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestTLSRouteExample serves examples/gateway/tls.yaml (with
// gateway.yaml's GatewayClass): www.apps.example reaches the apps
// member, admin.apps.example the admin one, through the VIP.
func TestTLSRouteExample(t *testing.T) {
	manifests, state := harness.ShortTempDir(t), harness.ShortTempDir(t)
	port := harness.FreePort(t)
	appsCert, appsKey := (*e2eCA)(nil).issue(t, "member.apps", x509.ExtKeyUsageServerAuth)
	adminCert, adminKey := (*e2eCA)(nil).issue(t, "member.admin", x509.ExtKeyUsageServerAuth)
	s := strings.Replace(readExample(t, "tls.yaml"), "port: 8443", "port: "+strconv.Itoa(port), 1)
	s = strings.ReplaceAll(s, "9102", strconv.Itoa(tlsMember(t, appsCert, appsKey)))
	s = strings.ReplaceAll(s, "9103", strconv.Itoa(tlsMember(t, adminCert, adminKey)))
	gatewayExample(t, manifests, "tls.yaml", s)
	p := harness.StartPier(t, harness.Options{Manifests: manifests, State: state})
	lb := p.ServingGateway("demo", "tls")
	for sni, want := range map[string]string{"www.apps.example": "member.apps", "admin.apps.example": "member.admin"} {
		if cn, _, err := tlsHello(lb.VIP, port, sni); err != nil || cn != want {
			t.Errorf("SNI %s: certificate %q (%v), want %q", sni, cn, err, want)
		}
	}
}
