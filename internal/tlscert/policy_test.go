package tlscert

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// policyCases are made with the openssl CLI, as an administrator would.
// Each ends with the files: key, then the certificate chain, leaf first.
var policyCases = []struct {
	name   string
	script string
	refuse string // "" accepted; else a word of Parse's error
}{
	{"rsa1024", `openssl req -x509 -newkey rsa:1024 -keyout k -out c -days 30 -nodes -subj /CN=x.example`, "RSA key of 1024 bits"},
	{"rsa2048", `openssl req -x509 -newkey rsa:2048 -keyout k -out c -days 30 -nodes -subj /CN=x.example`, ""},
	{"rsa2048-self-sha1", `openssl req -x509 -newkey rsa:2048 -sha1 -keyout k -out c -days 30 -nodes -subj /CN=x.example`, ""},
	{"p224", `openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-224 -out k && openssl req -x509 -key k -out c -days 30 -subj /CN=x.example`, ""},
	{"ed25519", `openssl genpkey -algorithm ed25519 -out k && openssl req -x509 -key k -out c -days 30 -subj /CN=x.example`, ""},
	{"ca-sha1", caSigned("rsa:2048", "-sha1"), "SHA1-RSA"},
	{"ca-sha256", caSigned("rsa:2048", "-sha256"), ""},
	{"ca-rsa1024", caSigned("rsa:1024", "-sha256"), "chain certificate 2: RSA key of 1024 bits"},
}

func caSigned(caKey, digest string) string {
	return `openssl req -x509 -newkey ` + caKey + ` -keyout ca.k -out ca.c -days 30 -nodes -subj /CN=ca &&
openssl req -newkey rsa:2048 -keyout k -out r -nodes -subj /CN=x.example &&
openssl x509 -req -in r -CA ca.c -CAkey ca.k -CAcreateserial -out leaf.c -days 30 ` + digest + ` &&
cat leaf.c ca.c > c`
}

// TestPolicyMatchesHAProxy checks, against the HAProxy and OpenSSL of this
// machine, that Parse refuses exactly the certificates `haproxy -c`
// refuses, so a refused entry is dropped in Go and never fails a config.
func TestPolicyMatchesHAProxy(t *testing.T) {
	for _, bin := range []string{"openssl", "haproxy"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("%s not installed", bin)
		}
	}
	for _, tc := range policyCases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			sh := exec.Command("sh", "-ec", tc.script)
			sh.Dir = dir
			if out, err := sh.CombinedOutput(); err != nil {
				t.Fatalf("openssl: %v\n%s", err, out)
			}
			certPEM, _ := os.ReadFile(filepath.Join(dir, "c"))
			keyPEM, _ := os.ReadFile(filepath.Join(dir, "k"))
			_, parseErr := Parse(certPEM, keyPEM)
			haproxyErr := haproxyCheck(t, dir, append(append([]byte(nil), certPEM...), keyPEM...))
			switch {
			case tc.refuse == "" && parseErr != nil:
				t.Errorf("Parse refused a certificate HAProxy takes: %v", parseErr)
			case tc.refuse != "" && (parseErr == nil || !strings.Contains(parseErr.Error(), tc.refuse)):
				t.Errorf("Parse error = %v, want one containing %q", parseErr, tc.refuse)
			}
			if (parseErr == nil) != (haproxyErr == nil) {
				t.Errorf("Go and HAProxy disagree: Parse %v, haproxy -c %v", parseErr, haproxyErr)
			}
		})
	}
}

func haproxyCheck(t *testing.T, dir string, pemFile []byte) error {
	t.Helper()
	pemPath := filepath.Join(dir, "combined.pem")
	if err := os.WriteFile(pemPath, pemFile, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := "defaults\n  mode http\n  timeout client 1s\n  timeout server 1s\n  timeout connect 1s\n" +
		"frontend f\n  bind 127.0.0.1:1 ssl crt " + pemPath + "\n"
	cfgPath := filepath.Join(dir, "h.cfg")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("haproxy", "-c", "-f", cfgPath).CombinedOutput()
	if err != nil {
		return &checkError{out: bytes.TrimSpace(out)}
	}
	return nil
}

type checkError struct{ out []byte }

func (e *checkError) Error() string { return string(e.out) }
