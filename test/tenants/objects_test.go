package tenants

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"pier.dev/pier/internal/fixture"
	"pier.dev/pier/internal/model"
	"pier.dev/pier/test/harness"
)

var pathPrefix = networkingv1.PathTypePrefix

var client = &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}

// ingress is an Ingress of class pier with one host, path "/" to the
// namespace's "app" Service, created at minute age of 2024.
func ingress(ns, name, host string, age int, annotations map[string]string) *networkingv1.Ingress {
	ing := fixture.Ingress(ns, name, "pier", fixture.Rule(host, fixture.Path("/", networkingv1.PathTypePrefix, "app", 80)))
	ing.TypeMeta = metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "Ingress"}
	ing.Annotations = annotations
	ing.CreationTimestamp = metav1.NewTime(time.Date(2024, 1, 1, 0, age, 0, 0, time.UTC))
	return ing
}

func withUID(ing *networkingv1.Ingress, uid string) *networkingv1.Ingress {
	ing.UID = types.UID(uid)
	return ing
}

func withTLS(ing *networkingv1.Ingress, tls ...networkingv1.IngressTLS) *networkingv1.Ingress {
	ing.Spec.TLS = tls
	return ing
}

// service is the namespace's "app" Service with one ready endpoint,
// 127.0.0.1:target.
func service(ns string, target int) []runtime.Object {
	port, ready := int32(target), true
	return []runtime.Object{
		&corev1.Service{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app"},
			Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(port)}}},
		},
		&discoveryv1.EndpointSlice{
			TypeMeta: metav1.TypeMeta{APIVersion: "discovery.k8s.io/v1", Kind: "EndpointSlice"},
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app-a",
				Labels: map[string]string{discoveryv1.LabelServiceName: "app"}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports:       []discoveryv1.EndpointPort{{Port: &port}},
			Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"127.0.0.1"},
				Conditions: discoveryv1.EndpointConditions{Ready: &ready}}},
		},
	}
}

func ingressClass() *networkingv1.IngressClass {
	return &networkingv1.IngressClass{
		TypeMeta: metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "IngressClass"},
		ObjectMeta: metav1.ObjectMeta{Name: "pier",
			Annotations: map[string]string{"ingressclass.kubernetes.io/is-default-class": "true"}},
		Spec: networkingv1.IngressClassSpec{Controller: "pier.dev/ingress-controller"},
	}
}

func tlsSecret(ns, name string, p pemPair) *corev1.Secret {
	return &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{corev1.TLSCertKey: p.cert, corev1.TLSPrivateKeyKey: p.key},
	}
}

// write writes objects as one v1 List into dir/name.
func write(t *testing.T, dir, name string, objs ...runtime.Object) {
	t.Helper()
	b, err := json.MarshalIndent(map[string]any{"apiVersion": "v1", "kind": "List", "items": objs}, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	harness.WriteFile(t, filepath.Join(dir, name), string(b))
}

// pemPair is a certificate and its key as a Secret holds them.
type pemPair struct{ cert, key, der []byte }

// makeCert makes a self-signed certificate for sans with an ECDSA P-256
// key, or an RSA key of rsaBits bits when rsaBits > 0.
func makeCert(t *testing.T, rsaBits int, sans ...string) pemPair {
	t.Helper()
	var pub, priv any
	if rsaBits > 0 {
		k, err := rsa.GenerateKey(rand.Reader, rsaBits)
		if err != nil {
			t.Fatal(err)
		}
		pub, priv = &k.PublicKey, k
	} else {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		pub, priv = &k.PublicKey, k
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: sans[0]}, DNSNames: sans,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(30 * 24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, pub, priv)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	return pemPair{cert: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		key: pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), der: der}
}

// servedCert is the leaf certificate HAProxy presents on addr:port to a
// client sending sni (ECDSA and RSA both offered, as browsers do).
func servedCert(addr string, port int, sni string) ([]byte, error) {
	d := &net.Dialer{Timeout: 3 * time.Second}
	conn, err := tls.DialWithDialer(d, "tcp", net.JoinHostPort(addr, strconv.Itoa(port)),
		&tls.Config{ServerName: sni, InsecureSkipVerify: true})
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].Raw, nil
}

// checkCert fails unless addr:port presents want for sni.
func checkCert(t *testing.T, addr string, port int, sni string, want pemPair, whose string) {
	t.Helper()
	got, err := servedCert(addr, port, sni)
	if err != nil {
		t.Errorf("TLS to %s:%d for %q: %v", addr, port, sni, err)
		return
	}
	if !bytes.Equal(got, want.der) {
		c, _ := x509.ParseCertificate(got)
		t.Errorf("for SNI %q %s:%d presented %s (DNS %v), want %s's certificate", sni, addr, port, c.Subject, c.DNSNames, whose)
	}
}

// expectServed checks that host on addr is answered by service, n times.
func expectServed(t *testing.T, p *harness.Pier, addr, host, service string, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		code, reply, _, err := harness.Get(client, addr, p.HTTPPort, host, "/")
		if err != nil || code != 200 || reply.Service != service {
			t.Fatalf("GET %s on %s: status %d from %q (%v), want %s", host, addr, code, reply.Service, err, service)
		}
	}
}

// waitProblem waits until ns/name carries a problem with reason and
// returns it.
func waitProblem(t *testing.T, p *harness.Pier, ns, name, reason string) model.Problem {
	t.Helper()
	var found model.Problem
	harness.WaitFor(t, 15*time.Second, fmt.Sprintf("%s on %s/%s", reason, ns, name), func() bool {
		ing, err := p.Ingress(ns, name)
		if err != nil {
			return false
		}
		for _, pr := range ing.Problems {
			if pr.Reason == reason {
				found = pr
				return true
			}
		}
		return false
	})
	return found
}

func problemList(p *harness.Pier, ns, name string) string {
	ing, err := p.Ingress(ns, name)
	if err != nil {
		return err.Error()
	}
	var out []string
	for _, pr := range ing.Problems {
		out = append(out, pr.Reason+": "+pr.Message)
	}
	return strings.Join(out, "; ")
}

func sameAddresses(a, b []string) bool { return strings.Join(a, ",") == strings.Join(b, ",") }
