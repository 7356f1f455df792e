package bfd

import (
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// The contract with a real neighbour: bird2's BFD in one namespace, a
// session of this package in another, a veth between them.
const (
	birdNS   = "h31b-bfd-r"
	nodeNS   = "h31b-bfd-n"
	birdAddr = "10.97.1.1"
	nodeAddr = "10.97.1.2"
)

func run(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v: %s", strings.Join(args, " "), err, out)
	}
}

func needed(t *testing.T, what string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("needs %s", what)
	}
	t.Skipf("needs %s", what)
}

// birdWorld makes the namespaces and starts bird with a static BFD
// session towards the node; it returns birdc and a function that kills
// bird.
func birdWorld(t *testing.T) (birdc func(...string) string, kill func()) {
	t.Helper()
	return birdWorldWith(t, "interval 100 ms; multiplier 3;")
}

// birdWorldWith is birdWorld with iface as the options of bird's
// interface "*" (its timers).
func birdWorldWith(t *testing.T, iface string) (birdc func(...string) string, kill func()) {
	t.Helper()
	if os.Geteuid() != 0 {
		needed(t, "root")
	}
	for _, tool := range []string{"ip", "bird", "birdc", "nft"} {
		if _, err := exec.LookPath(tool); err != nil {
			needed(t, tool+" (apt-get install bird2 iproute2 nftables)")
		}
	}
	cleanup := func() {
		for _, ns := range []string{birdNS, nodeNS} {
			_ = exec.Command("ip", "netns", "del", ns).Run()
		}
	}
	cleanup()
	t.Cleanup(cleanup)
	run(t, "ip", "netns", "add", birdNS)
	run(t, "ip", "netns", "add", nodeNS)
	run(t, "ip", "-n", birdNS, "link", "add", "vn", "type", "veth", "peer", "name", "eth0", "netns", nodeNS)
	run(t, "ip", "-n", birdNS, "addr", "add", birdAddr+"/24", "dev", "vn")
	run(t, "ip", "-n", nodeNS, "addr", "add", nodeAddr+"/24", "dev", "eth0")
	for _, ns := range []string{birdNS, nodeNS} {
		run(t, "ip", "-n", ns, "link", "set", "lo", "up")
	}
	run(t, "ip", "-n", birdNS, "link", "set", "vn", "up")
	run(t, "ip", "-n", nodeNS, "link", "set", "eth0", "up")
	dir := t.TempDir()
	conf := fmt.Sprintf("router id %s;\nprotocol device {}\n"+
		"protocol bfd {\n  interface \"*\" { %s };\n  neighbor %s dev \"vn\" local %s;\n}\n",
		birdAddr, iface, nodeAddr, birdAddr)
	confPath, sock := filepath.Join(dir, "bird.conf"), filepath.Join(dir, "bird.ctl")
	if err := os.WriteFile(confPath, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	bird := exec.Command("ip", "netns", "exec", birdNS, "bird", "-f", "-c", confPath, "-s", sock, "-P", filepath.Join(dir, "bird.pid"))
	bird.Stderr = os.Stderr
	if err := bird.Start(); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	kill = func() { once.Do(func() { _ = bird.Process.Kill(); _ = bird.Wait() }) }
	t.Cleanup(kill)
	birdc = func(args ...string) string {
		out, _ := exec.Command("birdc", append([]string{"-s", sock}, args...)...).CombinedOutput()
		return string(out)
	}
	waitFor(t, 5*time.Second, "bird to answer", func() bool { return strings.Contains(birdc("show", "status"), "Daemon is up") })
	return birdc, kill
}

// birdState is bird's state of its session with the node ("" none).
func birdState(birdc func(...string) string) string {
	for _, line := range strings.Split(birdc("show", "bfd", "sessions"), "\n") {
		if f := strings.Fields(line); len(f) >= 3 && f[0] == nodeAddr {
			return f[2]
		}
	}
	return ""
}

func waitFor(t *testing.T, limit time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for time.Since(start) < limit {
		if cond() {
			return time.Since(start)
		}
		time.Sleep(2 * time.Millisecond)
	}
	t.Fatalf("%s: not within %s", what, limit)
	return 0
}

// nft runs an nft script in ns.
func nft(t *testing.T, ns, script string) {
	t.Helper()
	cmd := exec.Command("ip", "netns", "exec", ns, "nft", "-f", "-")
	cmd.Stdin = strings.NewReader(script)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("nft in %s: %v: %s\n%s", ns, err, out, script)
	}
}

// changes collects a session's changes.
type changes struct {
	mu  sync.Mutex
	all []Change
	at  []time.Time
}

func (c *changes) add(ch Change) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.all, c.at = append(c.all, ch), append(c.at, time.Now())
}

// wait waits for a change out of Up (reported after the state changed,
// from the session's goroutine) and returns it.
func (c *changes) wait(t *testing.T, limit time.Duration, what string) Change {
	t.Helper()
	var ch Change
	waitFor(t, limit, what, func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		if len(c.all) > 0 && c.all[len(c.all)-1].From == Up {
			ch = c.all[len(c.all)-1]
			return true
		}
		return false
	})
	return ch
}

