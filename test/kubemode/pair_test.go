package kubemode

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// The active/standby pair on two agents, node-a and node-b, without
// --vrrp-interface: these tests are about placement and heartbeats (the
// controller's side), not about who holds an address. Both agents run in
// this test's one network namespace, so both HAProxy bind the same VIP:80
// (SO_REUSEPORT): no test here checks traffic.

const standbyNode = "node-b"

// Short heartbeats keep the tests fast: a Lease counts whole seconds, so
// 2 s is the shortest timeout, and a renewal every 500 ms survives three
// lost ones.
const (
	hbInterval = 500 * time.Millisecond
	hbTimeout  = 2 * time.Second
)

var hbFlags = []string{"--heartbeat-interval", hbInterval.String(), "--heartbeat-timeout", hbTimeout.String()}

// startAgentOn runs `pier agent` for node with a state folder of its own
// and the short heartbeats.
func (e *env) startAgentOn(node string, extra ...string) *proc {
	e.t.Helper()
	state, err := os.MkdirTemp("", "pkm")
	if err != nil {
		e.t.Fatal(err)
	}
	e.mu.Lock()
	e.states = append(e.states, state)
	e.mu.Unlock()
	api := freeAddr(e.t)
	args := append([]string{"--kubeconfig", e.agentKub, "--node", node, "--state-dir", state, "--api-addr", api,
		"--hard-stop-after", "5s", "--log-level", "debug"}, hbFlags...)
	p := e.start("agent-"+node, "agent", api, append(args, extra...)...)
	p.waitHTTP("/metrics")
	return p
}

// startPair starts both agents, then a controller that may place on every
// node (the empty --node-selector wins over startController's).
func (e *env) startPair() (agentA, agentB *proc) {
	e.t.Helper()
	agentA, agentB = e.startAgentOn(activeNode), e.startAgentOn(standbyNode)
	e.startController("ctl-1", "--node-selector", "")
	return agentA, agentB
}

// pairLB is what these tests read of a LoadBalancer: its placement and
// each node's report.
type pairLB struct {
	Active, Standby string
	State, Node     string            // the summary: the active node's report
	Reports         map[string]string // node → state it reports
}

func (p pairLB) String() string {
	return fmt.Sprintf("%s/%s %s@%s %v", p.Active, p.Standby, p.State, p.Node, p.Reports)
}

// pairOf reads the LoadBalancer of Ingress name.
func (e *env) pairOf(name string) (pairLB, bool) {
	e.t.Helper()
	p, ok, err := e.tryPairOf(name)
	if err != nil {
		e.t.Fatal(err)
	}
	return p, ok
}

// tryPairOf is pairOf for a goroutine of the test's (which may not call
// Fatal), or across an API server outage.
func (e *env) tryPairOf(name string) (pairLB, bool, error) {
	list, err := e.dyn.Resource(lbResource).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		return pairLB{}, false, fmt.Errorf("list load balancers: %w", err)
	}
	for _, u := range list.Items {
		data, _ := u.MarshalJSON()
		var obj struct {
			lbObject
			Status struct {
				State string `json:"state"`
				Node  string `json:"node"`
				Nodes []struct {
					Node  string `json:"node"`
					State string `json:"state"`
				} `json:"nodes"`
			} `json:"status"`
		}
		if err := json.Unmarshal(data, &obj); err != nil {
			return pairLB{}, false, fmt.Errorf("decode load balancer %s: %w", u.GetName(), err)
		}
		mine := false
		for _, src := range obj.Spec.Sources {
			mine = mine || src.Kind == "Ingress" && src.Namespace == e.ns && src.Name == name
		}
		if !mine {
			continue
		}
		p := pairLB{Active: obj.Spec.Placement.Active, Standby: obj.Spec.Placement.Standby,
			State: obj.Status.State, Node: obj.Status.Node, Reports: map[string]string{}}
		for _, n := range obj.Status.Nodes {
			p.Reports[n.Node] = n.State
		}
		return p, true, nil
	}
	return pairLB{}, false, nil
}

// waitPair waits until Ingress name's LoadBalancer satisfies ok.
func (e *env) waitPair(name string, d time.Duration, what string, ok func(pairLB) bool) pairLB {
	e.t.Helper()
	var p pairLB
	eventually(e.t, d, "load balancer of "+name+": "+what, func() error {
		var found bool
		if p, found = e.pairOf(name); !found {
			return fmt.Errorf("no load balancer")
		}
		if !ok(p) {
			return fmt.Errorf("%s", p)
		}
		return nil
	})
	return p
}

// servedByBoth: placed on two distinct nodes, and each reports ACTIVE
// (its HAProxy runs the spec).
func servedByBoth(p pairLB) bool {
	return p.Active != "" && p.Standby != "" && p.Active != p.Standby &&
		p.Reports[p.Active] == "ACTIVE" && p.Reports[p.Standby] == "ACTIVE" && p.State == "ACTIVE" && p.Node == p.Active
}

