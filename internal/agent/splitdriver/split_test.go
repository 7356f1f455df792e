package splitdriver

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"pier.dev/pier/internal/agent/driver"
	"pier.dev/pier/internal/agent/haproxydriver"
	"pier.dev/pier/internal/agent/nativedriver"
	"pier.dev/pier/internal/model"
	"pier.dev/pier/test/harness"
)

// gatewayLB is a Gateway's load balancer: HTTP on 8080 and TCP on 53
// (HAProxy), UDP on 53 with a pool and UDP on 514 without (nftables).
func gatewayLB() *model.LoadBalancer {
	return &model.LoadBalancer{
		UUID: "9a7d2c2e-0000-4000-8000-0000000000aa", Name: "gateway:demo/web", Provider: model.ProviderHAProxy,
		VIP: "10.97.0.1", FIP: "10.97.1.1", AccessLog: "on",
		Placement: model.Placement{Active: "a", Standby: "b", RouterID: 7},
		Sources:   []model.Source{{Kind: model.KindGateway, Namespace: "demo", Name: "web"}},
		Listeners: []model.Listener{
			{Name: "http-8080", Protocol: model.ProtocolHTTP, Port: 8080, DefaultPoolID: "web"},
			{Name: "tcp-53", Protocol: model.ProtocolTCP, Port: 53, DefaultPoolID: "dns-tcp"},
			{Name: "udp-53", Protocol: model.ProtocolUDP, Port: 53, DefaultPoolID: "dns-udp"},
			{Name: "udp-514", Protocol: model.ProtocolUDP, Port: 514},
		},
		Pools: []model.Pool{
			{ID: "dns-tcp", Name: "demo_dns_53_tcp", TCP: true, Members: []model.Member{{Address: "10.1.0.1", Port: 53}}},
			{ID: "dns-udp", Name: "demo_dns_udp-53", Members: []model.Member{{Address: "10.1.0.1", Port: 5353}, {Address: "10.1.0.2", Port: 5353}}},
			{ID: "web", Name: "demo_web_80", Members: []model.Member{{Address: "10.1.0.3", Port: 80}}},
		},
	}
}

// TestParts: the UDP listeners and their pools go to a native load
// balancer of their own UUID on the same addresses and placement; the
// rest stays for HAProxy; a load balancer without UDP is untouched.
func TestParts(t *testing.T) {
	lb := gatewayLB()
	before := gatewayLB()
	h, n := Parts(lb)
	if !reflect.DeepEqual(lb, before) {
		t.Fatal("Parts changed its argument")
	}
	if n == nil || n.Provider != model.ProviderNative || n.UUID != PartUUID(lb.UUID) || n.UUID == lb.UUID ||
		n.VIP != lb.VIP || n.FIP != lb.FIP || !reflect.DeepEqual(n.Placement, lb.Placement) || n.AccessLog != "" {
		t.Fatalf("native part %+v", n)
	}
	if len(n.Listeners) != 2 || n.Listeners[0].Port != 53 || n.Listeners[1].Port != 514 ||
		len(n.Pools) != 1 || n.Pools[0].ID != "dns-udp" {
		t.Fatalf("native part listeners %+v pools %+v", n.Listeners, n.Pools)
	}
	if h.UUID != lb.UUID || h.Provider != model.ProviderHAProxy || len(h.Listeners) != 2 || len(h.Pools) != 2 {
		t.Fatalf("HAProxy part %+v", h)
	}
	for _, l := range h.Listeners {
		if l.Protocol == model.ProtocolUDP {
			t.Fatalf("HAProxy gets a UDP listener: %+v", l)
		}
	}
	plain := gatewayLB()
	plain.Listeners = plain.Listeners[:2]
	if h, n := Parts(plain); h != plain || n != nil {
		t.Fatalf("a load balancer without UDP: %p %+v", h, n)
	}
	if u := PartUUID(lb.UUID); u != PartUUID(lb.UUID) || strings.ContainsAny(u, "/ .") || len(u) > 64 {
		t.Fatalf("part UUID %q", u)
	}
}

