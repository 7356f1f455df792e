package agent

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"pier.dev/pier/internal/agent/addrhold"
	"pier.dev/pier/internal/agent/driver"
	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/vrrp"
)

// Timers of the active/standby pair (docs/failover.md).
const (
	// holderInterval is how often health and roles are looked at: a
	// dead HAProxy closes its gate within one interval.
	holderInterval = 50 * time.Millisecond
	// drainDelay is how long a planned handover lets clients see
	// "Connection: close" before the addresses move: a busy keep-alive
	// connection closes after its next response, well within it.
	drainDelay = 50 * time.Millisecond
	// drainLinger is how long an agent that drains on exit keeps its
	// HAProxy serving after the addresses left, for requests already
	// under way on old connections.
	drainLinger = 500 * time.Millisecond
	// fenceGrace is how long a standby holds the addresses before the
	// API server's word may fence it: long enough for an active node
	// whose HAProxy died to report FAULT.
	fenceGrace = time.Second
	// fenceConfirm is how long the peer's current claim must stand: its
	// Lease (which says how current its reports are) and its reports come
	// through two watches, and the Lease may arrive first.
	fenceConfirm = 2 * time.Second
	// healFresh and healConfirm: a fenced standby lifts its fence once
	// the active node's adverts, one every advert interval (100 ms), have
	// kept reaching it for healConfirm, none older than healFresh.
	healFresh   = 500 * time.Millisecond
	healConfirm = time.Second
)

// pairState is the agent's side of the address holder.
type pairState struct {
	h *addrhold.Holder
	// synced identifies the placements the holder was last synced to.
	synced string
	// roles per load balancer UUID, from the last tick.
	roles map[string]model.VRRPState
	// served holds the UUIDs whose data plane was healthy here since the
	// agent started: only those close their instance's gate when they
	// fail (one that never came up must not move its neighbours).
	served map[string]bool
	// masterReportedAt is when this node's MASTER report for a UUID was
	// written: proof that the API server heard it.
	masterReportedAt map[string]time.Time
	// claimSince is when the peer's MASTER claim was first seen fresh,
	// per instance (arbitrate).
	claimSince map[string]time.Time
	// adverts hears the peers' VRRP adverts (nil if it could not
	// listen); fencedAt is when each fenced instance was fenced, and
	// healSince when the peer's adverts were first heard again since.
	adverts   *vrrp.Adverts
	fencedAt  map[string]time.Time
	healSince map[string]time.Time
	draining  bool
	drainAt   time.Time // when the gates close in a pending drain
	lastErr   string
}

func newPairState(h *addrhold.Holder) *pairState {
	return &pairState{h: h, roles: map[string]model.VRRPState{}, served: map[string]bool{},
		masterReportedAt: map[string]time.Time{}, claimSince: map[string]time.Time{},
		fencedAt: map[string]time.Time{}, healSince: map[string]time.Time{}}
}

// roleOf is this node's VRRP role for a load balancer ("" without VRRP).
func (a *Agent) roleOf(uuid string) model.VRRPState {
	if a.vrrp == nil {
		return ""
	}
	return a.vrrp.roles[uuid]
}

// reportedRole records that a report with role was written at t.
func (p *pairState) reportedRole(uuid string, role model.VRRPState, t time.Time) {
	if p == nil {
		return
	}
	if role != model.VRRPMaster {
		delete(p.masterReportedAt, uuid)
	} else if _, ok := p.masterReportedAt[uuid]; !ok {
		p.masterReportedAt[uuid] = t
	}
}

func (p *pairState) forget(uuid string) {
	if p == nil {
		return
	}
	delete(p.roles, uuid)
	delete(p.served, uuid)
	delete(p.masterReportedAt, uuid)
}

// syncHolder gives the holder the placements of this node when they
// changed (a load balancer placed, moved or gone, an address changed).
func (a *Agent) syncHolder(ctx context.Context) {
	p := a.vrrp
	if p == nil {
		return
	}
	lbs := make([]*model.LoadBalancer, 0, len(a.latest))
	var key strings.Builder
	for _, lb := range a.latest {
		if lb.Placement.Active == a.cfg.Node || lb.Placement.Standby == a.cfg.Node {
			lbs = append(lbs, lb)
		}
	}
	sort.Slice(lbs, func(i, j int) bool { return lbs[i].UUID < lbs[j].UUID })
	for _, lb := range lbs {
		fmt.Fprintf(&key, "%s %+v %s %s\n", lb.UUID, lb.Placement, lb.VIP, lb.FIP)
	}
	if key.String() == p.synced {
		return
	}
	if err := p.h.Sync(ctx, lbs); err != nil {
		a.cfg.Logger.Error("vrrp: keepalived not updated; the previous instances keep running", "error", err)
		return
	}
	p.synced = key.String()
}

