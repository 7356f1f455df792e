//go:build linux

// Package ecmp tests the native provider's ECMP mode in the namespace
// lab: nodes running the agent's native driver and BGP mover (ECMP), a
// router namespace running bird2 that installs the nodes' routes as one
// multipath route in its kernel, a client namespace behind the router
// and a pods namespace holding the endpoints.
//
//	client ecmp-c 10.77.100.2 ─┐
//	pods   ecmp-p 10.77.101.11-13 ─ router ecmp-r (bird, multipath) ─ ecmp-n0..n3 10.77.<i+1>.2
//
// Every namespace name starts with ecmp-, so that the suite collides with
// no other.
package ecmp

import (
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/netnsdo"
	"pier.dev/pier/test/ecmplab"
)

const (
	routerNS = "ecmp-r"
	clientNS = "ecmp-c"
	podsNS   = "ecmp-p"
	clientIP = "10.77.100.2"
	vip      = "10.77.200.1"
	port     = 80
	// maxNodes is how many node namespaces the world can hold.
	maxNodes = 4
)

var endpoints = []string{"10.77.101.11", "10.77.101.12", "10.77.101.13"}

func TestMain(m *testing.M) {
	if os.Getenv(ecmplab.NodeEnv) != "" {
		os.Exit(ecmplab.NodeMain())
	}
	os.Exit(m.Run())
}

func nodeNS(i int) string     { return fmt.Sprintf("ecmp-n%d", i) }
func nodeAddr(i int) string   { return fmt.Sprintf("10.77.%d.2", i+1) }
func routerAddr(i int) string { return fmt.Sprintf("10.77.%d.1", i+1) }

// world is the lab.
type world struct {
	t     *testing.T
	dir   string
	sock  string
	nodes map[int]*ecmplab.Node
	lb    model.LoadBalancer
	// resilient: bird installs nothing; the test keeps the router's route
	// to the VIP as a resilient next-hop group of the nodes bird has
	// routes from (resilient.go).
	resilient bool
	// bird is the router's bird process, birdConf its configuration.
	bird     *exec.Cmd
	birdConf string
	// bfd: bird and every node run BFD (bird's `bfd on`).
	bfd bool
}

// worldOptions shape a world.
type worldOptions struct {
	resilient bool // see world.resilient
	bfd       bool // see world.bfd
}

// do sends node i a command (ecmplab.NodeMain).
func (w *world) do(t *testing.T, i int, cmd string) {
	t.Helper()
	if err := w.nodes[i].Do(cmd); err != nil {
		t.Fatal(err)
	}
}

func needed(t *testing.T, what string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("needs %s", what)
	}
	t.Skipf("needs %s", what)
}

func run(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v: %s", strings.Join(args, " "), err, out)
	}
}

func allNS() []string {
	out := []string{routerNS, clientNS, podsNS}
	for i := range maxNodes {
		out = append(out, nodeNS(i))
	}
	return out
}

// link connects namespace ns (eth0, addr) to the router (dev, raddr).
func link(t *testing.T, ns, dev, addr, raddr string, extra ...string) {
	run(t, "ip", "netns", "add", ns)
	run(t, "ip", "-n", ns, "link", "set", "lo", "up")
	run(t, "ip", "-n", routerNS, "link", "add", dev, "type", "veth", "peer", "name", "eth0", "netns", ns)
	run(t, "ip", "-n", routerNS, "addr", "add", raddr+"/24", "dev", dev)
	run(t, "ip", "-n", routerNS, "link", "set", dev, "up")
	run(t, "ip", "-n", ns, "addr", "add", addr+"/24", "dev", "eth0")
	for _, a := range extra {
		run(t, "ip", "-n", ns, "addr", "add", a+"/24", "dev", "eth0")
	}
	run(t, "ip", "-n", ns, "link", "set", "eth0", "up")
	run(t, "ip", "-n", ns, "route", "add", "default", "via", raddr)
}

