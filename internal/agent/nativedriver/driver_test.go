package nativedriver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"pier.dev/pier/internal/agent/driver"
	"pier.dev/pier/internal/agent/driver/drivertest"
	"pier.dev/pier/internal/model"
)

const (
	vip = "10.98.200.1"
	fip = "10.98.201.1"
)

func newDriver(t testing.TB, w *world, dir string) *Driver {
	t.Helper()
	d, err := New(Config{StateDir: dir, Netns: w.node})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// nativeLB is a load balancer with a TCP listener on 80 and a UDP one on
// 53, both to the given pods on podPort.
func nativeLB(w *world, n int, pods ...int) *model.LoadBalancer {
	var members []model.Member
	for _, i := range pods {
		members = append(members, model.Member{Address: w.podAddr(i, 2), Port: podPort, Weight: 1})
	}
	uuid := fmt.Sprintf("00000000-0000-0000-0000-%012d", n)
	return &model.LoadBalancer{
		UUID: uuid, Name: "default/svc" + strconv.Itoa(n), Provider: model.ProviderNative,
		VIP: "10.98.200." + strconv.Itoa(n+1), FIP: "10.98.201." + strconv.Itoa(n+1),
		Listeners: []model.Listener{
			{Name: "tcp-80", Protocol: model.ProtocolTCP, Port: 80, DefaultPoolID: "p80"},
			{Name: "udp-53", Protocol: model.ProtocolUDP, Port: 53, DefaultPoolID: "p53"},
		},
		Pools: []model.Pool{
			{ID: "p80", Name: "default_svc_80", Algorithm: model.AlgorithmRoundRobin, Members: members},
			{ID: "p53", Name: "default_svc_53", Algorithm: model.AlgorithmRoundRobin, Members: members},
		},
	}
}

func mustApply(t testing.TB, d *Driver, lb *model.LoadBalancer) {
	t.Helper()
	if _, err := d.Apply(context.Background(), lb); err != nil {
		t.Fatal(err)
	}
}

// TestServesTCPAndUDP: through VIP and FIP, both protocols reach a pod,
// and 1,000 connections spread within 20% of even over 3 pods.
func TestServesTCPAndUDP(t *testing.T) {
	w := newWorld(t, 3)
	d := newDriver(t, w, t.TempDir())
	t.Cleanup(func() { d.Close(true) })
	mustApply(t, d, nativeLB(w, 0, 0, 1, 2))
	for _, addr := range []string{vip, fip} {
		c, pod, err := w.dial(net.JoinHostPort(addr, "80"))
		if err != nil {
			t.Fatalf("tcp %s: %v", addr, err)
		}
		if err := echoes(c); err != nil {
			t.Fatalf("tcp %s via %s: %v", addr, pod, err)
		}
		c.Close()
		if pod, err := w.askUDP(net.JoinHostPort(addr, "53")); err != nil || pod == "" {
			t.Fatalf("udp %s: %q %v", addr, pod, err)
		}
	}
	const conns = 1000
	counts := map[string]int{}
	start := time.Now()
	for range conns {
		c, pod, err := w.dial(vip + ":80")
		if err != nil {
			t.Fatal(err)
		}
		c.Close()
		counts[pod]++
	}
	t.Logf("%d connections in %s: %v", conns, time.Since(start).Round(time.Millisecond), counts)
	even := conns / 3
	for i := range 3 {
		n := counts["pod"+strconv.Itoa(i)]
		if n < even*8/10 || n > even*12/10 {
			t.Errorf("pod%d got %d of %d connections, want %d±20%%", i, n, conns, even)
		}
	}
}

// TestEndpointChangesKeepConnections: 50 endpoint changes while new
// connections keep coming: every established connection (TCP, and a UDP
// flow) survives, even one whose pod left the pool, and no new
// connection fails. Flushing and refilling the sets instead refused about
// one new connection in 10,000 (package nft, Render).
func TestEndpointChangesKeepConnections(t *testing.T) {
	w := newWorld(t, 3)
	d := newDriver(t, w, t.TempDir())
	t.Cleanup(func() { d.Close(true) })
	mustApply(t, d, nativeLB(w, 0, 0, 1, 2))
	var held []net.Conn
	pods := map[string]int{}
	// At least 6, and until one is on a pod that leaves the pool.
	for len(held) < 6 || (pods["pod0"]+pods["pod1"] == 0 && len(held) < 60) {
		c, pod, err := w.dial(vip + ":80")
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		held = append(held, c)
		pods[pod]++
	}
	if pods["pod0"]+pods["pod1"] == 0 {
		t.Fatalf("no held connection on a pod that leaves the pool: %v", pods)
	}
	// A UDP flow is a conntrack entry too: it stays on its pod.
	udp, udpPod := w.udpFlow(t, vip+":53")
	defer udp.Close()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var opened, failed int
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			c, _, err := w.dial(vip + ":80")
			mu.Lock()
			opened++
			if err != nil {
				failed++
				t.Errorf("new connection during changes: %v", err)
			} else {
				c.Close()
			}
			mu.Unlock()
		}
	}()
	sets := [][]int{{0, 1}, {1, 2}, {2}, {0, 2}, {0, 1, 2}}
	for i := range 50 {
		mustApply(t, d, nativeLB(w, 0, sets[i%len(sets)]...))
		time.Sleep(10 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	// Last, a pool without the pods most held connections started on:
	// their packets must still reach those pods, by conntrack alone.
	mustApply(t, d, nativeLB(w, 0, 2))
	for i, c := range held {
		if err := echoes(c); err != nil {
			t.Errorf("established connection %d lost after 50 changes: %v", i, err)
		}
	}
	if got, err := ask(udp); err != nil || got != udpPod {
		t.Errorf("UDP flow on %s: after 50 changes answered by %q (%v)", udpPod, got, err)
	}
	t.Logf("50 changes: %d new connections, %d failed; established kept: %v", opened, failed, pods)
}

// TestNoEndpointsRefusesFast: a pool with no endpoint answers TCP with a
// reset and UDP with ICMP port unreachable, at once.
func TestNoEndpointsRefusesFast(t *testing.T) {
	w := newWorld(t, 1)
	d := newDriver(t, w, t.TempDir())
	t.Cleanup(func() { d.Close(true) })
	mustApply(t, d, nativeLB(w, 0))
	start := time.Now()
	_, _, err := w.dial(vip + ":80")
	took := time.Since(start)
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("tcp with no endpoint: %v, want connection refused", err)
	}
	if took > 500*time.Millisecond {
		t.Errorf("refused after %s: want at once", took)
	}
	if _, err := w.askUDP(fip + ":53"); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("udp with no endpoint: %v, want ICMP port unreachable (refused)", err)
	}
	t.Logf("tcp refused in %s", took)
	mustApply(t, d, nativeLB(w, 0, 0)) // an endpoint comes: served again
	if _, pod, err := w.dial(vip + ":80"); err != nil || pod != "pod0" {
		t.Fatalf("after an endpoint came back: %q %v", pod, err)
	}
}

