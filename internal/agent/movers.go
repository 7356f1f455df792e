package agent

import (
	"context"
	"sort"
	"time"

	"pier.dev/pier/internal/agent/driver"
	"pier.dev/pier/internal/agent/mover"
	"pier.dev/pier/internal/model"
)

// drainLinger is how long an agent that hands over on exit keeps its data
// plane serving after the addresses left, for requests already under way
// on old connections.
const drainLinger = 500 * time.Millisecond

// roleOf is what this node does for uuid's addresses (the zero Role
// without a mover).
func (a *Agent) roleOf(uuid string) mover.Role {
	if a.mover == nil {
		return mover.Role{}
	}
	return a.mover.Role(uuid)
}

// syncMover gives the mover the load balancers placed on this node.
func (a *Agent) syncMover(ctx context.Context) {
	if a.mover == nil {
		return
	}
	placed := make([]*model.LoadBalancer, 0, len(a.latest))
	for _, lb := range a.latest {
		if lb.Placement.Has(a.cfg.Node) {
			placed = append(placed, lb)
		}
	}
	sort.Slice(placed, func(i, j int) bool { return placed[i].UUID < placed[j].UUID })
	a.mover.Sync(ctx, placed)
}

// tickMover records which data planes have served, runs the mover's
// periodic work and reports the load balancers whose role changed.
func (a *Agent) tickMover(ctx context.Context) {
	for uuid := range a.applied {
		if !a.served[uuid] && a.healthy(uuid) {
			a.served[uuid] = true
		}
	}
	for _, uuid := range a.mover.Tick(ctx) {
		a.rereport(ctx, uuid)
	}
}

// healthy tells whether uuid's data plane serves here now.
func (a *Agent) healthy(uuid string) bool {
	p, ok := a.held[uuid]
	if !ok || a.applied[uuid] == nil {
		return false
	}
	if len(a.applied[uuid].Placement.ECMP) > 0 && a.stale[uuid] {
		// One node of an ECMP set whose newest table failed here serves
		// the endpoints of before: its Maglev table differs from its
		// peers', and new flows would not be spread as theirs. A spec
		// every node rejects leaves every table alike, and serving.
		return false
	}
	if hc, ok := a.drivers[p].(driver.HealthChecker); ok {
		return hc.Healthy(uuid)
	}
	return true
}

// setDraining starts or ends a planned handover of the addresses.
func (a *Agent) setDraining(ctx context.Context, on bool) {
	if a.mover == nil {
		a.cfg.Logger.Warn("drain requested but this agent holds no addresses (no --vrrp-interface, no --bgp-peer): nothing to hand over")
		return
	}
	a.mover.Drain(ctx, on)
}

// drainBeforeExit hands every address to the standby nodes and lets the
// requests under way finish before Run returns (Config.HandOverOnExit).
func (a *Agent) drainBeforeExit() {
	if a.mover == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	a.mover.Drain(ctx, true)
	deadline := time.Now().Add(2 * time.Second)
	for {
		a.tickMover(ctx)
		if !a.mover.Holding() || !time.Now().Before(deadline) {
			break
		}
		time.Sleep(mover.TickEvery)
	}
	time.Sleep(drainLinger)
	a.tickMover(ctx)
}

// moverNode is the agent's side of the mover seam (mover.Node). Its
// methods run in the agent's loop, but Wake.
type moverNode struct{ a *Agent }

func (n moverNode) Healthy(uuid string) bool { return n.a.healthy(uuid) }

func (n moverNode) Served(uuid string) bool { return n.a.served[uuid] }

// Reconnect asks every driver that can (driver.Drainer) to make its
// clients reconnect.
func (n moverNode) Reconnect(ctx context.Context, on bool) {
	for _, d := range n.a.drivers {
		if dr, ok := d.(driver.Drainer); ok {
			if err := dr.Drain(ctx, on); err != nil {
				n.a.cfg.Logger.Warn("drain: could not ask clients to reconnect", "provider", d.Provider(), "error", err)
			}
		}
	}
}

func (n moverNode) Wake() {
	select {
	case n.a.wake <- struct{}{}:
	default:
	}
}
