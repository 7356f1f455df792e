//go:build linux

package ecmp

import (
	"bufio"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"pier.dev/pier/internal/netnsdo"
)

// flow is one client connection to the VIP.
type flow struct {
	c       net.Conn
	r       *bufio.Reader
	sport   int
	ep, via string // the endpoint that took it, the node that forwarded it
	node    string // the node the router sent it to when it began
}

// dial opens a connection from the client namespace and reads the
// endpoint's greeting.
func dial(timeout time.Duration) (*flow, error) {
	var c net.Conn
	err := netnsdo.Do(clientNS, func() (err error) {
		d := net.Dialer{Timeout: timeout}
		c, err = d.Dial("tcp", net.JoinHostPort(vip, fmt.Sprint(port)))
		return err
	})
	if err != nil {
		return nil, err
	}
	f := &flow{c: c, r: bufio.NewReader(c), sport: c.LocalAddr().(*net.TCPAddr).Port}
	_ = c.SetDeadline(time.Now().Add(timeout))
	line, err := f.r.ReadString('\n')
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("greeting: %w", err)
	}
	if fields := strings.Fields(line); len(fields) == 2 {
		f.ep, f.via = fields[0], fields[1]
	}
	return f, nil
}

// ping sends a line on an established flow and waits for its echo.
func (f *flow) ping(timeout time.Duration) error {
	_ = f.c.SetDeadline(time.Now().Add(timeout))
	if _, err := f.c.Write([]byte("ping\n")); err != nil {
		return err
	}
	line, err := f.r.ReadString('\n')
	if err != nil {
		return err
	}
	if line != "ping\n" {
		return fmt.Errorf("echo %q", line)
	}
	return nil
}

// request is one short connection: greeting, one echo, close.
func request(timeout time.Duration) (*flow, error) {
	f, err := dial(timeout)
	if err != nil {
		return nil, err
	}
	defer f.c.Close()
	return f, f.ping(timeout)
}

// load runs requests back to back, two at a time, until stopped.
type load struct {
	stop        chan struct{}
	wg          sync.WaitGroup
	ok, failed  atomic.Int64
	mu          sync.Mutex
	lastFailure time.Time
	firstErr    error
}

func startLoad(timeout time.Duration) *load {
	l := &load{stop: make(chan struct{})}
	for range 2 {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for {
				select {
				case <-l.stop:
					return
				default:
				}
				if _, err := request(timeout); err != nil {
					l.failed.Add(1)
					l.mu.Lock()
					l.lastFailure = time.Now()
					if l.firstErr == nil {
						l.firstErr = err
					}
					l.mu.Unlock()
					continue
				}
				l.ok.Add(1)
			}
		}()
	}
	return l
}

func (l *load) end() {
	close(l.stop)
	l.wg.Wait()
}

// establish opens n long-lived flows; each notes the node that forwarded
// it (the endpoint sees that node's address: masquerade).
func (w *world) establish(t *testing.T, n int) []*flow {
	t.Helper()
	var out []*flow
	for range n {
		f, err := dial(2 * time.Second)
		if err != nil {
			t.Fatalf("establish: %v", err)
		}
		f.node = f.via
		t.Cleanup(func() { f.c.Close() })
		out = append(out, f)
	}
	for _, f := range out {
		if err := f.ping(2 * time.Second); err != nil {
			t.Fatalf("established flow from port %d on %s: %v", f.sport, f.node, err)
		}
	}
	return out
}

