package render

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"pier.dev/pier/internal/encode"
	"pier.dev/pier/internal/goldenfile"
	"pier.dev/pier/internal/model"
)

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	goldenfile.Check(t, filepath.Join("testdata", name), got, "go test ./internal/haproxy/render")
}

func TestGolden(t *testing.T) {
	for _, f := range fixtures() {
		t.Run(f.name, func(t *testing.T) {
			r := mustRender(t, f.lb, nil)
			golden(t, f.name+".cfg", r.Fragment)
			again := mustRender(t, f.lb.Clone(), nil)
			if !bytes.Equal(r.Fragment, again.Fragment) || !bytes.Equal(r.CrtList, again.CrtList) {
				t.Fatal("two renders differ")
			}
			assertLinesTokenize(t, r.Fragment)
			if r.CrtList != nil {
				golden(t, f.name+".crt-list", r.CrtList)
			}
			for _, m := range r.Maps {
				golden(t, f.name+"."+filepath.Base(m.Path), m.Data)
			}
			if r.AuthLua != nil {
				golden(t, f.name+"."+filepath.Base(r.AuthLuaPath), r.AuthLua)
			}
		})
	}
	global, err := Global(fixtureOptions())
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "global.conf", global)
	assertLinesTokenize(t, global)
	proc, err := ProcessConf(procAt(fixtureDir), false)
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "process.conf", proc)
	assertLinesTokenize(t, proc)
}

// assertLinesTokenize reads the file as HAProxy would: every line is
// plain words, with no comment (except whole-line ones), expansion,
// escape or truncation, and at most 64 words.
func assertLinesTokenize(t *testing.T, cfg []byte) {
	t.Helper()
	env := func(string) (string, bool) { return "EXPANDED", true }
	for i, line := range strings.Split(strings.TrimSuffix(string(cfg), "\n"), "\n") {
		toks, err := encode.Tokenize(line, env)
		whole := strings.HasPrefix(line, "# ")
		if err != nil || toks.Env || toks.Escape || toks.Truncated || toks.Scope || toks.Comment != whole {
			t.Errorf("line %d %s: %+v %v", i+1, encode.Printable(line), toks, err)
		}
	}
}

// TestGoldenHAProxyCheck runs "haproxy -c -dW" (warnings are fatal) on
// every golden file, with the state folder pointed at a temporary one
// holding throwaway certificates generated here.
func TestGoldenHAProxyCheck(t *testing.T) {
	bin := haproxyBin(t)
	lbs := map[string]*model.LoadBalancer{}
	for _, f := range fixtures() {
		lbs[f.name] = f.lb
	}
	files, _ := filepath.Glob(filepath.Join("testdata", "*.cfg"))
	if len(files) != len(lbs) {
		t.Fatalf("%d golden files for %d fixtures", len(files), len(lbs))
	}
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".cfg")
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			if crt := strings.TrimSuffix(file, ".cfg") + ".crt-list"; fileExists(crt) {
				original, err := os.ReadFile(crt)
				if err != nil {
					t.Fatal(err)
				}
				writeFile(t, crtListAt(t, dir, original), readRelocated(t, crt, dir))
				writeCerts(t, dir, lbs[name])
			}
			writeUpstreamCerts(t, dir, lbs[name])
			writeClientCAs(t, dir, lbs[name])
			maps, _ := filepath.Glob(strings.TrimSuffix(file, ".cfg") + ".routes-*.map")
			lua, _ := filepath.Glob(strings.TrimSuffix(file, ".cfg") + ".auth-*.lua")
			maps = append(maps, lua...)
			for _, m := range maps {
				writeFile(t, filepath.Join(dir, strings.TrimPrefix(filepath.Base(m), name+".")), readRelocated(t, m, dir))
			}
			writeFile(t, lbAt(dir).Config(), readRelocated(t, file, dir))
			checkFiles(t, bin, dir, lbAt(dir).Config())
		})
	}
}

// checkFiles runs "haproxy -c -dW" (warnings are fatal) on the golden
// global.conf and process.conf relocated to dir, then fragments.
func checkFiles(t *testing.T, bin, dir string, fragments ...string) {
	t.Helper()
	global, proc := filepath.Join(dir, "global.conf"), procAt(dir).Conf()
	writeFile(t, global, readRelocated(t, filepath.Join("testdata", "global.conf"), dir))
	writeFile(t, proc, readRelocated(t, filepath.Join("testdata", "process.conf"), dir))
	args := []string{"-c", "-dW", "-f", global, "-f", proc}
	for _, f := range fragments {
		args = append(args, "-f", f)
	}
	if out, err := exec.Command(bin, args...).CombinedOutput(); err != nil {
		t.Fatalf("haproxy -c -dW: %v\n%s", err, out)
	}
}

func haproxyBin(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("haproxy")
	if err != nil {
		t.Skip("haproxy not installed")
	}
	return bin
}

func readRelocated(t *testing.T, file, dir string) []byte {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.ReplaceAll(b, []byte(fixtureDir), []byte(dir))
}

// writeMaps writes routing maps rendered for fixtureDir into dir, or
// where they were rendered for when dir is "".
func writeMaps(t *testing.T, maps []MapFile, dir string) {
	t.Helper()
	for _, m := range maps {
		path := m.Path
		if dir != "" {
			path = filepath.Join(dir, filepath.Base(m.Path))
		}
		writeFile(t, path, m.Data)
	}
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// crtListAt is where the agent would write the crt-list rendered as
// original (for the fixture folder) after moving it to dir: the name
// keeps the digest of the original, which the fragment names.
func crtListAt(t *testing.T, dir string, original []byte) string {
	t.Helper()
	sum := sha256.Sum256(original)
	p, err := lbAt(dir).CrtList(hex.EncodeToString(sum[:]))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// writeCerts writes a self-signed certificate and key for each
// certificate of lb, as the agent would.
func writeCerts(t *testing.T, dir string, lb *model.LoadBalancer) {
	t.Helper()
	for _, l := range lb.Listeners {
		for _, c := range l.AllCertificates() {
			p, err := lbAt(dir).Cert(c.ID, c.SHA256)
			if err != nil {
				t.Fatal(err)
			}
			writeFile(t, p, selfSigned(t, c.Hosts))
		}
	}
}

func selfSigned(t *testing.T, hosts []string) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: hosts[0]},
		DNSNames:     hosts,
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	out := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	return append(out, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})...)
}