// TestBFDWithBird: the handshake with bird, each side seeing the other
// stop within the detection time (100 ms × 3), packets that arrive with
// a TTL under 255 dropped, and the admin-down of Close.
func TestBFDWithBird(t *testing.T) {
	birdc, kill := birdWorld(t)
	srv, err := Listen(Config{Netns: nodeNS})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	var seen changes
	sess, err := srv.Add(netip.MustParseAddr(birdAddr), SessionConfig{OnChange: seen.add})
	if err != nil {
		t.Fatal(err)
	}
	took := waitFor(t, 10*time.Second, "the session up on both sides", func() bool {
		return sess.State() == Up && birdState(birdc) == "Up"
	})
	t.Logf("up on both sides in %s: %s", took.Round(time.Millisecond), strings.TrimSpace(birdc("show", "bfd", "sessions")))
	if _, err := srv.Add(netip.MustParseAddr(birdAddr), SessionConfig{}); err == nil {
		t.Error("a second session with the same neighbour was accepted")
	}

	// The node stops sending: bird sees it within 300 ms of the last
	// packet and says Down, which this side takes (neighbor down).
	before := sess.Stats()
	cut := time.Now()
	nft(t, nodeNS, "table inet h31b { chain out { type filter hook output priority 0; udp dport 3784 drop; }; }")
	lost := waitFor(t, 2*time.Second, "bird to see the node gone", func() bool { return birdState(birdc) != "Up" })
	ch := seen.wait(t, time.Second, "this side to hear bird's down")
	t.Logf("node silent: bird down after %s; here: %s → %s (%s)", lost.Round(time.Millisecond), ch.From, ch.To, ch.Diag)
	// 300 ms after the last packet, which came before the cut; birdc is
	// a process per look, slow on a loaded machine.
	if lost > 450*time.Millisecond {
		t.Errorf("bird took %s to see the node silent, want 300 ms (+150 ms for the polling)", lost)
	}
	if ch.To != Down || ch.Diag != DiagNeighborDown {
		t.Errorf("this side's change %+v: want down, neighbor signaled down", ch)
	}
	// While not Up, this side sends the slow second.
	if d := time.Since(cut); d < 200*time.Millisecond {
		time.Sleep(200*time.Millisecond - d)
	}
	nft(t, nodeNS, "delete table inet h31b")
	waitFor(t, 10*time.Second, "the session back up", func() bool { return sess.State() == Up && birdState(birdc) == "Up" })
	if s := sess.Stats(); s.Received <= before.Received || s.Dropped != 0 {
		t.Errorf("stats %+v, before the cut %+v: want more received, none dropped", s, before)
	}

	// bird's packets now arrive one hop further (TTL 254): dropped, and
	// the session times out.
	nft(t, birdNS, "table ip h31b { chain out { type filter hook output priority 0; udp dport 3784 ip ttl set 254; }; }")
	waitFor(t, 2*time.Second, "this side down on TTL 254", func() bool { return sess.State() != Up })
	if s := sess.Stats(); s.Dropped == 0 || !strings.Contains(s.LastDrop, "TTL") {
		t.Errorf("stats %+v: want packets dropped for their TTL", s)
	}
	nft(t, birdNS, "delete table ip h31b")
	waitFor(t, 10*time.Second, "the session back up", func() bool { return sess.State() == Up && birdState(birdc) == "Up" })

	// bird dies: this side is down within bird's multiplier × interval.
	kill()
	ch = seen.wait(t, 2*time.Second, "this side to see bird gone")
	t.Logf("bird killed: down here %s after bird's last packet (%s)", ch.SinceLastPacket.Round(time.Millisecond), ch.Diag)
	if ch.Diag != DiagDetectExpired || ch.SinceLastPacket < 250*time.Millisecond || ch.SinceLastPacket > 350*time.Millisecond {
		t.Errorf("change %+v: want the detection time expired 300 ms after the last packet", ch)
	}
}

// TestBFDAdminDownWithBird: Close tells bird admin-down; bird's session
// goes down without a failure of its own.
func TestBFDAdminDownWithBird(t *testing.T) {
	birdc, _ := birdWorld(t)
	srv, err := Listen(Config{Netns: nodeNS})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	sess, err := srv.Add(netip.MustParseAddr(birdAddr), SessionConfig{})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the session up on both sides", func() bool { return sess.State() == Up && birdState(birdc) == "Up" })
	sess.Close()
	took := waitFor(t, time.Second, "bird to take the admin-down", func() bool { return birdState(birdc) == "Down" })
	t.Logf("admin-down: bird down after %s: %s", took.Round(time.Millisecond), strings.TrimSpace(birdc("show", "bfd", "sessions")))
	if took > 100*time.Millisecond {
		t.Errorf("bird took %s, want it at once (the admin-down packets)", took)
	}
}

// TestBFDSlowNeighbourWithBird: a neighbour that wants packets no faster
// than every 300 ms gets them so, though this side would send every 100
// ms; the session stays up on both sides through the change of rates
// (the Poll Sequences).
func TestBFDSlowNeighbourWithBird(t *testing.T) {
	birdc, _ := birdWorldWith(t, "min rx interval 300 ms; min tx interval 100 ms; multiplier 3;")
	srv, err := Listen(Config{Netns: nodeNS})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	sess, err := srv.Add(netip.MustParseAddr(birdAddr), SessionConfig{})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the session up on both sides", func() bool { return sess.State() == Up && birdState(birdc) == "Up" })
	time.Sleep(500 * time.Millisecond) // past the Poll Sequences
	before := sess.Stats()
	time.Sleep(3 * time.Second)
	after := sess.Stats()
	sent, received := after.Sent-before.Sent, after.Received-before.Received
	t.Logf("3 s up: sent %d (bird asks for 300 ms at the most), received %d (bird sends every 100 ms)", sent, received)
	// 225-300 ms apart: 10-14 in 3 s; at this side's 100 ms it would be 30-40.
	if sent < 9 || sent > 15 {
		t.Errorf("sent %d packets in 3 s, want 10-14 (every 225-300 ms)", sent)
	}
	if received < 25 {
		t.Errorf("received %d packets in 3 s, want about 30-40 (bird every 75-100 ms)", received)
	}
	if sess.State() != Up || birdState(birdc) != "Up" {
		t.Errorf("the session left up: here %s, bird %s", sess.State(), birdState(birdc))
	}
}
