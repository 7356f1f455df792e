package e2e

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"pier.dev/pier/test/harness"
)

// rawBackend answers every request 200 and keeps the head of each as it
// arrived, so a test sees the framing headers HAProxy sent.
type rawBackend struct {
	mu    sync.Mutex
	heads []string
}

func startRawBackend(t *testing.T) (*rawBackend, int) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	b := &rawBackend{}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				c.SetDeadline(time.Now().Add(5 * time.Second))
				r := bufio.NewReader(c)
				var head strings.Builder
				for {
					line, err := r.ReadString('\n')
					head.WriteString(line)
					if err != nil || line == "\r\n" {
						break
					}
				}
				b.mu.Lock()
				b.heads = append(b.heads, head.String())
				b.mu.Unlock()
				io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
			}()
		}
	}()
	return b, l.Addr().(*net.TCPAddr).Port
}

func (b *rawBackend) seen() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.heads...)
}

// TestAuthResponseHeadersRefuseFraming: a tenant lists Transfer-Encoding
// in auth-response-headers, and its auth Service answers chunked. Copied
// onto a request with a Content-Length, the backend got both
// "content-length: 5" and "transfer-encoding: chunked": two framings,
// request smuggling.
// The Ingress must be refused with the reason (the rule of the Gateway
// API header modifiers), no request of its host may reach the backend
// with both, and the tenant's other Ingress keeps its external auth.
func TestAuthResponseHeadersRefuseFraming(t *testing.T) {
	manifests, state := harness.ShortTempDir(t), harness.ShortTempDir(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	auth := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Auth-Request-User", "alice")
		w.Header().Set("Transfer-Encoding", "chunked")
		w.Write([]byte("x"))
	})}
	go auth.Serve(l)
	t.Cleanup(func() { auth.Close() })
	backend, backendPort := startRawBackend(t)
	s := strings.ReplaceAll(extAuthManifests, "APPPORT", strconv.Itoa(backendPort))
	s = strings.ReplaceAll(s, "AUTHPORT", strconv.Itoa(l.Addr().(*net.TCPAddr).Port))
	attack := strings.NewReplacer("name: more", "name: smuggle", "more.example", "smuggle.example",
		"pier.dev/load-balancer: shop", "pier.dev/load-balancer: shop\n"+
			"    nginx.ingress.kubernetes.io/auth-url: http://oauth2-proxy.shop.svc.cluster.local:4180/oauth2/auth\n"+
			"    nginx.ingress.kubernetes.io/auth-response-headers: X-Auth-Request-User, Transfer-Encoding",
		"pathType: Exact", "pathType: Prefix").Replace(extraIngress)
	harness.WriteFile(t, filepath.Join(manifests, "shop.yaml"), strings.ReplaceAll(s, "EXTRA", attack))
	p := harness.StartPier(t, harness.Options{Manifests: manifests, State: state})
	vip := p.Addresses("shop", "app")[0]
	addr := net.JoinHostPort(vip, strconv.Itoa(p.HTTPPort))

	post := func(host string) int {
		req := fmt.Sprintf("POST /x HTTP/1.1\r\nHost: %s\r\nCookie: session=ok\r\nContent-Length: 5\r\n"+
			"Connection: close\r\n\r\nhello", host)
		return send(t, addr, "127.0.0.1", req).StatusCode
	}
	// Both Ingresses are of group shop, one load balancer: once the
	// other one answers, the attack's is applied too, if it was accepted.
	harness.WaitFor(t, 15*time.Second, "app.example served through its external auth", func() bool {
		return post("app.example") == 200
	})
	t.Logf("POST to the attack's host: %d", post("smuggle.example"))
	for _, head := range backend.seen() {
		lower := strings.ToLower(head)
		if strings.Contains(lower, "content-length:") && strings.Contains(lower, "transfer-encoding:") {
			t.Errorf("the backend got two framings:\n%s", head)
		}
		if strings.Contains(lower, "host: smuggle.example") {
			t.Errorf("the refused Ingress's host reached the backend:\n%s", head)
		}
	}
	if len(backend.seen()) == 0 {
		t.Error("no request reached the backend: the check above saw nothing")
	}
	ing, err := p.Ingress("shop", "smuggle")
	if err != nil {
		t.Fatal(err)
	}
	refused := false
	for _, pr := range ing.Problems {
		if pr.Reason == "InvalidAnnotation" && strings.Contains(pr.Message, "Transfer-Encoding") &&
			strings.Contains(pr.Message, "frames the message") {
			t.Logf("refused: %s", pr.Message)
			refused = true
		}
	}
	if !refused {
		t.Errorf("the attack's Ingress is not refused for its framing header: %+v", ing.Problems)
	}
}