// TestRemoveLeavesNothing: removing the last load balancer leaves the
// ruleset exactly as it was before the first apply.
func TestRemoveLeavesNothing(t *testing.T) {
	w := newWorld(t, 1)
	d := newDriver(t, w, t.TempDir())
	t.Cleanup(func() { d.Close(true) })
	before := w.ruleset(t)
	a, b := nativeLB(w, 0, 0), nativeLB(w, 1, 0)
	mustApply(t, d, a)
	mustApply(t, d, b)
	d.Remove(a.UUID)
	if rules := w.ruleset(t); strings.Contains(rules, "svc_"+model.ID(a.UUID, "TCP", "80")) {
		t.Fatalf("the chain of a removed load balancer is still there:\n%s", rules)
	}
	if _, _, err := w.dial(vip + ":80"); err == nil {
		t.Fatal("a removed load balancer still serves")
	}
	if _, pod, err := w.dial("10.98.200.2:80"); err != nil || pod != "pod0" {
		t.Fatalf("the other load balancer: %q %v", pod, err)
	}
	d.Remove(b.UUID)
	if after := w.ruleset(t); after != before {
		t.Fatalf("ruleset after removal:\n%s\nbefore:\n%s", after, before)
	}
}

// TestRefusesBadSpec: a spec the kernel cannot serve is refused, and what
// ran keeps running.
func TestRefusesBadSpec(t *testing.T) {
	w := newWorld(t, 1)
	d := newDriver(t, w, t.TempDir())
	t.Cleanup(func() { d.Close(true) })
	good := nativeLB(w, 0, 0)
	mustApply(t, d, good)
	for name, mutate := range map[string]func(lb *model.LoadBalancer){
		"http listener": func(lb *model.LoadBalancer) { lb.Listeners[0].Protocol = model.ProtocolHTTP },
		"port 0":        func(lb *model.LoadBalancer) { lb.Listeners[0].Port = 0 },
		"ipv6 vip":      func(lb *model.LoadBalancer) { lb.VIP = "fd00::1" },
		"vip injection": func(lb *model.LoadBalancer) { lb.VIP = "10.98.200.1 } flush ruleset {" },
		"member":        func(lb *model.LoadBalancer) { lb.Pools[0].Members[0].Address = "10.98.10.2; flush ruleset" },
		"same port twice": func(lb *model.LoadBalancer) {
			lb.Listeners = append(lb.Listeners, lb.Listeners[0])
		},
	} {
		bad := good.Clone()
		mutate(bad)
		if _, err := d.Apply(context.Background(), bad); !errors.Is(err, driver.ErrRejected) {
			t.Errorf("%s: %v, want a rejection", name, err)
		}
	}
	if _, pod, err := w.dial(vip + ":80"); err != nil || pod != "pod0" {
		t.Fatalf("after refused specs: %q %v", pod, err)
	}
}

