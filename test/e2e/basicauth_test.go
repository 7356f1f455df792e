package e2e

import (
	"encoding/base64"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"pier.dev/pier/test/harness"
)

// Users: alice/s3cret (bcrypt "$2y$", as htpasswd -B writes it), bob/hunter2
// (SHA-512 crypt); after the rotation alice/n3w.
const (
	aliceS3cret = "$2y$05$Zxl3U8oRi2N5aiTDsrx3S.kammLW6sEDyIg2Z1D6V1WYVoKl/lF2C"
	aliceN3w    = "$6$MACGAwT2uPicSXwH$O1EpMyarBr4Ab0oYgmcG6.VxszB93r9tQqC5.IeP1wtx0kK0Y3X.aZDZtVxMQz.5/Jip5vMbNFw8Tk8R/LaZZ0"
	bobHunter2  = "$6$Ea1yNgy2jUg9amIr$h.OMJyaKB7QcQCFGkA52leL2i2SrycZ0WwA8tptjw7w5OOY81RkZMwE69n.wQh2Cs5nzhSPoquUgfXsgcnQN1/"
)

// authManifests: an Ingress with auth-type basic and one without on the
// same host and load balancer, the users in an Opaque Secret in the
// ingress-nginx form (key "auth", htpasswd lines); an Ingress whose
// Secret holds an Apache $apr1$ hash, what htpasswd -c writes (the
// kube-prometheus guides' way: prom/prom-pw, from openssl passwd -apr1),
// and one whose Secret holds an unsalted {SHA} (htpasswd -s: refused).
const authManifests = pierClass + `
apiVersion: v1
kind: Secret
metadata: {name: basic-auth, namespace: shop}
type: Opaque
stringData:
  auth: |
    alice:ALICE
    bob:BOB
---
apiVersion: v1
kind: Secret
metadata: {name: apache-auth, namespace: shop}
stringData:
  auth: "prom:$apr1$Zq3.x/Ab$M68YK0YO.mONLY/uwDkP60"
---
apiVersion: v1
kind: Secret
metadata: {name: sha-auth, namespace: shop}
stringData:
  auth: "alice:{SHA}W6ph5Mm5Pz8GgiULbPgzG37mj9g="
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: admin
  namespace: shop
  annotations:
    pier.dev/load-balancer: shop
    nginx.ingress.kubernetes.io/auth-type: basic
    nginx.ingress.kubernetes.io/auth-secret: basic-auth
    nginx.ingress.kubernetes.io/auth-realm: "Authentication Required - admin"
spec:
  ingressClassName: pier
  rules:
    - host: shop.example
      http: {paths: [{path: /admin, pathType: Prefix, backend: {service: {name: echo, port: {number: 80}}}}]}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: shop
  namespace: shop
  annotations:
    pier.dev/load-balancer: shop
spec:
  ingressClassName: pier
  rules:
    - host: shop.example
      http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: echo, port: {number: 80}}}}]}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: apache
  namespace: shop
  annotations:
    nginx.ingress.kubernetes.io/auth-type: basic
    nginx.ingress.kubernetes.io/auth-secret: apache-auth
spec:
  ingressClassName: pier
  rules:
    - host: apache.example
      http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: echo, port: {number: 80}}}}]}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: sha
  namespace: shop
  annotations:
    nginx.ingress.kubernetes.io/auth-type: basic
    nginx.ingress.kubernetes.io/auth-secret: sha-auth
spec:
  ingressClassName: pier
  rules:
    - host: sha.example
      http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: echo, port: {number: 80}}}}]}
` + shopEcho