// newWorld builds the namespaces, bird and the endpoints, and starts
// nodes 0..n-1.
func newWorld(t *testing.T, n int) *world { return newWorldOf(t, n, worldOptions{}) }

func newWorldOf(t *testing.T, n int, opts worldOptions) *world {
	resilient := opts.resilient
	t.Helper()
	if os.Geteuid() != 0 {
		needed(t, "root")
	}
	for _, tool := range []string{"ip", "bird", "birdc", "nft"} {
		if _, err := exec.LookPath(tool); err != nil {
			needed(t, tool+" (hack/deps.sh installs bird2, nftables, iproute2)")
		}
	}
	cleanup := func() {
		for _, ns := range allNS() {
			_ = exec.Command("ip", "netns", "del", ns).Run()
		}
	}
	cleanup()
	t.Cleanup(cleanup)
	w := &world{t: t, dir: t.TempDir(), nodes: map[int]*ecmplab.Node{}, resilient: resilient, bfd: opts.bfd}
	run(t, "ip", "netns", "add", routerNS)
	run(t, "ip", "-n", routerNS, "link", "set", "lo", "up")
	// The router forwards and hashes a flow's addresses and ports onto
	// the multipath route's next hops (policy 1: layer 4), as an ECMP
	// router in front of load balancers must: with the default (layer 3)
	// every flow of one client would go to one node.
	run(t, "ip", "netns", "exec", routerNS, "sysctl", "-qw", "net.ipv4.ip_forward=1", "net.ipv4.fib_multipath_hash_policy=1")
	link(t, clientNS, "rc", clientIP, "10.77.100.1")
	link(t, podsNS, "rp", endpoints[0], "10.77.101.1", endpoints[1:]...)
	for i := range maxNodes {
		link(t, nodeNS(i), fmt.Sprintf("r%d", i), nodeAddr(i), routerAddr(i))
		run(t, "ip", "netns", "exec", nodeNS(i), "sysctl", "-qw", "net.ipv4.ip_forward=1")
		nftIn(t, nodeNS(i), seenTable)
	}
	w.startBird()
	w.startEndpoints()
	w.lb = model.LoadBalancer{UUID: "0e0c0f00-0000-4000-8000-000000000001", Name: "default/ecmp", Provider: model.ProviderNative,
		VIP: vip, Listeners: []model.Listener{{Name: "tcp-80", Protocol: model.ProtocolTCP, Port: port, DefaultPoolID: "p"}},
		Placement: model.Placement{Active: "n0", Standby: "n1", ECMP: []string{"n0", "n1", "n2", "n3"}}}
	pool := model.Pool{ID: "p", Name: "default_ecmp_80"}
	for _, ep := range endpoints {
		pool.Members = append(pool.Members, model.Member{Address: ep, Port: 8080, Weight: 1})
	}
	w.lb.Pools = []model.Pool{pool}
	for i := range n {
		w.startNode(i)
	}
	if resilient {
		w.waitBirdRoutes(n, 30*time.Second)
		w.resilientGroup(n)
		return w
	}
	w.waitPaths(n, 15*time.Second)
	return w
}

// startBird runs bird in the router namespace: an iBGP session with each
// node (hold time 3 s, the least BGP allows; with BFD, `bfd on` and a bfd
// protocol at the nodes' 100 ms × 3) and its kernel protocol merging the
// equal best routes into one multipath route (merge paths on).
func (w *world) startBird() {
	t := w.t
	var peers []ecmplab.BirdPeer
	for i := range maxNodes {
		peers = append(peers, ecmplab.BirdPeer{Name: fmt.Sprintf("n%d", i), Local: routerAddr(i), Neighbor: nodeAddr(i)})
	}
	conf := ecmplab.BirdConfig("10.77.100.1", peers, !w.resilient, w.bfd)
	w.birdConf = filepath.Join(w.dir, "bird.conf")
	w.sock = filepath.Join(w.dir, "bird.ctl")
	if err := os.WriteFile(w.birdConf, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if w.bird != nil {
			_ = w.bird.Process.Kill()
			_ = w.bird.Wait()
		}
	})
	w.runBird()
}

