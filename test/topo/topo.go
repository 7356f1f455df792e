//go:build linux

// Package topo builds multi-host test networks out of network namespaces,
// for the tests of what crosses a network: the active/standby pair, native
// L4 load balancing, BGP. It is internal/lab (which `pier run --nodes`
// uses too) with a test's lifetime: a switch namespace holds a bridge;
// every host (a node, the client) is a namespace with eth0 on that bridge
// and an address in 10.99.0.0/24. No namespace has a default route or any
// link outside the bridge, so nothing a test sends can leave the machine.
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
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"testing"

	"pier.dev/pier/internal/lab"
)

// Subnet is the segment every host is on.
var Subnet = lab.DefaultSubnet

// prefix starts every namespace name; the test binary's pid follows it, so
// that lab.RemoveStale finds those of a binary that died.
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
	lab    *lab.Lab
}

// Host is one namespace on the segment (see lab.Host).
type Host = lab.Host

// Skip ends the test unless it can build namespaces: it needs root and
// iproute2, and the extra commands named in also. Under CI (CI set) a
// missing piece fails the test instead.
func Skip(t testing.TB, also ...string) {
	t.Helper()
	missing := ""
	if err := lab.Available(); err != nil {
		missing = err.Error()
	}
	for _, bin := range also {
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
	lab.RemoveStale(prefix)
	l, err := lab.Build(lab.Options{
		Prefix: prefix + strconv.Itoa(os.Getpid()) + "-",
		Nodes:  opts.Nodes,
		Client: opts.Client,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Remove)
	return &Topology{Switch: l.Switch, Nodes: l.Nodes, Client: l.Client, lab: l}
}

// Holders names the hosts that have addr on eth0.
func (t *Topology) Holders(addr netip.Addr) []string { return t.lab.Holders(addr) }

// namespaces lists every namespace of the topology, the switch last.
func (t *Topology) namespaces() []string {
	var out []string
	for _, h := range t.lab.Hosts() {
		out = append(out, h.NS)
	}
	return append(out, t.Switch)
}
