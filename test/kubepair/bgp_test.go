//go:build linux

package kubepair

import (
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"pier.dev/pier/internal/model"
	"pier.dev/pier/test/harness"
)

// nodeASN is the agents' AS number in the BGP worlds; bgpHoldTime their
// sessions' hold time (the smallest BGP allows), which bounds how long a
// node cut off stays the router's choice.
const (
	nodeASN     = 65000
	bgpHoldTime = 3
)

// bird is the gateway router: bird2 in the client host's namespace,
// peering with both nodes and installing its best routes in the
// namespace's kernel table, so the client's requests follow them.
type bird struct {
	cmd  *exec.Cmd
	sock string
}

func (w *world) startBird() error {
	if _, err := exec.LookPath("bird"); err != nil {
		return fmt.Errorf("bird (apt-get install bird2): %w", err)
	}
	kernel := "protocol kernel { ipv4 { import none; export all; }; }\n"
	if w.ecmp {
		// Multipath: every node's equal route is a next hop of one
		// kernel route, flows hashed over them by their ports too.
		kernel = "protocol kernel { merge paths on; ipv4 { import none; export all; }; }\n"
	}
	conf := fmt.Sprintf("log stderr all;\ndebug protocols { states, events, routes };\nrouter id %s;\nprotocol device {}\n%s", w.lab.Client.Addr, kernel)
	for _, h := range w.lab.Nodes {
		conf += fmt.Sprintf("protocol bgp %s {\n  local %s as %d;\n  neighbor %s as %d;\n  direct;\n  passive on;\n"+
			"  hold time 3;\n  error wait time 1, 2;\n  graceful restart on;\n  ipv4 { import all; export none; gateway direct; };\n}\n",
			h.Name, w.lab.Client.Addr, w.routerASN, h.Addr, nodeASN)
	}
	dir := filepath.Join(w.dir, "bird")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	confPath := filepath.Join(dir, "bird.conf")
	if err := os.WriteFile(confPath, []byte(conf), 0o600); err != nil {
		return err
	}
	b := &bird{sock: filepath.Join(dir, "bird.ctl")}
	b.cmd = w.lab.Client.Command(w.t.Context(), "bird", "-f", "-c", confPath, "-s", b.sock, "-P", filepath.Join(dir, "bird.pid"))
	// Appended: a restarted bird (router_test.go) keeps its first run's lines.
	logFile, err := os.OpenFile(filepath.Join(w.dir, "bird.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer logFile.Close()
	b.cmd.Stdout, b.cmd.Stderr = logFile, logFile
	if err := b.cmd.Start(); err != nil {
		return err
	}
	w.bird = b
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(b.birdc("show", "status"), "Daemon is up") {
		if time.Now().After(deadline) {
			return fmt.Errorf("bird does not answer on %s", b.sock)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil
}

func (b *bird) birdc(args ...string) string {
	out, _ := exec.Command("birdc", append([]string{"-s", b.sock}, args...)...).CombinedOutput()
	return string(out)
}

func (b *bird) stop() {
	if b.cmd.Process != nil {
		_ = b.cmd.Process.Kill()
		_ = b.cmd.Wait()
	}
}

var birdVia = regexp.MustCompile(`via (\S+)`)

// best returns the next hop the router uses for addr and how many paths
// it has.
func (b *bird) best(addr netip.Addr) (netip.Addr, int) {
	all := b.birdc("show", "route", "for", addr.String(), "all")
	m := birdVia.FindStringSubmatch(b.birdc("show", "route", "for", addr.String(), "primary"))
	if m == nil {
		return netip.Addr{}, strings.Count(all, "unicast [")
	}
	via, _ := netip.ParseAddr(m[1])
	return via, strings.Count(all, "unicast [")
}

// waitBest waits until the router's best path for addr goes via node's
// address with paths paths, and returns when it saw that.
func (w *world) waitBest(addr netip.Addr, node string, paths int, limit time.Duration) (time.Time, error) {
	want := w.nodes[node].Addr
	deadline := time.Now().Add(limit)
	for {
		via, n := w.bird.best(addr)
		if via == want && (paths == 0 || n == paths) {
			return time.Now(), nil
		}
		if time.Now().After(deadline) {
			return time.Time{}, fmt.Errorf("the router's best path for %s is via %s (%d paths), want via %s (%s) with %d:\n%s",
				addr, via, n, want, node, paths, w.bird.birdc("show", "route", "all"))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestKubeBGP runs the pair with BGP instead of VRRP (the seeds' way):
// both nodes advertise the VIP and FIP to the gateway router, the active
// one preferred (iBGP, LOCAL_PREF 200/100); killing the active HAProxy
// withdraws its routes and the router sends the traffic to the standby,
// which keeps it when the HAProxy is back (no second move); killing the
// agent (not HAProxy) changes nothing for traffic (graceful restart keeps
// its routes); a cordon withdraws them.
func TestKubeBGP(t *testing.T) {
	if _, err := exec.LookPath("bird"); err != nil && os.Getenv("CI") != "true" {
		t.Skip("needs bird (apt-get install bird2)")
	}
	w := newWorldWith(t, nodeASN)
	lb, err := w.waitLB(2*time.Minute, "placed on two nodes, both advertising", func(lb *model.LoadBalancer) bool {
		r := bgpStates(lb)
		p := lb.Placement
		return p.Active != "" && p.Standby != "" && lb.VIP != "" && lb.FIP != "" &&
			r[p.Active] == model.BGPPreferred && r[p.Standby] == model.BGPAdvertised
	})
	if err != nil {
		t.Fatal(err)
	}
	vip, fip := netip.MustParseAddr(lb.VIP), netip.MustParseAddr(lb.FIP)
	active, standby := lb.Placement.Active, lb.Placement.Standby
	for _, a := range []netip.Addr{vip, fip} {
		if _, err := w.waitBest(a, active, 2, 20*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%s: VIP %s, FIP %s; the router: %s", lb.Name, vip, fip, strings.TrimSpace(w.bird.birdc("show", "route", "for", vip.String(), "all")))

	// serving is the node the router sends the traffic to, other the
	// one beside it: without --bgp-preempt the traffic stays where it
	// went until that node fails or drains.
	serving, other := active, standby

	t.Run("kill -9 the active HAProxy", func(t *testing.T) {
		p := w.probe(vip, recoveryTimeout)
		time.Sleep(500 * time.Millisecond)
		fault, n, err := w.killHAProxy(serving)
		if err != nil {
			p.Stop()
			t.Fatal(err)
		}
		switched, err := w.waitBest(vip, other, 0, 3*time.Second)
		if err != nil {
			p.Stop()
			t.Fatal(err)
		}
		time.Sleep(500 * time.Millisecond)
		samples := p.Stop()
		took := failover(t, "BGP HAProxy killed", samples, fault)
		t.Logf("BGP HAProxy killed: %d haproxy on %s; the router's best path via %s after %s; served again after %s; %s",
			n, serving, other, switched.Sub(fault).Round(time.Millisecond), took.Round(time.Millisecond), harness.Summary(samples))
		// The supervisor restarts HAProxy; the active node advertises
		// again, as a standby does: the standby took the preference over
		// and keeps the traffic (no second move), and both reports say so.
		if _, err := w.waitLB(20*time.Second, "the old active advertising again, the standby preferred", func(lb *model.LoadBalancer) bool {
			r := bgpStates(lb)
			return r[serving] == model.BGPAdvertised && r[other] == model.BGPPreferred
		}); err != nil {
			t.Fatal(err)
		}
		if _, err := w.waitBest(vip, other, 2, 10*time.Second); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		if via, paths := w.bird.best(vip); via != w.nodes[other].Addr || paths != 2 {
			t.Errorf("1 s after %s's HAProxy came back the router goes via %s with %d paths; want via %s with both (no second move)",
				serving, via, paths, other)
		}
		t.Logf("BGP HAProxy killed: %s's HAProxy back and advertising; the traffic stays on %s", serving, other)
		serving, other = other, serving
	})

	t.Run("kill -9 the serving agent", func(t *testing.T) {
		p := w.probe(vip, failureTimeout)
		time.Sleep(500 * time.Millisecond)
		killed := w.agents[serving].kill()
		time.Sleep(time.Second)
		if via, n := w.bird.best(vip); via != w.nodes[serving].Addr || n != 2 {
			t.Errorf("1 s after the agent died the router goes via %s with %d paths; want via %s with both kept (graceful restart)",
				via, n, serving)
		}
		if err := w.startAgent(serving); err != nil {
			p.Stop()
			t.Fatal(err)
		}
		time.Sleep(2 * time.Second)
		samples := p.Stop()
		if failed := harness.Failed(samples, time.Time{}, time.Now()); len(failed) > 0 {
			t.Errorf("%d requests failed while the agent restarted, first %+v", len(failed), failed[0])
		}
		// The new agent reads its own last report: it keeps the
		// preference it had.
		if _, err := w.waitBest(vip, serving, 2, 10*time.Second); err != nil {
			t.Error(err)
		}
		t.Logf("BGP agent killed: agent on %s killed at %s and restarted; %s", serving, killed.Format("15:04:05.000"), harness.Summary(samples))
	})

	t.Run("cordon the serving node", func(t *testing.T) {
		p := w.probe(vip, failureTimeout)
		time.Sleep(500 * time.Millisecond)
		wrote, err := w.cordon(serving, true)
		if err != nil {
			p.Stop()
			t.Fatal(err)
		}
		switched, err := w.waitBest(vip, other, 1, 5*time.Second)
		if err != nil {
			p.Stop()
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		samples := p.Stop()
		// A request under way on a connection through the drained node
		// when the route moves is cut, as a VRRP move without the
		// handoff; the ones after it must all succeed.
		failed := harness.Failed(samples, switched.Add(100*time.Millisecond), time.Now())
		t.Logf("BGP drain: %s cordoned; the router via %s after %s; %s", serving, other,
			switched.Sub(wrote).Round(time.Millisecond), harness.Summary(samples))
		if len(failed) > 0 {
			t.Errorf("%d requests failed after the route moved, first %+v", len(failed), failed[0])
		}
		if _, err := w.cordon(serving, false); err != nil {
			t.Fatal(err)
		}
		// Back from the drain it advertises again, and the traffic stays.
		if _, err := w.waitBest(vip, other, 2, 10*time.Second); err != nil {
			t.Error(err)
		}
		serving, other = other, serving
	})

	// No BFD in GoBGP v3: a node cut off is found by the hold timer. (A
	// session that ends by its hold timer gets no graceful restart from
	// bird: the routes go at once.) The node cut off never stopped
	// serving, so it did not give the preference up: when its link comes
	// back, the traffic goes back to it.
	t.Run("the serving node's link goes down", func(t *testing.T) {
		cut := time.Now()
		if err := w.nodes[serving].SetLink(false); err != nil {
			t.Fatal(err)
		}
		switched, err := w.waitBest(vip, other, 1, 20*time.Second)
		if err != nil {
			_ = w.nodes[serving].SetLink(true)
			t.Fatal(err)
		}
		t.Logf("BGP link cut: %s cut off; the router on %s after %s (the hold time: %d s)",
			serving, other, switched.Sub(cut).Round(time.Millisecond), bgpHoldTime)
		if err := w.nodes[serving].SetLink(true); err != nil {
			t.Fatal(err)
		}
		back, err := w.waitBest(vip, serving, 2, 30*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("BGP link cut: link back; %s preferred again after %s", serving, back.Sub(switched).Round(time.Millisecond))
	})
}

// bgpStates returns what each node reports it advertises.
func bgpStates(lb *model.LoadBalancer) map[string]model.BGPState {
	out := map[string]model.BGPState{}
	for _, r := range lb.Status.Nodes {
		out[r.Node] = r.BGP
	}
	return out
}