// TestUDPWithoutNftables: on a node where nftables cannot run, a Gateway
// with UDP listeners fails to apply with the native driver's reason, as
// a rejection (retrying cannot help), and one of UDP listeners only does
// not start HAProxy.
func TestUDPWithoutNftables(t *testing.T) {
	if _, err := exec.LookPath("haproxy"); err != nil {
		t.Skip("needs haproxy")
	}
	hd, err := haproxydriver.New(haproxydriver.Config{StateDir: harness.ShortTempDir(t), Binary: "haproxy"})
	if err != nil {
		t.Fatal(err)
	}
	hs, ns := New(hd, nativedriver.Unavailable(errors.New("nft: not found")))
	ctx := context.Background()
	for _, d := range []driver.Driver{hs, ns} {
		if err := d.Recover(ctx, map[string]bool{}); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { hs.Close(true) })
	lb := gatewayLB()
	lb.Listeners = []model.Listener{lb.Listeners[2]} // UDP 53 only
	_, err = hs.Apply(ctx, lb)
	if !errors.Is(err, driver.ErrRejected) || !strings.Contains(err.Error(), "nft: not found") ||
		!strings.Contains(err.Error(), "UDP listeners") {
		t.Fatalf("apply: %v", err)
	}
	if hs.(driver.HealthChecker).Healthy(lb.UUID) {
		t.Fatal("healthy without its UDP part")
	}
	if got := hd.Drifted(); len(got) != 0 {
		t.Fatalf("HAProxy knows %v", got)
	}
}

// TestRecoverKeepsParts: an agent restarting adopts the UDP part of a
// placed Gateway whichever side the agent recovers first (the native
// table is written once, with both kinds), and drops that of a Gateway
// no longer placed here. Real nftables, in a namespace of the test's own.
func TestRecoverKeepsParts(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (nftables, network namespaces)")
	}
	for _, bin := range []string{"nft", "ip", "haproxy"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("needs %s", bin)
		}
	}
	netns := "h30u-split-" + strconv.Itoa(os.Getpid()%100000)
	if out, err := exec.Command("ip", "netns", "add", netns).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", netns).Run() })
	dir := harness.ShortTempDir(t)
	ctx := context.Background()
	// start recovers the drivers as an agent starting does; between the
	// two sides' Recover, the table must still serve what it served.
	start := func(haproxyFirst bool, placed map[string]bool) (driver.Driver, driver.Driver) {
		t.Helper()
		hd, err := haproxydriver.New(haproxydriver.Config{StateDir: filepath.Join(dir, "haproxy"), Binary: "haproxy", Netns: netns})
		if err != nil {
			t.Fatal(err)
		}
		nd, err := nativedriver.New(nativedriver.Config{StateDir: dir, Netns: netns})
		if err != nil {
			t.Fatal(err)
		}
		hs, ns := New(hd, nd)
		order := []driver.Driver{ns, hs}
		if haproxyFirst {
			order = []driver.Driver{hs, ns}
		}
		servedBefore := served(t, netns, "10.97.0.1")
		for i, d := range order {
			p := map[string]bool{}
			if d.Provider() == model.ProviderHAProxy {
				p = placed
			}
			if err := d.Recover(ctx, p); err != nil {
				t.Fatal(err)
			}
			if i == 0 && servedBefore && !served(t, netns, "10.97.0.1") {
				t.Fatal("the part was dropped before the other side recovered")
			}
		}
		return hs, ns
	}
	lb := gatewayLB()
	lb.Listeners = lb.Listeners[2:] // UDP only: no HAProxy to start
	hs, ns := start(true, map[string]bool{})
	if _, err := hs.Apply(ctx, lb); err != nil {
		t.Fatal(err)
	}
	if !hs.(driver.HealthChecker).Healthy(lb.UUID) || !served(t, netns, "10.97.0.1") {
		t.Fatal("the UDP part does not serve")
	}
	hs.Close(false) // an agent exiting that leaves the data plane serving
	ns.Close(false)
	for _, haproxyFirst := range []bool{false, true} {
		hs, ns = start(haproxyFirst, map[string]bool{lb.UUID: true})
		if !served(t, netns, "10.97.0.1") {
			t.Fatalf("haproxy first %v: the placed Gateway's UDP part was not adopted", haproxyFirst)
		}
		hs.Close(false)
		ns.Close(false)
	}
	hd, _ := haproxydriver.New(haproxydriver.Config{StateDir: filepath.Join(dir, "haproxy"), Binary: "haproxy", Netns: netns})
	nd, _ := nativedriver.New(nativedriver.Config{StateDir: dir, Netns: netns})
	hs, ns = New(hd, nd)
	_ = ns.Recover(ctx, map[string]bool{})
	_ = hs.Recover(ctx, map[string]bool{})
	if served(t, netns, "10.97.0.1") {
		t.Fatal("the UDP part of a Gateway no longer placed here still serves")
	}
	ns.Close(true)
	hs.Close(true)
}

// served reports whether pier's table in netns holds addr.
func served(t *testing.T, netns, addr string) bool {
	t.Helper()
	out, err := exec.Command("ip", "netns", "exec", netns, "nft", "list", "table", "inet", "pier_native").CombinedOutput()
	return err == nil && strings.Contains(string(out), addr)
}
