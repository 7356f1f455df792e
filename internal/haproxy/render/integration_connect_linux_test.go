//go:build linux

package render

import (
	"net"
	"strconv"
	"syscall"
	"testing"
	"time"

	"pier.dev/pier/internal/model"
)

// TestIntegrationConnectTimeout: a pool's ConnectTimeout
// (proxy-connect-timeout) bounds how long HAProxy waits for a member
// that never completes the handshake. On loopback such a member is a
// listening socket whose accept queue is full: the kernel drops further
// SYNs. 200 ms with the defaults' 3 retries answers 503 in about 0.8 s,
// where the default 5 s would take 20 s.
func TestIntegrationConnectTimeout(t *testing.T) {
	bin := haproxyBin(t)
	if testing.Short() {
		t.Skip("starts HAProxy")
	}
	stuck := pool("stuck", memberAt(fullBacklog(t)))
	stuck.ConnectTimeout = 200 * time.Millisecond
	lb := newLB([]model.Listener{httpListener(stuck.ID, nil)}, stuck)
	port := freePort()
	lb.Listeners[0].Port, lb.VIP, lb.FIP = port, "127.0.0.1", ""
	dir := t.TempDir()
	cfg, err := Config(lb, Options{Dir: dir, MinSlots: 4})
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, dir+"/haproxy.conf", cfg)
	startHAProxy(t, bin, dir+"/haproxy.conf", port)
	start := time.Now()
	resp := rawRequest(t, "127.0.0.1:"+strconv.Itoa(port), "127.0.0.1", "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	took := time.Since(start)
	if resp.StatusCode != 503 || took < 200*time.Millisecond || took > 3*time.Second {
		t.Errorf("member that never accepts, 200ms connect timeout: %d after %v, want 503 after about 800ms", resp.StatusCode, took)
	}
	t.Logf("503 after %v", took.Round(10*time.Millisecond))
}

// fullBacklog returns the address of a listening socket with a backlog
// of 0 that is never accepted from, its queue already filled.
func fullBacklog(t *testing.T) string {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	addr := "127.0.0.1:" + strconv.Itoa(sa.(*syscall.SockaddrInet4).Port)
	for range 4 { // fill the accept queue; later SYNs are dropped
		c, err := net.DialTimeout("tcp", addr, 300*time.Millisecond)
		if err != nil {
			break
		}
		t.Cleanup(func() { c.Close() })
	}
	return addr
}
