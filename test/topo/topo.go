//go:build linux

// Package topo builds multi-host test networks out of network namespaces,
// for the tests of what crosses a network: the active/standby pair, native
// L4 load balancing, BGP. A switch namespace holds a bridge; every host (a
// node, the client, a router) is a namespace with eth0 on that bridge and
// an address in 10.99.0.0/24. No namespace has a default route or any link
// outside the bridge, so nothing a test sends can leave the machine.
//
//	switch  br0 ── n0 eth0 10.99.0.11   (nodes: .11, .12, …)
//	            ── n1 eth0 10.99.0.12
//	            ── c  eth0 10.99.0.100  (the client)
//
// Everything is removed in t.Cleanup, processes first, even when the test
// fails; namespaces of an earlier run whose process died are removed at
// the next New.
package topo

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"pier.dev/pier/test/netns"
)

// Subnet is the segment every host is on.
var Subnet = netip.MustParsePrefix("10.99.0.0/24")

const prefix = "pt"

// Options says which hosts to build.
type Options struct {
	Nodes  int  // node hosts n0, n1, … at .11, .12, …
	Client bool // a client host c at .100
}

// Topology is the network of one test.
type Topology struct {
	Switch string // namespace holding the bridge br0
	Nodes  []*Host
	Client *Host
}

// Host is one namespace on the segment.
type Host struct {
	Name string     // "n0", "c"
	NS   string     // namespace name
	Addr netip.Addr // address of eth0
	// Port is the host's end of its veth pair, in the switch namespace:
	// taking it down cuts the host off without touching the host itself.
	Port string
	sw   string
}

// Skip ends the test unless it can build namespaces: it needs root and
// iproute2. Under CI (CI set) a missing piece fails the test instead.
func Skip(t testing.TB, also ...string) {
	t.Helper()
	missing := ""
	if os.Geteuid() != 0 {
		missing = "root"
	}
	for _, bin := range append([]string{"ip"}, also...) {
		if _, err := exec.LookPath(bin); err != nil && missing == "" {
			missing = bin + " (hack/deps.sh installs it)"
		}
	}
	if missing == "" {
		return
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("topology test needs %s", missing)
	}
	t.Skipf("topology test needs %s", missing)
}

// New builds the topology and arranges its removal.
func New(t testing.TB, opts Options) *Topology {
	t.Helper()
	Skip(t)
	// Namespaces of an earlier run whose test binary was killed (go
	// test's timeout) could not be cleaned up then.
	netns.RemoveStale(prefix)
	id := prefix + strconv.Itoa(os.Getpid())
	top := &Topology{Switch: id + "-sw"}
	t.Cleanup(func() { top.remove() })
	must := func(args ...string) {
		t.Helper()
		if err := ip(args...); err != nil {
			t.Fatal(err)
		}
	}
	must("netns", "add", top.Switch)
	must("-n", top.Switch, "link", "set", "lo", "up")
	must("-n", top.Switch, "link", "add", "br0", "type", "bridge")
	must("-n", top.Switch, "link", "set", "br0", "up")
	add := func(name string, host int) *Host {
		h := &Host{Name: name, NS: id + "-" + name, Port: "p-" + name, sw: top.Switch,
			Addr: addrOf(host)}
		must("netns", "add", h.NS)
		must("-n", top.Switch, "link", "add", h.Port, "type", "veth", "peer", "name", "eth0", "netns", h.NS)
		must("-n", top.Switch, "link", "set", h.Port, "master", "br0", "up")
		must("-n", h.NS, "link", "set", "lo", "up")
		must("-n", h.NS, "link", "set", "eth0", "up")
		must("-n", h.NS, "addr", "add", netip.PrefixFrom(h.Addr, Subnet.Bits()).String(), "dev", "eth0")
		return h
	}
	for i := range opts.Nodes {
		top.Nodes = append(top.Nodes, add("n"+strconv.Itoa(i), 11+i))
	}
	if opts.Client {
		top.Client = add("c", 100)
	}
	return top
}

func addrOf(host int) netip.Addr {
	a := Subnet.Addr().As4()
	a[3] = byte(host)
	return netip.AddrFrom4(a)
}

// Command returns name with args to run inside the host's namespace.
func (h *Host) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", h.NS, name}, args...)...)
}

// Has reports whether addr is on the host's eth0.
func (h *Host) Has(addr netip.Addr) bool {
	out, err := exec.Command("ip", "-n", h.NS, "-o", "addr", "show", "dev", "eth0").Output()
	want := " " + netip.PrefixFrom(addr, addr.BitLen()).String() + " "
	return err == nil && strings.Contains(string(out), want)
}

// SetLink takes the host's switch port down or up: the host is cut off
// from every other host, as when its link fails.
func (h *Host) SetLink(up bool) error {
	state := "down"
	if up {
		state = "up"
	}
	return ip("-n", h.sw, "link", "set", h.Port, state)
}

// Holders names the hosts that have addr on eth0.
func (t *Topology) Holders(addr netip.Addr) []string {
	var out []string
	for _, h := range append(append([]*Host(nil), t.Nodes...), t.Client) {
		if h != nil && h.Has(addr) {
			out = append(out, h.Name)
		}
	}
	return out
}

func (t *Topology) namespaces() []string {
	var out []string
	for _, h := range append(append([]*Host(nil), t.Nodes...), t.Client) {
		if h != nil {
			out = append(out, h.NS)
		}
	}
	return append(out, t.Switch)
}

func (t *Topology) remove() {
	for _, ns := range t.namespaces() {
		netns.KillIn(ns)
		_ = ip("netns", "delete", ns)
	}
}

func ip(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}