// healthy tells whether uuid's data plane serves here now.
func (a *Agent) healthy(uuid string) bool {
	p, ok := a.held[uuid]
	if !ok || a.applied[uuid] == nil {
		return false
	}
	if hc, ok := a.drivers[p].(driver.HealthChecker); ok {
		return hc.Healthy(uuid)
	}
	return true
}

// tickHolder runs the holder's periodic work: a pending drain, the split
// brain arbitration, the gates, and reports of changed roles.
func (a *Agent) tickHolder(ctx context.Context) {
	p := a.vrrp
	if !p.drainAt.IsZero() && !time.Now().Before(p.drainAt) {
		a.cfg.Logger.Info("drain: handing the addresses to the standby nodes")
		p.h.SetDraining(true)
		p.drainAt = time.Time{}
	}
	for uuid := range a.applied {
		if !p.served[uuid] && a.healthy(uuid) {
			p.served[uuid] = true
		}
	}
	a.arbitrate()
	roles, err := p.h.Tick(a.healthy, func(uuid string) bool { return p.served[uuid] })
	if err != nil {
		if err.Error() != p.lastErr {
			a.cfg.Logger.Error("vrrp: tick", "error", err)
		}
		p.lastErr = err.Error()
	} else {
		p.lastErr = ""
	}
	if roles == nil {
		return
	}
	for uuid := range p.roles {
		if _, ok := roles[uuid]; !ok {
			delete(p.roles, uuid) // its addresses are no longer held here
			a.rereport(ctx, uuid)
		}
	}
	for uuid, role := range roles {
		if p.roles[uuid] == role {
			continue
		}
		a.cfg.Logger.Info("vrrp role", "instance", p.h.InstanceOf(uuid), "uuid", uuid, "role", role, "was", p.roles[uuid])
		p.roles[uuid] = role
		a.rereport(ctx, uuid)
	}
}

// arbitrate lets the API server settle a split brain: when the two nodes
// of a pair cannot hear each other's adverts, both become MASTER. The
// standby of the pair steps down (its gate closes: "fenced") when the
// active node's agent says it is MASTER too, and that word is current
// (claim.contested), and kept saying so for fenceConfirm. A node that
// cannot reach the API server never fences (its MASTER report is never
// written), and neither does one whose peer went silent: a dead peer's
// last report is stale, not a claim. The fence lifts when the active node
// no longer claims the addresses, or when its adverts reach this node
// again (healed): the split brain is over.
func (a *Agent) arbitrate() {
	p, hb := a.vrrp, a.cfg.Heartbeats
	if hb == nil {
		return
	}
	now := time.Now()
	for name, in := range p.h.Instances() {
		if in.Active {
			continue // the active node of the pair is the one that stays
		}
		c := claim{role: p.h.InstanceRole(name), heldFor: now.Sub(p.h.Since(name)),
			peerAlive: hb.Alive(in.Peer), peerWritten: hb.ReportsWrittenAt(in.Peer)}
		for _, uuid := range in.UUIDs {
			if lb := a.latest[uuid]; lb != nil {
				if r, ok := lb.Status.Report(in.Peer); ok && r.VRRP == model.VRRPMaster {
					c.peerMaster = true
				}
			}
			if t, ok := p.masterReportedAt[uuid]; ok && (c.myReport.IsZero() || t.Before(c.myReport)) {
				c.myReport = t
			}
		}
		if p.h.Fenced(name) {
			switch {
			case !c.peerMaster || !c.peerAlive:
				p.unfence(name, "the active node no longer claims the addresses", "peer", in.Peer,
					"peer_master", c.peerMaster, "peer_alive", c.peerAlive)
			case p.healed(name, in, now):
				p.unfence(name, "the active node's adverts reach this node again: the split brain is over",
					"peer", in.Peer, "peer_address", in.PeerAddress)
			}
			continue
		}
		if !c.contested() {
			delete(p.claimSince, name)
			continue
		}
		if p.claimSince[name].IsZero() {
			p.claimSince[name] = now
		}
		if now.Sub(p.claimSince[name]) < fenceConfirm {
			continue
		}
		delete(p.claimSince, name)
		p.h.Fence(name, true, "why", "split brain: the active node holds the addresses too", "peer", in.Peer,
			"master_reported_at", c.myReport, "peer_reports_written_at", c.peerWritten)
		p.fencedAt[name] = now
	}
}

func (p *pairState) unfence(name, why string, attrs ...any) {
	p.h.Fence(name, false, append([]any{"why", why}, attrs...)...)
	delete(p.fencedAt, name)
	delete(p.healSince, name)
}

