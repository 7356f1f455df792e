//go:build linux

package kubepair

import (
	"fmt"
	"net/netip"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"pier.dev/pier/internal/lab"
	"pier.dev/pier/internal/model"
	"pier.dev/pier/test/harness"
)

// reloadCounts reads pier_haproxy_reloads_total of both agents.
func (w *world) reloadCounts(t *testing.T) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for n, a := range w.agents {
		v, err := a.metric("pier_haproxy_reloads_total")
		if err != nil {
			t.Fatal(err)
		}
		out[n] = v
	}
	return out
}

// fenceLine is what an agent logs when the API arbitration fences it.
const fenceLine = "fenced by the API server's arbitration"

// outage makes the API server unreachable for both agents, and back.
type outage struct {
	name         string
	cut, restore func() error
}

// refused: the relay closes every connection and accepts none (the API
// server's host answers, its process is down).
func (w *world) refused() outage {
	return outage{name: "connections refused",
		cut:     func() error { w.relay.Cut(); return nil },
		restore: func() error { w.relay.Restore(); return nil }}
}

// dropped: the switch drops every packet between the nodes and the relay
// (the API server's host gone, a partition): connections hang, nothing is
// refused.
func (w *world) dropped() outage {
	addr := w.relay.Addr()
	host, port, _ := strings.Cut(addr, ":")
	rules := fmt.Sprintf("table bridge kp_api {\n chain api {\n type filter hook forward priority 0;\n"+
		" ip daddr %s tcp dport %s drop\n ip saddr %s tcp sport %s drop\n }\n}\n", host, port, host, port)
	nft := func(stdin string, args ...string) error { return nftIn(w.lab.Switch, stdin, args...) }
	return outage{name: "packets dropped",
		cut:     func() error { return nft(rules, "-f", "-") },
		restore: func() error { return nft("", "delete", "table", "bridge", "kp_api") }}
}

// nftIn runs nft with args and stdin in network namespace ns.
func nftIn(ns, stdin string, args ...string) error {
	cmd := exec.Command("ip", append([]string{"netns", "exec", ns, "nft"}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("nft %v in %s: %w: %s", args, ns, err, out)
	}
	return nil
}

func apiOutageWithKill(t *testing.T, w *world, vip netip.Addr, holder, other string, placement model.Placement, out outage) {
	p := w.probe(vip, recoveryTimeout)
	time.Sleep(500 * time.Millisecond)
	// Both nodes hear each other throughout: no split brain, so the API
	// server's arbitration has nothing to settle.
	fences := w.agents[other].count(fenceLine, "fenced=true")
	cut := time.Now()
	if err := out.cut(); err != nil {
		p.Stop()
		t.Fatal(err)
	}
	restored := false
	defer func() {
		if !restored {
			_ = out.restore()
		}
	}()
	// Long enough for the agents' API clients to notice.
	time.Sleep(2 * time.Second)
	before := w.haproxyMasters(holder)
	fault, n, err := w.killHAProxy(holder)
	if err != nil {
		p.Stop()
		t.Fatal(err)
	}
	if _, err := w.waitHolder(other, vip, 3*time.Second); err != nil {
		p.Stop()
		t.Fatal(err)
	}
	// The supervisor restarts the killed HAProxy without the API server.
	deadline := time.Now().Add(10 * time.Second)
	for (len(lab.PidsIn(w.nodes[holder].NS, "haproxy")) == 0 || slices.Equal(w.haproxyMasters(holder), before)) &&
		time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	// Beyond the heartbeat timeout: the controller sees every agent's
	// Lease expire at once.
	for time.Since(cut) < hbTimeout+2*time.Second {
		time.Sleep(100 * time.Millisecond)
	}
	masters := map[string][]int{holder: w.haproxyMasters(holder), other: w.haproxyMasters(other)}
	reloads := w.reloadCounts(t)
	// Nothing in the killed node's return (the supervisor's restart, its
	// gate, its BACKUP role) needs the API server: it must happen during
	// the outage as it does without one, or the pair has no
	// standby until the API server is back.
	rejoinedAt, rejoinErr := w.rejoined(holder, fault)
	restore := time.Now()
	if err := out.restore(); err != nil {
		p.Stop()
		t.Fatal(err)
	}
	restored = true
	lb, err := w.waitRoles(30*time.Second, map[string]model.VRRPState{holder: model.VRRPBackup, other: model.VRRPMaster})
	if err != nil {
		p.Stop()
		t.Fatalf("after the restore: %v; VIP holders now %v; %s logged %d fences by the API arbitration since the cut",
			err, w.lab.Holders(vip), other, w.agents[other].count(fenceLine, "fenced=true")-fences)
	}
	converged := time.Since(restore)
	time.Sleep(2 * time.Second) // anything that moves after the outage would move now
	samples := p.Stop()
	took := failover(t, "API outage", samples, fault)
	t.Logf("API outage (%s): API cut %s; killed %d haproxy on %s %s into it; served again through %s after %s; restored after %s; "+
		"roles reported %s after the restore: %s; %s",
		out.name, cut.Format(time.StampMilli), n, holder, fault.Sub(cut).Round(time.Millisecond), other, took.Round(time.Millisecond),
		restore.Sub(cut).Round(time.Millisecond), converged.Round(time.Millisecond), describe(lb), harness.Summary(samples))
	if rejoinErr != nil {
		late := "not even after the restore"
		if at, err := w.rejoined(holder, fault); err == nil {
			late = at.Sub(restore).Round(time.Millisecond).String() + " after the restore"
		}
		t.Errorf("%s did not rejoin as BACKUP during the %s outage, but %s (HAProxy killed without an outage: about 1 s after the kill): "+
			"the pair had no standby until the API server came back", holder, restore.Sub(cut).Round(time.Millisecond), late)
	} else {
		t.Logf("API outage (%s): %s rejoined as BACKUP %s after the kill, during the outage", out.name, holder, rejoinedAt.Sub(fault).Round(time.Millisecond))
	}
	if lb.Placement.Active != placement.Active || lb.Placement.Standby != placement.Standby || lb.Placement.RouterID != placement.RouterID {
		t.Errorf("placement moved during the outage: %+v, was %+v", lb.Placement, placement)
	}
	if !w.holds(other, vip) {
		t.Errorf("VIP holders %v after the restore, want [%s]", w.lab.Holders(vip), other)
	}
	if n := w.agents[other].count(fenceLine, "fenced=true") - fences; n > 0 {
		t.Errorf("%s was fenced %d times by the API arbitration, with no split brain", other, n)
	}
	for node, pids := range masters {
		if now := w.haproxyMasters(node); !slices.Equal(now, pids) {
			t.Errorf("HAProxy masters on %s went from %v to %v after the restore", node, pids, now)
		}
	}
	if now := w.reloadCounts(t); now[holder] != reloads[holder] || now[other] != reloads[other] {
		t.Errorf("HAProxy reloads after the restore: %v, before it %v: want none (the reload that follows a "+
			"supervisor's restart belongs in the outage)", now, reloads)
	}
}
