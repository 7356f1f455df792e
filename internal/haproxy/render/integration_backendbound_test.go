package render

import (
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"pier.dev/pier/internal/model"
)

// startHeldBackend answers every request only once release is closed,
// the way a slow (or looping) backend holds its connections; arrived
// counts the requests that reached it.
func startHeldBackend(t *testing.T, name string) (addr string, release func(), arrived func() int) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	n := 0
	gate := make(chan struct{})
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		n++
		mu.Unlock()
		<-gate
		w.Header().Set("X-Backend", name)
		io.WriteString(w, name)
	})}
	go srv.Serve(l)
	var once sync.Once
	release = func() { once.Do(func() { close(gate) }) }
	t.Cleanup(func() { release(); srv.Close() })
	return l.Addr().String(), release, func() int { mu.Lock(); defer mu.Unlock(); return n }
}

// TestIntegrationBackendBound: a backend that holds its requests gets at
// most BackendMaxConn of them at once (queued ones included); the next
// is answered 503 by HAProxy at once, while another route of the same
// load balancer keeps serving, and the bound lifts when the backend
// answers: one route cannot starve a load balancer.
func TestIntegrationBackendBound(t *testing.T) {
	bin := haproxyBin(t)
	if testing.Short() {
		t.Skip("starts HAProxy")
	}
	heldAddr, release, arrived := startHeldBackend(t, "slow")
	slow := pool("slow", memberAt(heldAddr))
	fast := pool("fast", memberAt(startBackend(t, "fast")))
	lb := newLB([]model.Listener{httpListener("", routes(
		toPool(slow, hostIs("slow.test"), pathPrefix("/")),
		toPool(fast, hostIs("fast.test"), pathPrefix("/")),
	))}, slow, fast)
	const bound = 3
	addr := serveLBWith(t, bin, lb, Options{MinSlots: 4, BackendMaxConn: bound})

	get := func(host string) (*http.Response, string, error) {
		req, _ := http.NewRequest("GET", "http://"+addr+"/", nil)
		req.Host = host
		resp, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}).Do(req)
		if err != nil {
			return nil, "", err
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, string(body), nil
	}

	// Fill the slow backend with exactly bound requests, held.
	held := make(chan string, bound)
	for range bound {
		go func() {
			resp, body, err := get("slow.test")
			if err != nil {
				held <- err.Error()
				return
			}
			held <- resp.Status + " " + body
		}()
	}
	deadline := time.Now().Add(5 * time.Second)
	for arrived() < bound {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d held requests reached the backend", arrived(), bound)
		}
		time.Sleep(10 * time.Millisecond)
	}

	// One more to the slow route: refused at once, never forwarded.
	start := time.Now()
	resp, body, err := get("slow.test")
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 503 || !strings.Contains(body, "connection limit") {
		t.Fatalf("request over the bound: %s %q, want 503 naming the connection limit", resp.Status, body)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("the refusal took %v; it must not wait in the queue", took)
	}
	if arrived() != bound {
		t.Errorf("the backend saw %d requests, want %d: the refused one was forwarded", arrived(), bound)
	}

	// The other route of the same load balancer is not starved.
	for range 5 {
		resp, body, err := get("fast.test")
		if err != nil || resp.StatusCode != 200 || body != "fast" {
			t.Fatalf("other route while the slow one is full: %v %v %q", err, resp, body)
		}
	}

	// Once the backend answers, the held requests finish and it serves again.
	release()
	for range bound {
		if got := <-held; got != "200 OK slow" {
			t.Errorf("held request: %s, want 200 OK slow", got)
		}
	}
	resp, body, err = get("slow.test")
	if err != nil || resp.StatusCode != 200 || body != "slow" {
		t.Fatalf("after the backend answered: %v %v %q", err, resp, body)
	}
}
