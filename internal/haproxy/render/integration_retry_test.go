package render

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"pier.dev/pier/internal/model"
)

// startDropper reads each request head and closes the connection without
// an answer: the empty response of a member that shuts down as a request
// reaches it.
func startDropper(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil || line == "\r\n" {
						return
					}
				}
			}()
		}
	}()
	t.Cleanup(func() { l.Close() })
	return l.Addr().String()
}

// TestIntegrationEmptyResponseRetry: a request that a member closes
// without an answer is retried on the other member by default (every
// request answered 200), and with NoEmptyResponseRetry it is not (the
// dropper's share of round-robin gets 502): the option changes what it
// says, and only that.
func TestIntegrationEmptyResponseRetry(t *testing.T) {
	bin := haproxyBin(t)
	if testing.Short() {
		t.Skip("starts HAProxy")
	}
	for _, tc := range []struct {
		noEmpty bool
		want502 int
	}{
		{false, 0},
		{true, 2},
	} {
		both := pool("both", memberAt(startDropper(t)), memberAt(startBackend(t, "good")))
		lb := newLB([]model.Listener{httpListener("", routes(toPool(both, hostIs("r.test"), pathPrefix("/"))))}, both)
		addr := serveLBWith(t, bin, lb, Options{MinSlots: 4, NoEmptyResponseRetry: tc.noEmpty})
		got502 := 0
		for i := range 4 { // round-robin: two of the four go to the dropper first
			req, _ := http.NewRequest("GET", "http://"+addr+"/", nil)
			req.Host = "r.test"
			resp, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}).Do(req)
			if err != nil {
				t.Fatalf("NoEmptyResponseRetry %v, request %d: %v", tc.noEmpty, i, err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			switch {
			case resp.StatusCode == 502:
				got502++
			case resp.StatusCode != 200 || string(body) != "good":
				t.Errorf("NoEmptyResponseRetry %v, request %d: %d %q, want 200 from good or 502", tc.noEmpty, i, resp.StatusCode, body)
			}
		}
		if got502 != tc.want502 {
			t.Errorf("NoEmptyResponseRetry %v: %d of 4 requests answered 502, want %d", tc.noEmpty, got502, tc.want502)
		}
	}
}