// checkFlows pings every flow and sorts the broken ones by whether the
// router now sends them to another node than the one they began on.
func (w *world) checkFlows(t *testing.T, flows []*flow) (movedBroken, moved, stayedBroken, stayed int, err error) {
	t.Helper()
	for i := range maxNodes {
		seenPorts(t, i)
	}
	arrived(t)
	failed := map[*flow]error{}
	for _, f := range flows {
		if perr := f.ping(2 * time.Second); perr != nil {
			failed[f] = perr
		}
	}
	seen := map[int]map[int]bool{}
	for i := range maxNodes {
		seen[i] = seenPorts(t, i)
	}
	atEndpoint := arrived(t)
	// clean counts the moved flows the node they went to had no
	// conntrack entry for, and cleanSame those of them that reached the
	// endpoint they began on.
	sameEndpoint, clean, cleanSame := 0, 0, 0
	states := map[string]map[int]string{}
	for i := range maxNodes {
		states[nodeAddr(i)] = conntrackStates(i)
	}
	// What conntrack keeps of a moved flow, on the node it left and on
	// the one it went to.
	left, went := map[string]int{}, map[string]int{}
	for _, f := range flows {
		now := ""
		for i := range maxNodes {
			if seen[i][f.sport] && (now == "" || nodeAddr(i) != f.node) {
				now = nodeAddr(i)
			}
		}
		perr := failed[f]
		if now != f.node {
			moved++
			if perr != nil {
				movedBroken++
			}
			same := atEndpoint[fmt.Sprintf("%s:%d", f.ep, f.sport)]
			if same {
				sameEndpoint++
			}
			left[or(states[f.node][f.sport], "none")]++
			if now != "" {
				went[or(states[now][f.sport], "none")]++
				if states[now][f.sport] == "" {
					clean++
					if same {
						cleanSame++
					}
				}
			}
			continue
		}
		stayed++
		if perr != nil {
			stayedBroken++
			if err == nil {
				err = fmt.Errorf("flow from port %d on %s: %w", f.sport, f.node, perr)
			}
		}
	}
	t.Logf("%d of %d flows moved to another node reached the endpoint they began on; "+
		"their conntrack entries on the node they left: %v, on the node they went to: %v", sameEndpoint, moved, left, went)
	// A moved flow whose client port an earlier connection through the
	// node it went to used still finds that connection's conntrack entry
	// there (TIME_WAIT for 2 minutes, CLOSE, or one the client's port
	// reuse left ESTABLISHED), and conntrack sends it to that entry's
	// endpoint: an artefact of one client making thousands of
	// connections here (5 of 77 in one loaded CI run, 9 of 68 in
	// another). The choice of endpoint is judged on the flows the node
	// had no entry for: nodes that picked differently would send a third
	// of them or more elsewhere.
	t.Logf("of the %d moved flows the node they went to had no entry for, %d reached the endpoint they began on", clean, cleanSame)
	if clean > 0 && cleanSame*100 < clean*90 {
		t.Errorf("%d of %d flows moved to a node without an entry for them were sent to another endpoint", clean-cleanSame, clean)
	}
	return
}

func or(s, otherwise string) string {
	if s == "" {
		return otherwise
	}
	return s
}

// newConnections makes n requests, each of which must succeed.
func newConnections(t *testing.T, n int) {
	t.Helper()
	for range n {
		// 3 s: a SYN lost while the router's next hops change is sent
		// again after 1 s, as a client's kernel does.
		if _, err := request(3 * time.Second); err != nil {
			t.Fatalf("a new connection after the change: %v", err)
		}
	}
}