// TestPairPlacement: with two agents alive, every load balancer gets an
// active and a standby node, distinct, and both agents report it applied.
func TestPairPlacement(t *testing.T) {
	e := newEnv(t)
	e.startPair()
	names := []string{"one", "two", "three"}
	for _, n := range names {
		e.create(e.ingress(n, n+".example", nil))
	}
	for _, n := range names {
		p := e.waitPair(n, time.Minute, "active and standby both report ACTIVE", servedByBoth)
		t.Logf("%s: %s", n, p)
		nodes := []string{p.Active, p.Standby}
		sort.Strings(nodes)
		if strings.Join(nodes, ",") != activeNode+","+standbyNode {
			t.Errorf("%s placed on %v, want %s and %s", n, nodes, activeNode, standbyNode)
		}
	}
}

// TestAgentLossReplaces: the active node's agent is killed (kill -9, and
// nothing restarts it). Its load balancers stay where they are until its
// Lease expires, then the standby becomes active; the placement never
// moves before that.
func TestAgentLossReplaces(t *testing.T) {
	e := newEnv(t)
	agentA, _ := e.startPair()
	e.create(e.ingress("one", "one.example", nil))
	before := e.waitPair("one", time.Minute, "served by both", servedByBoth)
	if before.Active != activeNode {
		t.Fatalf("placement %s, want %s active (the name breaks the tie)", before, activeNode)
	}
	watch := e.watchPlacement("one", before)
	agentA.kill()
	killed := time.Now()
	after := e.waitPair("one", hbTimeout+10*time.Second, "standby promoted", func(p pairLB) bool {
		return p.Active == standbyNode && p.Standby == "" && p.State == "ACTIVE" && p.Node == standbyNode
	})
	moved := watch.stop().Sub(killed)
	t.Logf("agent on %s killed; placement moved %s later (heartbeat timeout %s, interval %s): %s",
		activeNode, moved.Round(time.Millisecond), hbTimeout, hbInterval, after)
	// The Lease was renewed at most one interval before the kill.
	if earliest := hbTimeout - hbInterval - 100*time.Millisecond; moved < earliest {
		t.Errorf("placement moved %s after the kill, before the Lease could expire (%s)", moved, earliest)
	}
	if moved > hbTimeout+3*time.Second {
		t.Errorf("placement moved %s after the kill, want within the %s timeout plus 3 s", moved, hbTimeout)
	}
}

// placementWatch polls a load balancer's placement every 50 ms and
// records when it first differs from the one given.
type placementWatch struct {
	done  chan struct{}
	wg    sync.WaitGroup
	mu    sync.Mutex
	moved time.Time
}

func (e *env) watchPlacement(name string, from pairLB) *placementWatch {
	w := &placementWatch{done: make(chan struct{})}
	w.wg.Go(func() {
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-w.done:
				return
			case <-tick.C:
			}
			p, ok, _ := e.tryPairOf(name)
			if ok && (p.Active != from.Active || p.Standby != from.Standby) {
				w.mu.Lock()
				if w.moved.IsZero() {
					w.moved = time.Now()
				}
				w.mu.Unlock()
			}
		}
	})
	return w
}

// stop ends the polling and returns when the placement first moved; the
// caller has seen it move, so a move the last poll missed is now.
func (w *placementWatch) stop() time.Time {
	close(w.done)
	w.wg.Wait()
	if w.moved.IsZero() {
		return time.Now()
	}
	return w.moved
}

// TestCordonDrains: a cordoned node keeps the load balancers it has (here
// as their active node) but gets no new one, and its agent says it drains.
func TestCordonDrains(t *testing.T) {
	e := newEnv(t)
	agentA, _ := e.startPair()
	e.create(e.ingress("before", "before.example", nil))
	old := e.waitPair("before", time.Minute, "served by both", servedByBoth)
	if old.Active != activeNode {
		t.Fatalf("placement %s, want %s active", old, activeNode)
	}
	e.cordon(activeNode, true)
	t.Cleanup(func() { e.cordon(activeNode, false) })
	eventually(t, 10*time.Second, "agent on "+activeNode+" logs that it drains", func() error {
		if agentA.count("node cordoned: draining") == 0 {
			return fmt.Errorf("no such line")
		}
		return nil
	})
	time.Sleep(300 * time.Millisecond) // the controller's informer and debounce
	e.create(e.ingress("after", "after.example", nil))
	p := e.waitPair("after", time.Minute, "placed and served", func(p pairLB) bool {
		return p.Active != "" && p.State == "ACTIVE"
	})
	if p.Active != standbyNode || p.Standby != "" {
		t.Errorf("new load balancer placed %s, want %s alone (the cordoned %s gets no role)", p, standbyNode, activeNode)
	}
	// Give the controller a pass over the cordon before reading the old one.
	time.Sleep(time.Second)
	if now, _ := e.pairOf("before"); now.Active != old.Active || now.Standby != old.Standby {
		t.Errorf("old load balancer moved from %s to %s on cordon; a draining node keeps its roles", old, now)
	}
	e.cordon(activeNode, false)
	eventually(t, 10*time.Second, "agent on "+activeNode+" logs the uncordon", func() error {
		if agentA.count("node uncordoned") == 0 {
			return fmt.Errorf("no such line")
		}
		return nil
	})
}

