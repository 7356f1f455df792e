//go:build linux

package lab

import (
	"errors"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// testPrefix names the namespaces of this test binary; the pid lets
// RemoveStale find them if the binary dies before its cleanups run.
func testPrefix(extra string) string {
	return "lt" + strconv.Itoa(os.Getpid()) + "-" + extra
}

// needLab skips the test unless a lab can be built; under CI (CI set) it
// fails instead, so that a broken runner is not a silent pass.
func needLab(t *testing.T) {
	t.Helper()
	err := Available()
	if err == nil {
		RemoveStale("lt")
		return
	}
	if os.Getenv("CI") != "" {
		t.Fatal(err)
	}
	t.Skip(err)
}

// sweep removes every namespace whose name starts with prefix, whatever
// the test got to: the cleanup of last resort.
func sweep(t *testing.T, prefix string) {
	t.Cleanup(func() {
		for _, ns := range namespacesWith(prefix) {
			KillIn(ns)
			_ = ip("netns", "delete", ns)
		}
	})
}

func namespacesWith(prefix string) []string {
	entries, _ := os.ReadDir(runDir)
	var out []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), prefix) {
			out = append(out, e.Name())
		}
	}
	return out
}

func exists(ns string) bool {
	_, err := os.Stat(filepath.Join(runDir, ns))
	return err == nil
}

func TestPlan(t *testing.T) {
	l, err := plan(Options{Prefix: "x-", Nodes: 2, Client: true, Pods: true})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, h := range l.Hosts() {
		got = append(got, h.Name+" "+h.NS+" "+h.Addr.String()+" "+h.Port)
	}
	want := []string{
		"n0 x-n0 10.99.0.11 p-n0",
		"n1 x-n1 10.99.0.12 p-n1",
		"c x-c 10.99.0.100 p-c",
		"pods x-pods 10.99.0.50 p-pods",
	}
	if !slices.Equal(got, want) || l.Switch != "x-sw" || l.Subnet != DefaultSubnet {
		t.Errorf("plan = %s %s %v, want x-sw %s %v", l.Switch, l.Subnet, got, DefaultSubnet, want)
	}

	l, err = plan(Options{Prefix: "x", Nodes: 1, Subnet: netip.MustParsePrefix("10.7.3.9/16")})
	if err != nil {
		t.Fatal(err)
	}
	if l.Subnet.String() != "10.7.0.0/16" || l.Nodes[0].Addr.String() != "10.7.0.11" || l.Client != nil || l.Pods != nil {
		t.Errorf("custom subnet: %s, node %s, client %v, pods %v", l.Subnet, l.Nodes[0].Addr, l.Client, l.Pods)
	}

	for _, tc := range []struct {
		opts Options
		want string
	}{
		{Options{Prefix: ""}, "prefix"},
		{Options{Prefix: "-x"}, "prefix"},
		{Options{Prefix: "Pier"}, "prefix"},
		{Options{Prefix: "a/b"}, "prefix"},
		{Options{Prefix: "abcdefghijklmnopq"}, "prefix"},
		{Options{Prefix: "x", Nodes: -1}, "nodes"},
		{Options{Prefix: "x", Nodes: 40}, "40 nodes: want 0 to 39"},
		{Options{Prefix: "x", Subnet: netip.MustParsePrefix("fd00::/64")}, "IPv4"},
		{Options{Prefix: "x", Subnet: netip.MustParsePrefix("10.99.0.0/25")}, "/24 or wider"},
	} {
		if _, err := plan(tc.opts); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("plan(%+v) error = %v, want one about %q", tc.opts, err, tc.want)
		}
		// Build refuses the same options before touching anything.
		if _, err := Build(tc.opts); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Build(%+v) error = %v, want one about %q", tc.opts, err, tc.want)
		}
	}
}

// reach reports whether from can open TCP to port 9 of to: a closed port
// answers with a reset when the host is reachable, and nothing at all
// when it is not.
func reach(t *testing.T, from *Host, to netip.Addr) bool {
	t.Helper()
	cmd := from.Command(t.Context(), "bash", "-c", "timeout 1 bash -c 'exec 3<>/dev/tcp/"+to.String()+"/9' 2>&1")
	out, _ := cmd.CombinedOutput()
	return strings.Contains(string(out), "refused")
}

