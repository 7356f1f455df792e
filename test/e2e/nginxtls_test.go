package e2e

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"pier.dev/pier/test/harness"
)

// e2eCA issues certificates for the members and pier's client.
type e2eCA struct {
	cert    *x509.Certificate
	key     *ecdsa.PrivateKey
	certPEM string
}

func newE2ECA(t *testing.T) *e2eCA {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "e2e CA"}, IsCA: true,
		BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &e2eCA{cert: cert, key: key, certPEM: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))}
}

// issue returns PEM certificate and key for name, signed by the CA, or
// self-signed when ca is nil.
func (ca *e2eCA) issue(t *testing.T, name string, usage x509.ExtKeyUsage) (string, string) {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		DNSNames: []string{name}, KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	parent, signer := tmpl, key
	if ca != nil {
		parent, signer = ca.cert, ca.key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, signer)
	if err != nil {
		t.Fatal(err)
	}
	kder, _ := x509.MarshalPKCS8PrivateKey(key)
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})),
		string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}))
}

// tlsMember serves TLS with certPEM/keyPEM on a free port, asking for a
// client certificate, and answers with the SNI and client CN it saw
// (header X-Seen).
func tlsMember(t *testing.T, certPEM, keyPEM string) int {
	t.Helper()
	pair, err := tls.X509KeyPair([]byte(certPEM), []byte(keyPEM))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cn := ""
		if len(r.TLS.PeerCertificates) > 0 {
			cn = r.TLS.PeerCertificates[0].Subject.CommonName
		}
		w.Header().Set("X-Seen", "sni="+r.TLS.ServerName+" client="+cn)
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{pair}, ClientAuth: tls.RequestClientCert}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().(*net.TCPAddr).Port
}

// indent makes a PEM a YAML block scalar's body.
func indent(s string) string {
	return "|\n    " + strings.ReplaceAll(strings.TrimSuffix(s, "\n"), "\n", "\n    ")
}

func service(name string, port int) string {
	p := strconv.Itoa(port)
	return `
---
apiVersion: v1
kind: Service
metadata: {name: ` + name + `, namespace: shop}
spec:
  ports: [{name: https, port: 443, targetPort: ` + p + `}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: ` + name + `-a
  namespace: shop
  labels: {kubernetes.io/service-name: ` + name + `}
addressType: IPv4
ports: [{name: https, port: ` + p + `}]
endpoints:
  - addresses: ["127.0.0.1"]
    conditions: {ready: true}
    targetRef: {kind: Pod, name: ` + name + `-pod}
`
}

func ingress(name, host, svc, group string, ann map[string]string, tlsSecret string) string {
	var a strings.Builder
	for k, v := range ann {
		a.WriteString("\n    " + k + ": \"" + v + "\"")
	}
	tlsPart := ""
	if tlsSecret != "" {
		tlsPart = "\n  tls: [{hosts: [" + host + "], secretName: " + tlsSecret + "}]"
	}
	return `
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: ` + name + `
  namespace: shop
  annotations:
    pier.dev/load-balancer: ` + group + a.String() + `
spec:
  ingressClassName: pier` + tlsPart + `
  rules:
    - host: ` + host + `
      http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: ` + svc + `, port: {number: 443}}}}]}
`
}