// TestBasicAuthFromSecret runs `pier run` on an ingress-nginx basic-auth
// Ingress and its Secret file: 401 with the realm without credentials or
// with a wrong password, 200 with each user, the other Ingress of the
// host unaffected; a Secret holding $apr1$ lets its user in with its
// password only; one holding {SHA} refuses its Ingress with the reason;
// rotating the Secret's file changes who gets in.
func TestBasicAuthFromSecret(t *testing.T) {
	manifests, state := harness.ShortTempDir(t), harness.ShortTempDir(t)
	port := harness.StartEcho(t, "echo", "echo-pod")
	write := func(alice string) {
		s := strings.ReplaceAll(authManifests, "ECHOPORT", strconv.Itoa(port))
		s = strings.Replace(strings.Replace(s, "ALICE", alice, 1), "BOB", bobHunter2, 1)
		harness.WriteFile(t, filepath.Join(manifests, "shop.yaml"), s)
	}
	write(aliceS3cret)
	p := harness.StartPier(t, harness.Options{Manifests: manifests, State: state})
	vip := p.Addresses("shop", "admin")[0]
	addr := net.JoinHostPort(vip, strconv.Itoa(p.HTTPPort))
	request := func(path, user, pass string) string {
		auth := ""
		if user != "" {
			auth = "Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pass)) + "\r\n"
		}
		return "GET " + path + " HTTP/1.1\r\nHost: shop.example\r\nConnection: close\r\n" + auth + "\r\n"
	}
	const realm = `Basic realm="Authentication Required - admin"`
	for _, tc := range []struct {
		what, path, user, pass string
		status                 int
		challenge              string
	}{
		{"no credentials", "/admin", "", "", 401, realm},
		{"wrong password", "/admin/x", "alice", "wrong", 401, realm},
		{"alice (bcrypt $2y$)", "/admin", "alice", "s3cret", 200, ""},
		{"bob (SHA-512)", "/admin/x", "bob", "hunter2", 200, ""},
		{"other Ingress, same host", "/", "", "", 200, ""},
	} {
		resp := send(t, addr, "127.0.0.1", request(tc.path, tc.user, tc.pass))
		if resp.StatusCode != tc.status || resp.Header.Get("WWW-Authenticate") != tc.challenge {
			t.Errorf("%s: %d WWW-Authenticate %q, want %d %q", tc.what, resp.StatusCode,
				resp.Header.Get("WWW-Authenticate"), tc.status, tc.challenge)
		}
	}
	apacheAddr := net.JoinHostPort(p.Addresses("shop", "apache")[0], strconv.Itoa(p.HTTPPort))
	apacheReq := func(user, pass string) string {
		return strings.Replace(request("/", user, pass), "Host: shop.example", "Host: apache.example", 1)
	}
	for _, tc := range []struct {
		what, user, pass string
		status           int
	}{{"$apr1$, no credentials", "", "", 401}, {"$apr1$, wrong password", "prom", "prom", 401}, {"$apr1$", "prom", "prom-pw", 200}} {
		if resp := send(t, apacheAddr, "127.0.0.1", apacheReq(tc.user, tc.pass)); resp.StatusCode != tc.status {
			t.Errorf("%s: %d, want %d", tc.what, resp.StatusCode, tc.status)
		}
	}
	sha, err := p.Ingress("shop", "sha")
	if err != nil || len(sha.Problems) == 0 || sha.Problems[0].Reason != "InvalidAnnotation" ||
		!strings.Contains(sha.Problems[0].Message, "htpasswd -B") || len(sha.Status.LoadBalancer.Ingress) != 0 {
		t.Errorf("sha: want an InvalidAnnotation refusal naming htpasswd -B and no address, got %+v %v", sha, err)
	}

	write(aliceN3w)
	harness.WaitFor(t, 20*time.Second, "the rotated password serves", func() bool {
		return send(t, addr, "127.0.0.1", request("/admin", "alice", "n3w")).StatusCode == 200
	})
	if resp := send(t, addr, "127.0.0.1", request("/admin", "alice", "s3cret")); resp.StatusCode != 401 {
		t.Errorf("old password after rotation: %d", resp.StatusCode)
	}
	if resp := send(t, addr, "127.0.0.1", request("/admin", "bob", "hunter2")); resp.StatusCode != 200 {
		t.Errorf("bob after rotation: %d", resp.StatusCode)
	}
}