// TestBuild builds every kind of host and checks the segment: hosts reach
// each other and nothing else, a link cut isolates one host, and Remove
// leaves no namespace and no process behind.
func TestBuild(t *testing.T) {
	needLab(t)
	prefix := testPrefix("")
	sweep(t, prefix)
	l, err := Build(Options{Prefix: prefix, Nodes: 2, Client: true, Pods: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Remove)
	hosts := l.Hosts()
	if len(hosts) != 4 || l.Pods == nil || l.Client == nil {
		t.Fatalf("hosts = %v", hosts)
	}
	for _, ns := range l.namespaces() {
		if !exists(ns) {
			t.Fatalf("namespace %s missing", ns)
		}
	}

	for _, from := range hosts {
		for _, to := range hosts {
			if from != to && !reach(t, from, to.Addr) {
				t.Errorf("%s does not reach %s at %s", from.Name, to.Name, to.Addr)
			}
		}
		links, err := exec.Command("ip", "-n", from.NS, "-o", "link", "show").Output()
		if err != nil {
			t.Fatal(err)
		}
		if n := strings.Count(string(links), "\n"); n != 2 || !strings.Contains(string(links), ": eth0@") {
			t.Errorf("%s links:\n%s\nwant only lo and eth0", from.Name, links)
		}
		if routes, _ := exec.Command("ip", "-n", from.NS, "route", "show", "default").Output(); len(routes) > 0 {
			t.Errorf("%s has a default route: %s", from.Name, routes)
		}
	}
	if reach(t, l.Client, netip.MustParseAddr("10.98.0.1")) {
		t.Error("an address off the segment was reachable")
	}
	if got := l.Holders(l.Pods.Addr); !slices.Equal(got, []string{"pods"}) {
		t.Errorf("Holders(%s) = %v, want [pods]", l.Pods.Addr, got)
	}
	if got := l.Holders(netip.MustParseAddr("10.99.0.200")); len(got) != 0 {
		t.Errorf("Holders(unused address) = %v", got)
	}

	n1 := l.Nodes[1]
	if err := n1.SetLink(false); err != nil {
		t.Fatal(err)
	}
	if reach(t, l.Client, n1.Addr) || reach(t, l.Nodes[0], n1.Addr) {
		t.Error("a host whose link is down was reachable")
	}
	if !reach(t, l.Client, l.Nodes[0].Addr) {
		t.Error("cutting n1 cut the client from n0")
	}
	if err := n1.SetLink(true); err != nil {
		t.Fatal(err)
	}
	if !eventually(func() bool { return reach(t, l.Client, n1.Addr) }) {
		t.Error("a host whose link is back up stayed unreachable")
	}

	var sleepers []*exec.Cmd
	for _, h := range []*Host{l.Nodes[0], l.Pods} {
		cmd := h.Command(t.Context(), "sleep", "60")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		sleepers = append(sleepers, cmd)
		// ip netns exec enters the namespace after Start returns; a
		// process not in it yet is not the lab's to kill.
		if !eventually(func() bool { return slices.Contains(pidsIn(filepath.Join(runDir, h.NS)), cmd.Process.Pid) }) {
			t.Fatalf("sleep never showed up in %s", h.NS)
		}
	}
	l.Remove()
	l.Remove() // a second call does nothing
	for _, cmd := range sleepers {
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			var exitErr *exec.ExitError
			if !errors.As(err, &exitErr) {
				t.Errorf("sleep in the lab: %v, want killed", err)
			}
		case <-time.After(5 * time.Second):
			t.Error("a process in the lab survived Remove")
		}
	}
	if left := namespacesWith(prefix); len(left) > 0 {
		t.Errorf("namespaces left after Remove: %v", left)
	}
}

// TestBuildExisting: a namespace of the same name is reported by name and
// left alone, and nothing else is created.
func TestBuildExisting(t *testing.T) {
	needLab(t)
	prefix := testPrefix("e-")
	sweep(t, prefix)
	if err := ip("netns", "add", prefix+"n1"); err != nil {
		t.Fatal(err)
	}
	_, err := Build(Options{Prefix: prefix, Nodes: 2})
	want := "namespace " + prefix + "n1 exists"
	if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "ip netns delete "+prefix+"n1") {
		t.Fatalf("Build error = %v, want %q and how to remove it", err, want)
	}
	if left := namespacesWith(prefix); !slices.Equal(left, []string{prefix + "n1"}) {
		t.Errorf("namespaces after a refused Build = %v, want only the existing one", left)
	}
}

