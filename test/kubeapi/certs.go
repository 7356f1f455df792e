package kubeapi

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	clientcmdv1 "k8s.io/client-go/tools/clientcmd/api/v1"
	"sigs.k8s.io/yaml"
)

// pki is the key material of one test cluster, generated fresh for every
// Server: nothing is shared between runs and nothing needs a checked-in key.
type pki struct {
	caCert, caKey             []byte // PEM; signs serving and client certs
	servingCert, servingKey   []byte
	adminCert, adminKey       []byte // CN admin, O system:masters
	serviceAccountKey         []byte // PEM EC private key; the public half is derived by the apiserver
	caFile, servingCertFile   string
	servingKeyFile, saKeyFile string
}

// newPKI writes every file the apiserver reads into dir. ECDSA P-256
// throughout: generating RSA keys would cost seconds on a busy machine.
func newPKI(dir string) (*pki, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate CA key: %w", err)
	}
	caTmpl := template("pier-test-ca", nil)
	caTmpl.IsCA, caTmpl.BasicConstraintsValid = true, true
	caTmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("create CA cert: %w", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, fmt.Errorf("parse CA cert: %w", err)
	}
	p := &pki{caCert: pemBlock("CERTIFICATE", caDER)}
	if p.caKey, err = ecKeyPEM(caKey); err != nil {
		return nil, err
	}

	serving := template("kube-apiserver", nil)
	serving.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	// 10.97.0.1 is test/cluster's relay, on its lab's host link: pods
	// there connect with in-cluster config, which checks the certificate
	// against the address it dials and cannot keep 127.0.0.1 as the name.
	serving.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv4(10, 96, 0, 1), net.IPv4(10, 97, 0, 1)}
	serving.DNSNames = []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"}
	if p.servingCert, p.servingKey, err = issue(serving, ca, caKey); err != nil {
		return nil, fmt.Errorf("serving cert: %w", err)
	}
	admin := template("admin", []string{"system:masters"})
	admin.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	if p.adminCert, p.adminKey, err = issue(admin, ca, caKey); err != nil {
		return nil, fmt.Errorf("admin cert: %w", err)
	}
	saKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate service account key: %w", err)
	}
	if p.serviceAccountKey, err = ecKeyPEM(saKey); err != nil {
		return nil, err
	}
	return p, p.write(dir)
}

func (p *pki) write(dir string) error {
	p.caFile = filepath.Join(dir, "ca.crt")
	p.servingCertFile = filepath.Join(dir, "apiserver.crt")
	p.servingKeyFile = filepath.Join(dir, "apiserver.key")
	p.saKeyFile = filepath.Join(dir, "service-account.key")
	for name, data := range map[string][]byte{
		p.caFile: p.caCert, p.servingCertFile: p.servingCert,
		p.servingKeyFile: p.servingKey, p.saKeyFile: p.serviceAccountKey,
	} {
		if err := os.WriteFile(name, data, 0o600); err != nil {
			return fmt.Errorf("write %s: %w", name, err)
		}
	}
	return nil
}

func template(cn string, orgs []string) *x509.Certificate {
	serial, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	return &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: cn, Organization: orgs},
		// Backdated: the apiserver and the test share a clock, but a few
		// seconds of skew must not make a fresh cert "not yet valid".
		NotBefore: time.Now().Add(-time.Hour),
		NotAfter:  time.Now().Add(24 * time.Hour),
		KeyUsage:  x509.KeyUsageDigitalSignature,
	}
}

func issue(tmpl, ca *x509.Certificate, caKey *ecdsa.PrivateKey) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generate key: %w", err)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, nil, fmt.Errorf("create cert: %w", err)
	}
	keyPEM, err = ecKeyPEM(key)
	return pemBlock("CERTIFICATE", der), keyPEM, err
}

func ecKeyPEM(key *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("marshal EC key: %w", err)
	}
	return pemBlock("EC PRIVATE KEY", der), nil
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

// writeKubeconfig writes an admin kubeconfig with the key material inline,
// so the file alone is enough for kubectl and kube-controller-manager.
func writeKubeconfig(path, host string, p *pki) error {
	cfg := clientcmdv1.Config{
		APIVersion: "v1",
		Kind:       "Config",
		Clusters: []clientcmdv1.NamedCluster{{Name: "pier-test", Cluster: clientcmdv1.Cluster{
			Server: host, CertificateAuthorityData: p.caCert,
		}}},
		AuthInfos: []clientcmdv1.NamedAuthInfo{{Name: "admin", AuthInfo: clientcmdv1.AuthInfo{
			ClientCertificateData: p.adminCert, ClientKeyData: p.adminKey,
		}}},
		Contexts: []clientcmdv1.NamedContext{{Name: "pier-test", Context: clientcmdv1.Context{
			Cluster: "pier-test", AuthInfo: "admin",
		}}},
		CurrentContext: "pier-test",
	}
	data, err := yaml.Marshal(cfg)
	if err != nil {
		return fmt.Errorf("encode kubeconfig: %w", err)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return fmt.Errorf("write kubeconfig: %w", err)
	}
	return nil
}