// cordon sets spec.unschedulable as `kubectl cordon` does (a merge patch).
// It also runs from a cleanup, when the test's context has ended.
func (e *env) cordon(node string, on bool) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	patch := fmt.Sprintf(`{"spec":{"unschedulable":%v}}`, on)
	if _, err := e.cs.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		e.t.Fatalf("cordon %s=%v: %v", node, on, err)
	}
}

// TestDrainOnExit: SIGTERM to an agent started with --drain-on-exit
// deletes its Lease once the agent is done, so the controller re-places
// at once, well before the (here long) heartbeat timeout; SIGTERM without
// it leaves the Lease to expire, so a restart moves nothing.
func TestDrainOnExit(t *testing.T) {
	e := newEnv(t)
	long := []string{"--heartbeat-timeout", "30s"}
	agentA := e.startAgentOn(activeNode, append(long, "--drain-on-exit")...)
	agentB := e.startAgentOn(standbyNode, long...)
	e.startController("ctl-1", "--node-selector", "")
	e.create(e.ingress("one", "one.example", nil))
	if p := e.waitPair("one", time.Minute, "served by both", servedByBoth); p.Active != activeNode {
		t.Fatalf("placement %s, want %s active", p, activeNode)
	}

	if err := agentB.stop(10 * time.Second); err != nil {
		t.Fatalf("agent on %s: %v", standbyNode, err)
	}
	if !e.agentLeaseExists(standbyNode) {
		t.Errorf("the Lease of %s is gone after a SIGTERM without --drain-on-exit", standbyNode)
	}
	e.startAgentOn(standbyNode, long...) // back, to take the active role

	stopped := time.Now()
	if err := agentA.stop(10 * time.Second); err != nil {
		t.Fatalf("agent on %s: %v", activeNode, err)
	}
	if e.agentLeaseExists(activeNode) {
		t.Errorf("the Lease of %s is still there after a SIGTERM with --drain-on-exit", activeNode)
	}
	p := e.waitPair("one", 10*time.Second, "standby promoted", func(p pairLB) bool {
		return p.Active == standbyNode && p.Standby == "" && p.State == "ACTIVE" && p.Node == standbyNode
	})
	t.Logf("agent on %s stopped with --drain-on-exit; re-placed within %s (timeout 30 s): %s",
		activeNode, time.Since(stopped).Round(time.Millisecond), p)
	if agentA.count("heartbeat Lease deleted") == 0 {
		t.Errorf("agent on %s does not log the Lease deletion", activeNode)
	}
}

func (e *env) agentLeaseExists(node string) bool {
	e.t.Helper()
	_, err := e.cs.CoordinationV1().Leases(leaseNS).Get(e.t.Context(), "pier-agent-"+node, metav1.GetOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		e.t.Fatalf("get lease of %s: %v", node, err)
	}
	return err == nil
}

// movedAt is when the placement first moved; zero if it has not.
func (w *placementWatch) movedAt() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.moved
}

// TestAllAgentsSilentKeepsPair: both agents freeze at once (SIGSTOP) for
// longer than the heartbeat timeout, as they look to a controller during
// an API server outage, then come back one second apart. Without the
// outage rule the first one back would take over (or drop the other as
// standby); with it nothing moves. (Stopping kube-apiserver itself shows
// nothing here: the agents renew before the controller's informer relists,
// so it passes with or without the rule; measured.)
func TestAllAgentsSilentKeepsPair(t *testing.T) {
	e := newEnv(t)
	agentA, agentB := e.startPair()
	e.create(e.ingress("one", "one.example", nil))
	w := e.watchPlacement("one", e.waitPair("one", time.Minute, "served by both", servedByBoth))
	defer w.stop()
	for _, p := range []*proc{agentA, agentB} {
		p.signal(syscall.SIGSTOP)
		t.Cleanup(func() { p.signal(syscall.SIGCONT) })
	}
	time.Sleep(hbTimeout + time.Second)
	agentB.signal(syscall.SIGCONT)
	time.Sleep(time.Second)
	agentA.signal(syscall.SIGCONT)
	time.Sleep(2 * hbTimeout)
	if !w.movedAt().IsZero() {
		p, _ := e.pairOf("one")
		t.Errorf("placement moved after every agent went silent at once, now %s", p)
	}
	if p := e.waitPair("one", 10*time.Second, "served by both", servedByBoth); p.Active != activeNode {
		t.Errorf("placement %s, want %s still active", p, activeNode)
	}
}

func (p *proc) signal(sig syscall.Signal) {
	if !p.exited() {
		_ = p.cmd.Process.Signal(sig)
	}
}
