package haproxydriver

import (
	"bytes"
	"crypto/tls"
	"encoding/pem"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"pier.dev/pier/internal/agent/driver"
	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/tlscert"
	"pier.dev/pier/test/harness"
)

// oneSecret serves the TLS pair the test holds now.
type oneSecret struct{ cert, key []byte }

func (s *oneSecret) TLSPair(string, string) ([]byte, []byte, error) { return s.cert, s.key, nil }
func (s *oneSecret) Data(string, string) (map[string][]byte, error) { return nil, os.ErrNotExist }

func (s *oneSecret) rotate(t *testing.T) model.Certificate {
	t.Helper()
	var err error
	if s.cert, s.key, err = tlscert.SelfSigned([]string{"tls.example"}, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	pair, err := tlscert.Parse(s.cert, s.key)
	if err != nil {
		t.Fatal(err)
	}
	return model.Certificate{ID: model.ID("cert", "ns", "tls"), Namespace: "ns", Secret: "tls",
		Hosts: []string{"tls.example"}, SHA256: pair.SHA256}
}

// TestRefusedConfigLeavesLastGoodFiles: when `haproxy -c` refuses a new
// configuration, every file the last good one reads (crt-list,
// certificates) is still there, unchanged, so a restart of HAProxy starts;
// once a new configuration loads, the old files go.
func TestRefusedConfigLeavesLastGoodFiles(t *testing.T) {
	needHAProxy(t)
	real, _ := exec.LookPath("haproxy")
	state := harness.ShortTempDir(t)
	refuse := filepath.Join(state, "refuse")
	// A wrapper whose check fails while the marker exists: HAProxy
	// refusing a certificate that Go let through, whatever the reason.
	wrapper := filepath.Join(state, "haproxy-wrapper")
	script := "#!/bin/sh\nfor a in \"$@\"; do [ \"$a\" = -c ] && [ -e " + refuse + " ] && exit 1; done\nexec " + real + " \"$@\"\n"
	if err := os.WriteFile(wrapper, []byte(script), 0o700); err != nil {
		t.Fatal(err)
	}
	secret := &oneSecret{}
	d := newDriver(t, state)
	d.cfg.Binary, d.cfg.Secrets = wrapper, secret
	t.Cleanup(func() { d.Close(true) })

	lb := lbWith(1, freePort(t), memberAt(echo(t, "127.0.0.1:0", "one")))
	lb.Listeners = append(lb.Listeners, model.Listener{Name: "https", Protocol: model.ProtocolTerminatedHTTPS,
		Port: freePort(t), DefaultPoolID: "p1", Certificates: []model.Certificate{secret.rotate(t)}})
	if _, err := d.Apply(t.Context(), lb); err != nil {
		t.Fatal(err)
	}
	at, _ := d.layout.LB(lb.UUID)
	good := snapshotFiles(t, at.Dir)
	blk, _ := pem.Decode(secret.cert)
	firstLeaf := blk.Bytes

	if err := os.WriteFile(refuse, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	next := lb.Clone()
	next.Listeners[1].Certificates = []model.Certificate{secret.rotate(t)}
	if _, err := d.Apply(t.Context(), next); !errors.Is(err, driver.ErrRejected) {
		t.Fatalf("Apply with a refused config: %v, want ErrRejected", err)
	}
	for path, content := range good {
		if b, err := os.ReadFile(path); err != nil || string(b) != content {
			t.Errorf("%s, read by the last good configuration, changed or vanished (%v)", path, err)
		}
	}
	// What a restart loads: the active set must pass the real check...
	if out, err := exec.Command(real, "-c", "-f", filepath.Join(at.Dir, "conf")).CombinedOutput(); err != nil {
		t.Fatalf("the last good configuration no longer loads: %v\n%s", err, out)
	}
	// ...and a crash brings HAProxy back with the first certificate.
	inst := d.lbs[lb.UUID]
	if err := syscall.Kill(inst.sh.proc.PID(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		got, err := servedLeaf(lb.Listeners[1].Port)
		if err == nil && inst.sh.proc.Stats().Restarts > 0 {
			if !bytes.Equal(got, firstLeaf) {
				t.Fatal("after the restart HAProxy serves another certificate than the last good one")
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("HAProxy did not come back after a crash (restarts %d): %v", inst.sh.proc.Stats().Restarts, err)
		}
		time.Sleep(100 * time.Millisecond)
	}

	if err := os.Remove(refuse); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Apply(t.Context(), next); err != nil {
		t.Fatal(err)
	}
	for path := range good {
		if _, err := os.Stat(path); err == nil {
			t.Errorf("%s outlived the configuration that read it", path)
		}
	}
}

// servedLeaf is the certificate HAProxy presents on 127.0.0.1:port.
func servedLeaf(port int) ([]byte, error) {
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: time.Second}, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
		&tls.Config{ServerName: "tls.example", InsecureSkipVerify: true})
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].Raw, nil
}

// snapshotFiles reads the crt-lists and certificates below dir.
func snapshotFiles(t *testing.T, dir string) map[string]string {
	t.Helper()
	lists, _ := filepath.Glob(filepath.Join(dir, "crt-list-*"))
	certs, _ := filepath.Glob(filepath.Join(dir, "certs", "*.pem"))
	out := map[string]string{}
	for _, p := range append(lists, certs...) {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		out[p] = string(b)
	}
	if len(lists) != 1 || len(certs) != 1 {
		t.Fatalf("want one crt-list and one certificate, found %v", out)
	}
	return out
}