// runBird starts bird on its configuration and returns once it answers
// on its control socket.
func (w *world) runBird() {
	t := w.t
	bird := exec.Command("ip", "netns", "exec", routerNS, "bird", "-f", "-c", w.birdConf, "-s", w.sock, "-P", filepath.Join(w.dir, "bird.pid"))
	bird.Stderr = os.Stderr
	if err := bird.Start(); err != nil {
		t.Fatal(err)
	}
	w.bird = bird
	waitFor(t, 5*time.Second, "bird to answer", func() bool { return strings.Contains(w.birdc("show", "status"), "Daemon is up") })
}

func (w *world) birdc(args ...string) string {
	out, _ := exec.Command("birdc", append([]string{"-s", w.sock}, args...)...).CombinedOutput()
	return string(out)
}

// startEndpoints listens on every endpoint in the pods namespace. A
// connection is greeted with "<endpoint> <peer address>" (the peer is
// the node that masqueraded it), then every line is echoed back.
func (w *world) startEndpoints() {
	t := w.t
	for _, ep := range endpoints {
		var ln net.Listener
		err := netnsdo.Do(podsNS, func() (err error) {
			ln, err = net.Listen("tcp", ep+":8080")
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = ln.Close() })
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				go func() {
					defer c.Close()
					peer, _, _ := net.SplitHostPort(c.RemoteAddr().String())
					fmt.Fprintf(c, "%s %s\n", ep, peer)
					_, _ = io.Copy(c, c)
				}()
			}
		}()
	}
}

// startNode starts node i's process.
func (w *world) startNode(i int) {
	t := w.t
	cfg := ecmplab.NodeConfig{Name: fmt.Sprintf("n%d", i), Self: nodeAddr(i), Router: routerAddr(i),
		StateDir: filepath.Join(w.dir, fmt.Sprintf("n%d", i)), LB: w.lb, Log: w.nodeLog(i), BFD: w.bfd}
	p, err := ecmplab.StartNode(nodeNS(i), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Kill)
	w.nodes[i] = p
}

// nodeLog is the file node i logs to at Info.
func (w *world) nodeLog(i int) string { return filepath.Join(w.dir, fmt.Sprintf("n%d.log", i)) }

var nexthopRE = regexp.MustCompile(`nexthop via (\S+)|^\S+ via (\S+)`)

// paths are the next hops of the router's kernel route to the VIP.
func (w *world) paths() []string {
	out, err := exec.Command("ip", "-n", routerNS, "route", "show", vip).CombinedOutput()
	if err != nil {
		return nil
	}
	var hops []string
	for _, line := range strings.Split(string(out), "\n") {
		if m := nexthopRE.FindStringSubmatch(strings.TrimSpace(line)); m != nil {
			hops = append(hops, m[1]+m[2])
		}
	}
	return hops
}

// waitPaths waits until the router's route has n next hops and returns
// how long that took.
func (w *world) waitPaths(n int, limit time.Duration) time.Duration {
	w.t.Helper()
	return waitFor(w.t, limit, fmt.Sprintf("%d next hops for %s", n, vip), func() bool { return len(w.paths()) == n })
}

// seenTable notes the client's source port of every packet a node gets
// for the VIP, before conntrack: which node the router sends a flow to.
// The namespace takes it with it.
//
// Its set eps notes the client's port and the endpoint of every packet
// the node forwards to an endpoint, after DNAT and before masquerade
// (which may change the port): which endpoint the node sends a flow to.
var seenTable = fmt.Sprintf(`table inet ecmp_seen {
  set ports { type inet_service; flags dynamic; size 65535; }
  set eps { type inet_service . ipv4_addr; flags dynamic; size 65535; }
  chain pre {
    type filter hook prerouting priority -400; policy accept;
    ip saddr %s ip daddr %s tcp dport %d update @ports { tcp sport }
  }
  chain post {
    type filter hook postrouting priority 99; policy accept;
    ip saddr %s tcp dport 8080 update @eps { tcp sport . ip daddr }
  }
}
`, clientIP, vip, port, clientIP)