// TestBuildFailureRemoves: a failure halfway removes what was created.
func TestBuildFailureRemoves(t *testing.T) {
	needLab(t)
	prefix := testPrefix("f-")
	sweep(t, prefix)
	l, err := plan(Options{Prefix: prefix, Nodes: 2, Client: true})
	if err != nil {
		t.Fatal(err)
	}
	// The zero Addr makes `ip addr add` fail on the second node, after the
	// switch and the first node exist.
	l.Nodes[1].Addr = netip.Addr{}
	err = l.build()
	if err == nil || !strings.Contains(err.Error(), "addr add") {
		t.Fatalf("build error = %v, want the failed ip addr add", err)
	}
	if left := namespacesWith(prefix); len(left) > 0 {
		t.Errorf("namespaces left after a failed build: %v", left)
	}
}

// eventually polls cond for up to 5 s.
func eventually(cond func() bool) bool {
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if cond() {
			return true
		}
	}
	return false
}

// TestHostLink: with HostLink the lab's hosts reach a server of the
// builder listening on .1, the builder reaches them, the link forwards
// nothing, and Remove deletes it.
func TestHostLink(t *testing.T) {
	needLab(t)
	prefix := testPrefix("h-")
	sweep(t, prefix)
	l, err := Build(Options{Prefix: prefix, Nodes: 1, HostLink: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Remove)
	t.Cleanup(func() { _ = ip("link", "delete", "dev", prefix+"host") })
	if l.HostLink != prefix+"host" || l.HostAddr.String() != "10.99.0.1" {
		t.Fatalf("host link %q at %s, want %shost at 10.99.0.1", l.HostLink, l.HostAddr, prefix)
	}
	ln, err := net.Listen("tcp", l.HostAddr.String()+":0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_, _ = c.Write([]byte("hello\n"))
			c.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	out, err := l.Nodes[0].Command(t.Context(), "bash", "-c",
		"timeout 2 bash -c 'exec 3<>/dev/tcp/"+l.HostAddr.String()+"/"+strconv.Itoa(port)+"; cat <&3'").CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "hello" {
		t.Errorf("n0 → the builder's server on %s:%d: %v %q", l.HostAddr, port, err, out)
	}
	c, err := net.DialTimeout("tcp", l.Nodes[0].Addr.String()+":9", time.Second)
	if err == nil {
		c.Close()
	}
	if err == nil || !strings.Contains(err.Error(), "refused") {
		t.Errorf("the builder → n0 port 9: %v, want connection refused (reached, nothing listens)", err)
	}
	fwd, err := os.ReadFile("/proc/sys/net/ipv4/conf/" + l.HostLink + "/forwarding")
	if err != nil || strings.TrimSpace(string(fwd)) != "0" {
		t.Errorf("forwarding on %s = %q (%v), want 0", l.HostLink, fwd, err)
	}
	if routes, _ := exec.Command("ip", "-n", l.Nodes[0].NS, "route", "show", "default").Output(); len(routes) > 0 {
		t.Errorf("n0 has a default route: %s", routes)
	}
	l.Remove()
	if ip("link", "show", "dev", prefix+"host") == nil {
		t.Errorf("link %shost still exists after Remove", prefix)
	}
	if _, err := plan(Options{Prefix: "abcdefghijkl", HostLink: true}); err == nil || !strings.Contains(err.Error(), "too long") {
		t.Errorf("plan with a 12-character prefix and a host link: %v, want too long", err)
	}
}

// TestAddHost adds a neighbour to a built lab: it reaches the nodes, its
// name and address must be free, and Remove deletes it with the rest.
func TestAddHost(t *testing.T) {
	needLab(t)
	prefix := testPrefix("a")
	sweep(t, prefix)
	l, err := Build(Options{Prefix: prefix, Nodes: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Remove)
	x, err := l.AddHost("x", 66)
	if err != nil {
		t.Fatal(err)
	}
	if x.NS != prefix+"x" || x.Addr.String() != "10.99.0.66" || !exists(x.NS) {
		t.Fatalf("added host %+v", x)
	}
	if !reach(t, x, l.Nodes[0].Addr) {
		t.Errorf("the added host does not reach the node")
	}
	if got := l.Hosts(); got[len(got)-1] != x {
		t.Errorf("Hosts() does not list the added host last")
	}
	for name, num := range map[string]int{"x": 67, "y": 11, "Bad": 68, "z": 255} {
		if _, err := l.AddHost(name, num); err == nil {
			t.Errorf("AddHost(%q, %d) succeeded", name, num)
		}
	}
	l.Remove()
	if exists(x.NS) {
		t.Errorf("Remove left the added host's namespace")
	}
}