// TestNginxBackendTLSAndPassthrough runs `pier run` on ingress-nginx's
// proxy-ssl-* and ssl-passthrough annotations with their Secrets as
// files: a verified member with SNI and a client certificate answers;
// one checked against another name gets 503; on the HTTPS port, the
// passthrough host shows the member's own certificate while a terminated
// host of the same load balancer shows pier's.
func TestNginxBackendTLSAndPassthrough(t *testing.T) {
	manifests, state := harness.ShortTempDir(t), harness.ShortTempDir(t)
	ca := newE2ECA(t)
	memberCert, memberKey := ca.issue(t, "payments.shop.svc", x509.ExtKeyUsageServerAuth)
	clientCert, clientKey := ca.issue(t, "pier-client", x509.ExtKeyUsageClientAuth)
	ptCert, ptKey := (*e2eCA)(nil).issue(t, "member.pt.example", x509.ExtKeyUsageServerAuth)
	termCert, termKey := (*e2eCA)(nil).issue(t, "term.example", x509.ExtKeyUsageServerAuth)
	payments, pt := tlsMember(t, memberCert, memberKey), tlsMember(t, ptCert, ptKey)

	verify := map[string]string{"nginx.ingress.kubernetes.io/backend-protocol": "HTTPS",
		"nginx.ingress.kubernetes.io/proxy-ssl-verify": "on", "nginx.ingress.kubernetes.io/proxy-ssl-secret": "shop/payments-mtls",
		"nginx.ingress.kubernetes.io/proxy-ssl-server-name": "on"}
	wrong := map[string]string{"nginx.ingress.kubernetes.io/proxy-ssl-name": "other.shop.svc"}
	for k, v := range verify {
		wrong[k] = v
	}
	m := pierClass + `
apiVersion: v1
kind: Secret
metadata: {name: payments-mtls, namespace: shop}
type: Opaque
stringData:
  ca.crt: ` + indent(ca.certPEM) + `
  tls.crt: ` + indent(clientCert) + `
  tls.key: ` + indent(clientKey) + `
---
apiVersion: v1
kind: Secret
metadata: {name: term-tls, namespace: shop}
type: kubernetes.io/tls
stringData:
  tls.crt: ` + indent(termCert) + `
  tls.key: ` + indent(termKey) + `
` + ingress("payments", "payments.example", "payments", "pay", verify, "") +
		ingress("payments-wrong", "wrong.example", "payments2", "wrong", wrong, "") +
		ingress("pt", "pt.example", "pt", "edge", map[string]string{"nginx.ingress.kubernetes.io/ssl-passthrough": "true"}, "") +
		ingress("term", "term.example", "payments", "edge", map[string]string{"nginx.ingress.kubernetes.io/backend-protocol": "HTTPS"}, "term-tls") +
		service("payments", payments) + service("payments2", payments) + service("pt", pt)
	harness.WriteFile(t, filepath.Join(manifests, "shop.yaml"), m)
	p := harness.StartPier(t, harness.Options{Manifests: manifests, State: state})

	get := func(ing, host string) (int, string) {
		addr := net.JoinHostPort(p.Addresses("shop", ing)[0], strconv.Itoa(p.HTTPPort))
		resp := send(t, addr, "127.0.0.1", "GET / HTTP/1.1\r\nHost: "+host+"\r\nConnection: close\r\n\r\n")
		return resp.StatusCode, resp.Header.Get("X-Seen")
	}
	harness.WaitFor(t, 20*time.Second, "the verified member answers", func() bool {
		code, _ := get("payments", "payments.example")
		return code == 200
	})
	if code, body := get("payments", "payments.example"); code != 200 || body != "sni=payments.shop.svc client=pier-client" {
		t.Errorf("verified: %d %q", code, body)
	}
	if code, body := get("payments-wrong", "wrong.example"); code != 503 {
		t.Errorf("wrong proxy-ssl-name: %d %q, want 503", code, body)
	}
	edge := net.JoinHostPort(p.Addresses("shop", "pt")[0], strconv.Itoa(p.HTTPSPort))
	for sni, want := range map[string]string{"pt.example": "member.pt.example", "term.example": "term.example"} {
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", edge, &tls.Config{ServerName: sni, InsecureSkipVerify: true})
		if err != nil {
			t.Errorf("SNI %s: %v", sni, err)
			continue
		}
		if cn := conn.ConnectionState().PeerCertificates[0].Subject.CommonName; cn != want {
			t.Errorf("SNI %s: certificate %q, want %q", sni, cn, want)
		}
		conn.Close()
	}
}