// arrived are the client port:endpoint pairs the nodes sent packets of
// to an endpoint since the last call, which forgets them.
func arrived(t *testing.T) map[string]bool {
	t.Helper()
	got := map[string]bool{}
	for i := range maxNodes {
		out, err := exec.Command("ip", "netns", "exec", nodeNS(i), "nft", "list", "set", "inet", "ecmp_seen", "eps").Output()
		if err != nil {
			t.Fatalf("node %d: list endpoints: %v", i, err)
		}
		nftIn(t, nodeNS(i), "flush set inet ecmp_seen eps\n")
		for _, m := range arrivedRE.FindAllStringSubmatch(string(out), -1) {
			got[m[2]+":"+m[1]] = true
		}
	}
	return got
}

var arrivedRE = regexp.MustCompile(`(\d+) \. (\d+\.\d+\.\d+\.\d+)`)

func nftIn(t *testing.T, ns, text string) {
	t.Helper()
	cmd := exec.Command("ip", "netns", "exec", ns, "nft", "-f", "-")
	cmd.Stdin = strings.NewReader(text)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("nft in %s: %v: %s", ns, err, out)
	}
}

// seenPorts are the client ports node i got packets from since the last
// call, which forgets them.
func seenPorts(t *testing.T, i int) map[int]bool {
	t.Helper()
	out, err := exec.Command("ip", "netns", "exec", nodeNS(i), "nft", "-j", "list", "set", "inet", "ecmp_seen", "ports").Output()
	if err != nil {
		t.Fatalf("node %d: list seen ports: %v", i, err)
	}
	nftIn(t, nodeNS(i), "flush set inet ecmp_seen ports\n")
	ports := map[int]bool{}
	if m := portRE.FindStringSubmatch(string(out)); m != nil {
		for _, f := range strings.Split(m[1], ",") {
			p, _ := strconv.Atoi(strings.TrimSpace(f))
			ports[p] = true
		}
	}
	return ports
}

// portRE finds the elements of the set in nft's JSON.
var portRE = regexp.MustCompile(`"elem":\s*\[([0-9, ]+)\]`)

func waitFor(t *testing.T, limit time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for time.Since(start) < limit {
		if cond() {
			return time.Since(start)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no %s after %s", what, limit)
	return 0
}

// conntrackEntries counts the conntrack entries of node i for the VIP.
func conntrackEntries(i int) int {
	out, err := exec.Command("ip", "netns", "exec", nodeNS(i), "cat", "/proc/net/nf_conntrack").Output()
	if err != nil {
		return -1
	}
	return strings.Count(string(out), "dst="+vip+" ")
}

// conntrackStates are the states of node i's conntrack entries for the
// client's flows to the VIP, by the client's port.
func conntrackStates(i int) map[int]string {
	out := map[int]string{}
	text, err := exec.Command("ip", "netns", "exec", nodeNS(i), "cat", "/proc/net/nf_conntrack").Output()
	if err != nil {
		return out
	}
	for _, line := range strings.Split(string(text), "\n") {
		if !strings.Contains(line, "src="+clientIP+" dst="+vip+" ") {
			continue
		}
		f := strings.Fields(line)
		m := sportRE.FindStringSubmatch(line)
		if len(f) > 5 && m != nil {
			p, _ := strconv.Atoi(m[1])
			out[p] = f[5]
		}
	}
	return out
}

var sportRE = regexp.MustCompile(`sport=(\d+)`)

// sysctl reads a sysctl in node i's namespace.
func sysctl(i int, name string) string {
	out, _ := exec.Command("ip", "netns", "exec", nodeNS(i), "sysctl", "-n", name).CombinedOutput()
	return strings.TrimSpace(string(out))
}