// TestECMPWithBird runs the native provider's ECMP mode against bird2
// with multipath: three nodes advertise the VIP with equal preference and
// DNAT to the same endpoints with the same Maglev table; spreading over
// 3,000 new connections; a node added and one drained under load; one
// node's link cut.
func TestECMPWithBird(t *testing.T) {
	w := newWorld(t, 3)

	t.Run("same table on every node", func(t *testing.T) {
		if got := sysctl(0, "net.netfilter.nf_conntrack_tcp_loose"); got != "1" {
			t.Errorf("nf_conntrack_tcp_loose in a node namespace is %q: a node would drop a flow the router moves to it", got)
		}
		var first string
		for i := range 3 {
			out, err := exec.Command("ip", "netns", "exec", nodeNS(i), "nft", "list", "table", "inet", "pier_native").CombinedOutput()
			if err != nil {
				t.Fatalf("node %d: %v: %s", i, err, out)
			}
			if !strings.Contains(string(out), "jhash ip saddr . tcp sport . ip daddr . tcp dport mod 251") {
				t.Fatalf("node %d does not pick by a hash of the flow:\n%s", i, out)
			}
			if i == 0 {
				first = string(out)
			} else if string(out) != first {
				t.Errorf("node %d's table differs from node 0's", i)
			}
		}
	})

	t.Run("spread", func(t *testing.T) {
		byNode, byEP := map[string]int{}, map[string]int{}
		const n = 3000
		for range n {
			f, err := request(2 * time.Second)
			if err != nil {
				t.Fatalf("request: %v", err)
			}
			byNode[f.via]++
			byEP[f.ep]++
		}
		t.Logf("3,000 new connections: by node %v, by endpoint %v", byNode, byEP)
		for i := range 3 {
			if got := byNode[nodeAddr(i)]; got < n/3*85/100 || got > n/3*115/100 {
				t.Errorf("node %d took %d of %d connections, want %d±15%%", i, got, n, n/3)
			}
		}
		for i := range 3 {
			t.Logf("node %d: %d conntrack entries for the VIP", i, conntrackEntries(i))
		}
	})

	t.Run("node added under load", func(t *testing.T) {
		flows := w.establish(t, 150)
		l := startLoad(2 * time.Second)
		start := time.Now()
		w.startNode(3)
		took := w.waitPaths(4, 15*time.Second)
		time.Sleep(300 * time.Millisecond)
		l.end()
		movedBroken, moved, stayedBroken, stayed, err := w.checkFlows(t, flows)
		t.Logf("node 3 added: 4 next hops %s after its start (%s total); %d requests, %d failed (%v); "+
			"established flows: %d of %d moved by the router to another node, %d of them broken; %d of %d stayed, %d broken; conntrack on node 3: %d",
			took.Round(time.Millisecond), time.Since(start).Round(time.Millisecond), l.ok.Load(), l.failed.Load(), l.firstErr,
			moved, len(flows), movedBroken, stayed, len(flows), stayedBroken, conntrackEntries(3))
		// A request in flight when the router's route changes may be
		// moved to another node mid-way and be reset like an established
		// flow (see checkFlows): one per load worker at most.
		if l.failed.Load() > 2 {
			t.Errorf("%d requests failed while a node was added: %v", l.failed.Load(), l.firstErr)
		}
		newConnections(t, 300)
		if err != nil {
			t.Errorf("%d established flows broke that stayed on their node: %v", stayedBroken, err)
		}
	})

	t.Run("node drained under load", func(t *testing.T) {
		flows := w.establish(t, 150)
		l := startLoad(2 * time.Second)
		time.Sleep(200 * time.Millisecond)
		w.do(t, 3, "drain")
		took := w.waitPaths(3, 5*time.Second)
		time.Sleep(300 * time.Millisecond)
		l.end()
		movedBroken, moved, stayedBroken, stayed, err := w.checkFlows(t, flows)
		t.Logf("node 3 drained: router at 3 next hops after %s; %d requests, %d failed (%v); "+
			"established flows: %d of %d moved, %d of them broken; %d stayed, %d broken",
			took.Round(time.Millisecond), l.ok.Load(), l.failed.Load(), l.firstErr, moved, len(flows), movedBroken, stayed, stayedBroken)
		// A request in flight when the router's route changes may be
		// moved to another node mid-way and be reset like an established
		// flow (see checkFlows): one per load worker at most.
		if l.failed.Load() > 2 {
			t.Errorf("%d requests failed while a node drained: %v", l.failed.Load(), l.firstErr)
		}
		newConnections(t, 300)
		if err != nil {
			t.Errorf("%d established flows broke that stayed on their node: %v", stayedBroken, err)
		}
		w.do(t, 3, "stop")
	})

	t.Run("link cut", func(t *testing.T) {
		flows := w.establish(t, 150)
		onLost := 0
		for _, f := range flows {
			if f.node == nodeAddr(0) {
				onLost++
			}
		}
		l := startLoad(time.Second)
		time.Sleep(200 * time.Millisecond)
		cut := time.Now()
		// Node 0 goes silent: nothing in, nothing out, its interface up,
		// as when a switch port or the node itself fails.
		cmd := exec.Command("ip", "netns", "exec", nodeNS(0), "nft", "-f", "-")
		cmd.Stdin = strings.NewReader("table inet ecmp_cut {\n" +
			"  chain in { type filter hook prerouting priority -500; policy drop; }\n" +
			"  chain out { type filter hook output priority -500; policy drop; }\n}\n")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("cut: %v: %s", err, out)
		}
		took := w.waitPaths(2, 10*time.Second)
		time.Sleep(time.Second)
		l.end()
		l.mu.Lock()
		servedAgain := l.lastFailure.Sub(cut)
		l.mu.Unlock()
		if l.failed.Load() == 0 {
			servedAgain = 0
		}
		movedBroken, moved, stayedBroken, stayed, err := w.checkFlows(t, flows)
		t.Logf("node 0 cut off: router at 2 next hops after %s; last failed request %s after the cut; %d requests, %d failed; "+
			"established flows: %d of %d were on the lost node; %d moved, %d of them broken; %d stayed, %d broken",
			took.Round(time.Millisecond), servedAgain.Round(time.Millisecond), l.ok.Load(), l.failed.Load(),
			onLost, len(flows), moved, movedBroken, stayed, stayedBroken)
		if servedAgain > 5*time.Second {
			t.Errorf("new connections failed until %s after the cut; the hold time is 3 s", servedAgain)
		}
		newConnections(t, 300)
		if err != nil {
			t.Errorf("%d established flows broke that stayed on their node: %v", stayedBroken, err)
		}
	})
}
