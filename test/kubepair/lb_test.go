//go:build linux

package kubepair

import (
	"context"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"pier.dev/pier/internal/model"
	kubestore "pier.dev/pier/internal/store/kube"
	"pier.dev/pier/test/harness"
)

// loadBalancer reads the one LoadBalancer of the test through pier's own
// store code (the CRD as the agents read it).
func (w *world) loadBalancer(ctx context.Context) (*model.LoadBalancer, error) {
	st, err := kubestore.New(w.srv.Config(), kubestore.Options{})
	if err != nil {
		return nil, err
	}
	defer st.Close()
	lbs, err := st.List(ctx)
	if err != nil {
		return nil, err
	}
	if len(lbs) != 1 {
		return nil, fmt.Errorf("%d load balancers, want 1", len(lbs))
	}
	return lbs[0], nil
}

// roles maps each node to the VRRP role its agent reports.
func roles(lb *model.LoadBalancer) map[string]model.VRRPState {
	out := map[string]model.VRRPState{}
	for _, r := range lb.Status.Nodes {
		out[r.Node] = r.VRRP
	}
	return out
}

func describe(lb *model.LoadBalancer) string {
	return fmt.Sprintf("placement %s/%s, VRRP roles %v, BGP states %v", lb.Placement.Active, lb.Placement.Standby, roles(lb), bgpStates(lb))
}

