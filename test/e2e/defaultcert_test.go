package e2e

import (
	"crypto/tls"
	"crypto/x509"
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

// defaultCertManifests: Ingress shop/plain has no spec.tls and forces the
// HTTPS redirect; shop/own has a certificate of its own for own.example.
// DEFAULTCERT is the operator's default certificate, in pier-system.
func defaultCertManifests(defCert, defKey, ownCert, ownKey string) string {
	ing := func(name, host, tls string, ann map[string]string) string {
		s := "---\napiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: " + name + "\n  namespace: shop\n"
		if len(ann) > 0 {
			s += "  annotations:\n"
			for k, v := range ann {
				s += "    " + k + ": \"" + v + "\"\n"
			}
		}
		s += "spec:\n  ingressClassName: pier\n"
		if tls != "" {
			s += "  tls: [{hosts: [" + host + "], secretName: " + tls + "}]\n"
		}
		return s + "  rules:\n    - host: " + host + "\n      http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: echo, port: {number: 80}}}}]}\n"
	}
	secret := func(ns, name, cert, key string) string {
		return "---\napiVersion: v1\nkind: Secret\nmetadata: {name: " + name + ", namespace: " + ns + "}\ntype: kubernetes.io/tls\nstringData:\n  tls.crt: " +
			indent(cert) + "\n  tls.key: " + indent(key) + "\n"
	}
	return pierClass + ing("plain", "plain.example", "", map[string]string{"nginx.ingress.kubernetes.io/force-ssl-redirect": "true"}) +
		ing("own", "own.example", "own-tls", nil) + secret("pier-system", "default-cert", defCert, defKey) +
		secret("shop", "own-tls", ownCert, ownKey) + shopEcho
}

// TestDefaultCertificate: with --default-certificate, an Ingress without
// spec.tls that forces the HTTPS redirect sends clients to HTTPS that
// answers, with the default certificate, and an Ingress with its own
// certificate still gets its own for its host (the default for any other
// name). Without it, the forcing Ingress is warned that nothing of pier's
// serves the https:// it redirects to, and a request that a trusted proxy
// says came over HTTPS is not redirected again.
func TestDefaultCertificate(t *testing.T) {
	defCert, defKey := (*e2eCA)(nil).issue(t, "default.pier.example", x509.ExtKeyUsageServerAuth)
	ownCert, ownKey := (*e2eCA)(nil).issue(t, "own.example", x509.ExtKeyUsageServerAuth)
	manifests, state := harness.ShortTempDir(t), harness.ShortTempDir(t)
	port := harness.StartEcho(t, "echo", "echo-pod")
	harness.WriteFile(t, filepath.Join(manifests, "shop.yaml"),
		strings.ReplaceAll(defaultCertManifests(defCert, defKey, ownCert, ownKey), "ECHOPORT", strconv.Itoa(port)))

	t.Run("with", func(t *testing.T) {
		p := harness.StartPier(t, harness.Options{Manifests: manifests, State: state,
			ExtraArgs: []string{"--default-certificate", "pier-system/default-cert"}})
		vip := p.Addresses("shop", "plain")[0]
		client := &http.Client{Timeout: 5 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		req, _ := http.NewRequest("GET", "http://"+net.JoinHostPort(vip, strconv.Itoa(p.HTTPPort))+"/a?b=1", nil)
		req.Host = "plain.example"
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 308 || resp.Header.Get("Location") != "https://plain.example/a?b=1" {
			t.Fatalf("http: %d to %q, want 308 to https://plain.example/a?b=1", resp.StatusCode, resp.Header.Get("Location"))
		}
		// The redirect's target answers: HTTPS on the load balancer, with
		// the default certificate.
		if cn, code := tlsGet(t, vip, p.HTTPSPort, "plain.example"); cn != "default.pier.example" || code != 200 {
			t.Errorf("https plain.example: certificate %q, status %d; want the default certificate and 200", cn, code)
		}
		own := p.Addresses("shop", "own")[0]
		if cn, code := tlsGet(t, own, p.HTTPSPort, "own.example"); cn != "own.example" || code != 200 {
			t.Errorf("https own.example: certificate %q, status %d; want its own and 200", cn, code)
		}
		if cn, _ := tlsGet(t, own, p.HTTPSPort, "other.example"); cn != "default.pier.example" {
			t.Errorf("https other.example on own's load balancer: certificate %q, want the default", cn)
		}
		if ing, err := p.Ingress("shop", "plain"); err != nil || strings.Contains(problemReasons(ing.Problems), "HTTPSNotServed") {
			t.Errorf("plain warned with a default certificate: %v %v", problemReasons(ing.Problems), err)
		}
		p.Stop()
	})

	t.Run("without", func(t *testing.T) {
		p := harness.StartPier(t, harness.Options{Manifests: manifests, State: state,
			ExtraArgs: []string{"--trusted-proxies", "127.0.0.0/8"}})
		vip := p.Addresses("shop", "plain")[0]
		var reasons string
		harness.WaitFor(t, 10*time.Second, "plain warned", func() bool {
			ing, err := p.Ingress("shop", "plain")
			if err == nil {
				reasons = problemReasons(ing.Problems)
			}
			return strings.Contains(reasons, "HTTPSNotServed")
		})
		if _, err := net.DialTimeout("tcp", net.JoinHostPort(vip, strconv.Itoa(p.HTTPSPort)), time.Second); err == nil {
			t.Error("plain's load balancer listens for HTTPS without a certificate")
		}
		client := &http.Client{Timeout: 5 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		for proto, want := range map[string]int{"": 308, "http": 308, "https": 200} {
			req, _ := http.NewRequest("GET", "http://"+net.JoinHostPort(vip, strconv.Itoa(p.HTTPPort))+"/", nil)
			req.Host = "plain.example"
			if proto != "" {
				req.Header.Set("X-Forwarded-Proto", proto)
			}
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != want {
				t.Errorf("X-Forwarded-Proto %q from a trusted proxy: %d, want %d", proto, resp.StatusCode, want)
			}
		}
	})
}

// tlsGet sends GET / with SNI and Host name to addr:port over TLS and
// returns the served certificate's common name and the status.
func tlsGet(t *testing.T, addr string, port int, name string) (string, int) {
	t.Helper()
	var cn string
	tr := &http.Transport{TLSClientConfig: &tls.Config{ServerName: name, InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			cn = cs.PeerCertificates[0].Subject.CommonName
			return nil
		}}}
	defer tr.CloseIdleConnections()
	req, _ := http.NewRequest("GET", "https://"+net.JoinHostPort(addr, strconv.Itoa(port))+"/", nil)
	req.Host = name
	resp, err := (&http.Client{Transport: tr, Timeout: 5 * time.Second}).Do(req)
	if err != nil {
		return cn, 0
	}
	resp.Body.Close()
	return cn, resp.StatusCode
}

// problemReasons joins the reasons of an Ingress's problems.
func problemReasons(ps []model.Problem) string {
	var out []string
	for _, p := range ps {
		out = append(out, p.Reason)
	}
	return strings.Join(out, ",")
}
