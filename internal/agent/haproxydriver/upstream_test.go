package haproxydriver

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/tlscert"
	"pier.dev/pier/test/harness"
)

// upstreamSecret serves one proxy-ssl-secret's data.
type upstreamSecret struct{ data map[string][]byte }

func (s *upstreamSecret) TLSPair(string, string) ([]byte, []byte, error) {
	return nil, nil, os.ErrNotExist
}
func (s *upstreamSecret) Data(string, string) (map[string][]byte, error) { return s.data, nil }

func selfSignedPEM(t *testing.T, host string) (certPEM, keyPEM []byte) {
	t.Helper()
	c, k, err := tlscert.SelfSigned([]string{host}, time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	return c, k
}

// The CA and client certificate of proxy-ssl-secret are staged beside
// the fragment, re-encoded and named by digest, and checked with it by
// `haproxy -c`; a Secret that changed since translation is not served;
// once no pool names them, they go.
func TestUpstreamFilesStaged(t *testing.T) {
	needHAProxy(t)
	state := harness.ShortTempDir(t)
	ca, _ := selfSignedPEM(t, "ca.example")
	crt, key := selfSignedPEM(t, "client.example")
	// CRLF and a comment-free but re-wrapped PEM: what is written is
	// the re-encoding, not these bytes.
	secret := &upstreamSecret{data: map[string][]byte{"ca.crt": []byte(strings.ReplaceAll(string(ca), "\n", "\r\n")),
		"tls.crt": crt, "tls.key": key}}
	d := newDriver(t, state)
	d.cfg.Secrets = secret
	t.Cleanup(func() { d.Close(true) })

	bundle, err := tlscert.ParseCA(ca)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tlscert.Parse(crt, key)
	if err != nil {
		t.Fatal(err)
	}
	lb := lbWith(1, freePort(t), memberAt(echo(t, "127.0.0.1:0", "one")))
	lb.Pools[0].Protocol = model.BackendHTTPS
	lb.Pools[0].UpstreamTLS = &model.UpstreamTLS{Verify: true, SNI: true, Name: "web.ns.svc", Namespace: "ns", Secret: "up",
		CASHA256: bundle.SHA256, ClientSHA256: pair.SHA256}
	if _, err := d.Apply(t.Context(), lb); err != nil {
		t.Fatal(err)
	}
	at, _ := d.layout.LB(lb.UUID)
	caPath, _ := at.UpstreamCA(bundle.SHA256)
	clientPath, _ := at.UpstreamClient(pair.SHA256)
	if b, err := os.ReadFile(caPath); err != nil || string(b) != string(bundle.PEM) {
		t.Errorf("ca file: %v, %q", err, b)
	}
	if b, err := os.ReadFile(clientPath); err != nil || string(b) != string(pair.Combined()) {
		t.Errorf("client file: %v", err)
	}
	frag, _ := os.ReadFile(at.Config())
	if !strings.Contains(string(frag), "ca-file "+caPath) || !strings.Contains(string(frag), "crt "+clientPath) {
		t.Errorf("fragment does not name the staged files:\n%s", frag)
	}

	// The Secret changed after translation: not served.
	secret.data["ca.crt"], _ = selfSignedPEM(t, "ca2.example")
	if _, err := d.Apply(t.Context(), lb.Clone()); err == nil || !strings.Contains(err.Error(), "changed since it was translated") {
		t.Errorf("apply with a changed Secret: %v", err)
	}
	next := lb.Clone()
	next.Pools[0].UpstreamTLS = nil
	if _, err := d.Apply(t.Context(), next); err != nil {
		t.Fatal(err)
	}
	left, _ := filepath.Glob(filepath.Join(at.CertsDir(), "*.pem"))
	if len(left) != 0 {
		t.Errorf("files outlived the configuration that read them: %v", left)
	}
}

// A BackendTLSPolicy's CA bundle comes in the model (CAPEM), no Secret
// read: written only while it hashes to CASHA256, named by its digest.
func TestUpstreamCAFromModel(t *testing.T) {
	needHAProxy(t)
	state := harness.ShortTempDir(t)
	d := newDriver(t, state)
	d.cfg.Secrets = &upstreamSecret{} // holds no ca.crt: the bundle must come from the model
	t.Cleanup(func() { d.Close(true) })
	ca, _ := selfSignedPEM(t, "ca.example")
	bundle, err := tlscert.ParseCA(ca)
	if err != nil {
		t.Fatal(err)
	}
	lb := lbWith(1, freePort(t), memberAt(echo(t, "127.0.0.1:0", "one")))
	lb.Pools[0].Protocol = model.BackendHTTPS
	lb.Pools[0].UpstreamTLS = &model.UpstreamTLS{Verify: true, SNI: true, Name: "abc.example.com", Namespace: "ns",
		CASHA256: bundle.SHA256, CAPEM: string(bundle.PEM)}
	if _, err := d.Apply(t.Context(), lb); err != nil {
		t.Fatal(err)
	}
	at, _ := d.layout.LB(lb.UUID)
	caPath, _ := at.UpstreamCA(bundle.SHA256)
	if b, err := os.ReadFile(caPath); err != nil || string(b) != string(bundle.PEM) {
		t.Errorf("ca file: %v, %q", err, b)
	}
	bad := lb.Clone()
	other, _ := selfSignedPEM(t, "ca2.example")
	bad.Pools[0].UpstreamTLS.CAPEM = string(other)
	if _, err := d.Apply(t.Context(), bad); err == nil || !strings.Contains(err.Error(), "changed since it was translated") {
		t.Errorf("apply with a bundle that does not hash to its digest: %v", err)
	}
}