// waitLB waits until the LoadBalancer satisfies ok and returns it.
func (w *world) waitLB(limit time.Duration, what string, ok func(*model.LoadBalancer) bool) (*model.LoadBalancer, error) {
	deadline := time.Now().Add(limit)
	for {
		lb, err := w.loadBalancer(w.t.Context())
		if err == nil && ok(lb) {
			return lb, nil
		}
		if time.Now().After(deadline) {
			if err == nil {
				err = fmt.Errorf("%s", describe(lb))
			}
			return nil, fmt.Errorf("load balancer: %s: not within %s: %w", what, limit, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitRoles waits until the agents report exactly want.
func (w *world) waitRoles(limit time.Duration, want map[string]model.VRRPState) (*model.LoadBalancer, error) {
	return w.waitLB(limit, fmt.Sprintf("roles %v", want), func(lb *model.LoadBalancer) bool {
		got := roles(lb)
		for n, r := range want {
			if got[n] != r {
				return false
			}
		}
		return true
	})
}

// waitRenewed waits until both agents' heartbeat Leases were renewed
// after since: proof that each agent reaches the API server.
func (w *world) waitRenewed(since time.Time, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for _, n := range []string{"n0", "n1"} {
		for {
			l, err := w.cs.CoordinationV1().Leases(leaseNS).Get(w.t.Context(), "pier-agent-"+n, metav1.GetOptions{})
			if err == nil && l.Spec.RenewTime != nil && l.Spec.RenewTime.After(since) {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("the agent on %s did not renew its heartbeat Lease within %s (%v)", n, limit, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return nil
}

// holds reports whether node alone holds addr, of the two nodes.
func (w *world) holds(node string, addr netip.Addr) bool {
	for name, h := range w.nodes {
		if h.Has(addr) != (name == node) {
			return false
		}
	}
	return true
}

// waitHolder waits until node alone holds addr and returns when it saw
// it; it polls every 10 ms, so the time is late by at most that and one
// look at both nodes' addresses.
func (w *world) waitHolder(node string, addr netip.Addr, limit time.Duration) (time.Time, error) {
	deadline := time.Now().Add(limit)
	for {
		if w.holds(node, addr) {
			return time.Now(), nil
		}
		if time.Now().After(deadline) {
			return time.Time{}, fmt.Errorf("%s alone does not hold %s within %s (holders %v)", node, addr, limit, w.lab.Holders(addr))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// move follows addr from one node to the other, looking at both every
// 5 ms, until to alone holds it. It returns when addr was last seen on
// from, first seen on to, and seen on to alone. When firstTo is after
// lastFrom, nobody held addr for about that long (± one look).
func (w *world) move(addr netip.Addr, from, to string, limit time.Duration) (lastFrom, firstTo, alone time.Time, err error) {
	deadline := time.Now().Add(limit)
	for {
		at := time.Now()
		onFrom, onTo := w.nodes[from].Has(addr), w.nodes[to].Has(addr)
		if onFrom {
			lastFrom = at
		}
		if onTo && firstTo.IsZero() {
			firstTo = at
		}
		if onTo && !onFrom {
			return lastFrom, firstTo, at, nil
		}
		if at.After(deadline) {
			return lastFrom, firstTo, time.Time{}, fmt.Errorf("%s alone does not hold %s within %s (holders %v)", to, addr, limit, w.lab.Holders(addr))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// gap says how long addr had no holder during a move, for a log line.
func gap(lastFrom, firstTo time.Time) string {
	if lastFrom.IsZero() || !firstTo.After(lastFrom) {
		return "none seen"
	}
	return firstTo.Sub(lastFrom).Round(time.Millisecond).String()
}

// Probe timeouts: short where a failover's recovery is measured (a
// request caught by the fault waits it out), longer where only failures
// count and a loaded machine may stall a request for a moment (a lost SYN
// still shows: its retransmit comes after 1 s).
const (
	recoveryTimeout = 300 * time.Millisecond
	failureTimeout  = 900 * time.Millisecond
)

// probe starts steady traffic to the VIP from the client namespace.
func (w *world) probe(vip netip.Addr, timeout time.Duration) *harness.Probe {
	return harness.StartProbe(w.t.Context(), harness.ProbeOptions{
		URL: "http://" + netip.AddrPortFrom(vip, 80).String() + "/", Host: host, Netns: w.lab.Client.NS,
		Timeout: timeout,
	})
}

// straddle begins a request to the VIP that the test finishes later.
func (w *world) straddle(vip netip.Addr) (*harness.Straddle, error) {
	return harness.BeginStraddle(w.lab.Client.NS, netip.AddrPortFrom(vip, 80).String(), host)
}

// cordon sets spec.unschedulable as `kubectl cordon` does and returns
// when the API server answered the write.
func (w *world) cordon(node string, on bool) (time.Time, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	patch := fmt.Sprintf(`{"spec":{"unschedulable":%v}}`, on)
	_, err := w.cs.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	return time.Now(), err
}

// holderWatch samples the holders of the VIP and FIP every 50 ms and
// counts the samples in which an address has two.
type holderWatch struct {
	paused  atomic.Bool // while a node is cut off: it cannot know it lost
	samples atomic.Int64
	double  atomic.Int64
	mu      sync.Mutex
	first   string
	stop    context.CancelFunc
	wg      sync.WaitGroup
}

func (w *world) watchHolders(addrs ...netip.Addr) *holderWatch {
	hw := &holderWatch{}
	ctx, cancel := context.WithCancel(context.Background())
	hw.stop = cancel
	hw.wg.Go(func() {
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			if hw.paused.Load() {
				continue
			}
			hw.samples.Add(1)
			for _, a := range addrs {
				if h := w.lab.Holders(a); len(h) > 1 {
					hw.double.Add(1)
					hw.mu.Lock()
					if hw.first == "" {
						hw.first = fmt.Sprintf("%s: %s held by %v", time.Now().Format(time.StampMilli), a, h)
					}
					hw.mu.Unlock()
				}
			}
		}
	})
	return hw
}

// end stops the sampling and returns samples taken, double-held samples
// and the first of those.
func (hw *holderWatch) end() (samples, double int64, first string) {
	hw.stop()
	hw.wg.Wait()
	hw.mu.Lock()
	defer hw.mu.Unlock()
	return hw.samples.Load(), hw.double.Load(), hw.first
}