// TestContract runs the driver contract against real nftables.
func TestContract(t *testing.T) {
	w := newWorld(t, 3)
	drivertest.Run(t, drivertest.Harness{
		New: func(t *testing.T, dir string) driver.Driver { return newDriver(t, w, dir) },
		StateDir: func(t *testing.T) string {
			return t.TempDir()
		},
		LB: func(t *testing.T, n int) *model.LoadBalancer { return nativeLB(w, n, 0, 1) },
		Change: func(t *testing.T, lb *model.LoadBalancer) *model.LoadBalancer {
			next := lb.Clone()
			for i := range next.Pools {
				next.Pools[i].Members = []model.Member{{Address: w.podAddr(2, 2), Port: podPort, Weight: 1}}
			}
			return next
		},
		Break: func(lb *model.LoadBalancer) *model.LoadBalancer {
			bad := lb.Clone()
			bad.Listeners[0].Protocol = model.ProtocolHTTP
			return bad
		},
		Serving: func(t *testing.T, lb *model.LoadBalancer) bool {
			want := map[string]bool{}
			for _, m := range lb.Pools[0].Members {
				want[m.Address] = true
			}
			for range 5 {
				c, pod, err := w.dial(lb.VIP + ":80")
				if err != nil {
					return false
				}
				c.Close()
				i, _ := strconv.Atoi(pod[len("pod"):])
				if !want[w.podAddr(i, 2)] {
					return false
				}
			}
			return true
		},
		Stopped: func(t *testing.T, lb *model.LoadBalancer) bool {
			c, _, err := w.dial(lb.VIP + ":80")
			if err == nil {
				c.Close()
			}
			return err != nil
		},
	})
}

// TestSourceAffinity: with the SOURCE_IP algorithm (sessionAffinity
// ClientIP) every connection of one client lands on one pod, and stays
// there across a change that keeps the endpoints.
func TestSourceAffinity(t *testing.T) {
	w := newWorld(t, 3)
	d := newDriver(t, w, t.TempDir())
	t.Cleanup(func() { d.Close(true) })
	lb := nativeLB(w, 0, 0, 1, 2)
	for i := range lb.Pools {
		lb.Pools[i].Algorithm = model.AlgorithmSourceIP
	}
	mustApply(t, d, lb)
	seen := map[string]int{}
	for range 50 {
		c, pod, err := w.dial(vip + ":80")
		if err != nil {
			t.Fatal(err)
		}
		c.Close()
		seen[pod]++
	}
	if len(seen) != 1 {
		t.Fatalf("one client spread over %v", seen)
	}
	other := lb.Clone()
	other.Listeners = append(other.Listeners, model.Listener{Name: "tcp-81", Protocol: model.ProtocolTCP, Port: 81, DefaultPoolID: "p80"})
	mustApply(t, d, other)
	if _, pod, err := w.dial(vip + ":80"); err != nil || seen[pod] == 0 {
		t.Fatalf("after a change: %q %v, before %v", pod, err, seen)
	}
}
