package corpus

import (
	"crypto/tls"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"pier.dev/pier/test/harness"
)

// The corpus's EndpointSlices point at these ports on 127.0.0.1; the
// test starts its own backends and writes their ports instead.
const (
	portOne   = "9001" // echo "one"
	portTwo   = "9002" // echo "two"
	portThree = "9003" // echo "three"
	portTLS   = "9443" // a TLS backend, "tls"
	portH2C   = "9050" // an HTTP/2 cleartext backend (gRPC's transport), "h2c"
)

// slicePort is an EndpointSlice's port line.
var slicePort = regexp.MustCompile(`(?m)^(\s+port: )(\d+)$`)

// startBackends starts one backend per corpus port and returns the port
// each is replaced with.
func startBackends(t *testing.T) map[string]int {
	t.Helper()
	return map[string]int{
		portOne:   harness.StartEcho(t, "one", "one-pod"),
		portTwo:   harness.StartEcho(t, "two", "two-pod"),
		portThree: harness.StartEcho(t, "three", "three-pod"),
		portTLS:   startTLSBackend(t),
		portH2C:   startH2CBackend(t),
	}
}

// reply answers what the echo answers: which backend, the path and Host
// it received, and the protocol.
func reply(service string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]string{"service": service, "path": r.RequestURI, "host": r.Host, "proto": r.Proto})
	})
}

// startTLSBackend serves HTTPS with httptest's own certificate: the
// backend-protocol HTTPS and ssl-passthrough Ingresses reach it.
func startTLSBackend(t *testing.T) int {
	t.Helper()
	srv := httptest.NewUnstartedServer(reply("tls"))
	srv.TLS = &tls.Config{NextProtos: []string{"http/1.1"}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().(*net.TCPAddr).Port
}

// startH2CBackend serves HTTP/2 without TLS, as a gRPC server does: the
// backend-protocol GRPC Ingress reaches it.
func startH2CBackend(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var p http.Protocols
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	srv := &http.Server{Handler: reply("h2c"), Protocols: &p}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { srv.Close() })
	return l.Addr().(*net.TCPAddr).Port
}

// copyCorpus writes the corpus into dir with its EndpointSlice ports
// replaced by the backends'; it returns the files copied.
func copyCorpus(t *testing.T, dir string, ports map[string]int) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no corpus: %v", err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		s := slicePort.ReplaceAllStringFunc(string(b), func(line string) string {
			m := slicePort.FindStringSubmatch(line)
			if p, ok := ports[m[2]]; ok {
				return m[1] + strconv.Itoa(p)
			}
			return line
		})
		harness.WriteFile(t, filepath.Join(dir, filepath.Base(f)), s)
	}
	return files
}