// healed reports whether the active node's adverts for fenced instance
// in have reached this node, through the same input filter keepalived's
// own socket sees, steadily for healConfirm since the fence: the nodes
// hear each other again. Unfenced, keepalived here hears the active
// node's adverts and stays BACKUP, a hot standby again, rather than
// waiting in FAULT until the active node fails and says so through the
// API server.
func (p *pairState) healed(name string, in *addrhold.Instance, now time.Time) bool {
	if p.adverts == nil || in.RouterID == 0 {
		return false
	}
	heard := p.adverts.LastHeard(in.RouterID, in.PeerAddress)
	if !heard.After(p.fencedAt[name]) || now.Sub(heard) > healFresh {
		delete(p.healSince, name)
		return false
	}
	if p.healSince[name].IsZero() {
		p.healSince[name] = now
	}
	return now.Sub(p.healSince[name]) >= healConfirm
}

// claim is what the standby node of a pair knows, for one instance, of
// its own MASTER role and of the active node's.
type claim struct {
	role    model.VRRPState // this node's role
	heldFor time.Duration   // how long it has had that role
	// myReport is when this node's MASTER report, since written to the
	// store, was made; zero when none was written.
	myReport   time.Time
	peerMaster bool // the active node's report says MASTER
	peerAlive  bool // its heartbeat is fresh
	// peerWritten is the time up to which the active node had written its
	// reports (Heartbeats.ReportsWrittenAt).
	peerWritten time.Time
}

// contested reports whether the active node's MASTER claim stands against
// this node's: both are MASTER at once. The active node's report must be
// its word from after this node's MASTER report, not one it could not
// replace yet: an active node coming back from an outage renews its
// heartbeat at once, while its reports follow through their own writer,
// seconds later if it had many or its connection hangs. Holding the
// addresses for fenceGrace first lets an active node whose HAProxy died
// report FAULT.
func (c claim) contested() bool {
	return c.role == model.VRRPMaster && c.peerMaster && c.peerAlive && !c.myReport.IsZero() &&
		c.heldFor >= fenceGrace && c.peerWritten.After(c.myReport)
}

// setDraining starts or ends a planned handover. Starting asks every
// client to reconnect (driver.Drainer), then, after drainDelay, closes
// every gate: keepalived sends priority 0 and the standby takes over at
// once. Ending reopens the gates; with nopreempt, the addresses stay
// where they are until the next failure.
func (a *Agent) setDraining(ctx context.Context, on bool) {
	p := a.vrrp
	if p == nil && a.routes == nil {
		a.cfg.Logger.Warn("drain requested but this agent holds no addresses (no --vrrp-interface, no --bgp-peer): nothing to hand over")
		return
	}
	if r := a.routes; r != nil && r.draining != on {
		// The next tick withdraws the routes (or advertises them again):
		// the routers send the traffic to the standby nodes.
		r.draining = on
		a.cfg.Logger.Info("drain: this node's routes follow", "withdrawn", on)
	}
	if p == nil || p.draining == on {
		return
	}
	p.draining = on
	for _, d := range a.drivers {
		if dr, ok := d.(driver.Drainer); ok {
			if err := dr.Drain(ctx, on); err != nil {
				a.cfg.Logger.Warn("drain: could not ask clients to reconnect", "provider", d.Provider(), "error", err)
			}
		}
	}
	if on {
		a.cfg.Logger.Info("drain: asking clients to reconnect before the addresses move", "delay", drainDelay)
		p.drainAt = time.Now().Add(drainDelay)
		p.h.PrepareDrain()
		time.AfterFunc(drainDelay, func() {
			select {
			case a.drainDue <- struct{}{}:
			default:
			}
		})
		return
	}
	a.cfg.Logger.Info("drain ended: this node may hold addresses again")
	p.drainAt = time.Time{}
	p.h.SetDraining(false)
}

// drainBeforeExit hands every address to the standby nodes and lets the
// requests under way finish before Run returns (--drain-on-exit).
func (a *Agent) drainBeforeExit() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if a.routes != nil {
		a.setDraining(ctx, true)
		a.tickRoutes(ctx)
		if a.vrrp == nil {
			time.Sleep(drainLinger)
		}
	}
	p := a.vrrp
	if p == nil {
		return
	}
	a.setDraining(ctx, true)
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		time.Sleep(holderInterval)
		a.tickHolder(ctx)
		if !p.holdsAny() && p.drainAt.IsZero() {
			break
		}
	}
	time.Sleep(drainLinger)
	a.tickHolder(ctx)
}

// holdsAny reports whether this node holds the addresses of an instance.
func (p *pairState) holdsAny() bool {
	for name := range p.h.Instances() {
		if p.h.InstanceRole(name) == model.VRRPMaster {
			return true
		}
	}
	return false
}
