package nativedriver

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// The data plane's cost per connection, in the namespaces of newWorld:
// each iteration opens a TCP connection from the client, reads the pod's
// name, echoes 4 bytes and closes. Three paths, same run, same pods:
//
//	go test ./internal/agent/nativedriver -run '^$' -bench . -benchtime 3000x
//
// BenchmarkDirect dials a pod; BenchmarkNative the VIP (nftables DNAT,
// masquerade); BenchmarkHAProxyTCP a HAProxy in mode tcp on the node.

func benchWorld(b *testing.B) *world {
	w := newWorld(b, 3)
	// The direct path needs a way back to the client; the driver tests
	// run without it to prove the masquerade.
	for i, ns := range w.pods {
		ipCmd(b, "-n", ns, "route", "add", "10.98.1.0/24", "via", w.podAddr(i, 1))
	}
	return w
}

func benchDial(b *testing.B, w *world, addr string) {
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		c, _, err := w.dial(addr)
		if err != nil {
			b.Fatal(err)
		}
		if err := echoes(c); err != nil {
			b.Fatal(err)
		}
		c.Close()
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "conn/s")
}

func BenchmarkDirect(b *testing.B) {
	w := benchWorld(b)
	benchDial(b, w, w.podAddr(0, 2)+":"+strconv.Itoa(podPort))
}

func BenchmarkNative(b *testing.B) {
	w := benchWorld(b)
	d := newDriver(b, w, b.TempDir())
	b.Cleanup(func() { d.Close(true) })
	mustApply(b, d, nativeLB(w, 0, 0, 1, 2))
	benchDial(b, w, vip+":80")
}

const haproxyTCP = `global
	maxconn 4096
defaults
	mode tcp
	timeout connect 2s
	timeout client 10s
	timeout server 10s
frontend fe
	bind 10.98.200.9:80
	default_backend be
backend be
	balance roundrobin
	server p0 10.98.10.2:8080
	server p1 10.98.11.2:8080
	server p2 10.98.12.2:8080
`

func BenchmarkHAProxyTCP(b *testing.B) {
	if _, err := exec.LookPath("haproxy"); err != nil {
		b.Skip("haproxy not installed")
	}
	w := benchWorld(b)
	cfg := filepath.Join(b.TempDir(), "haproxy.cfg")
	if err := os.WriteFile(cfg, []byte(haproxyTCP), 0o600); err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command("ip", "netns", "exec", w.node, "haproxy", "-W", "-db", "-f", cfg)
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cmd.Process.Signal(os.Interrupt); _ = cmd.Wait() })
	deadline := time.Now().Add(5 * time.Second)
	for {
		c, _, err := w.dial("10.98.200.9:80")
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("haproxy does not answer: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	benchDial(b, w, "10.98.200.9:80")
}
