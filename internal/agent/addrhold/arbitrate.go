package addrhold

import (
	"time"

	"pier.dev/pier/internal/model"
)

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
func (m *Mover) arbitrate() {
	hb := m.heartbeats
	if hb == nil {
		return
	}
	now := time.Now()
	for name, in := range m.h.Instances() {
		if in.Active {
			continue // the active node of the pair is the one that stays
		}
		c := claim{role: m.h.InstanceRole(name), heldFor: now.Sub(m.h.Since(name)),
			peerAlive: hb.Alive(in.Peer), peerWritten: hb.ReportsWrittenAt(in.Peer)}
		for _, uuid := range in.UUIDs {
			if lb := m.placed[uuid]; lb != nil {
				if r, ok := lb.Status.Report(in.Peer); ok && r.VRRP == model.VRRPMaster {
					c.peerMaster = true
				}
			}
			if t, ok := m.masterReportedAt[uuid]; ok && (c.myReport.IsZero() || t.Before(c.myReport)) {
				c.myReport = t
			}
		}
		if m.h.Fenced(name) {
			switch {
			case !c.peerMaster || !c.peerAlive:
				m.unfence(name, "the active node no longer claims the addresses", "peer", in.Peer,
					"peer_master", c.peerMaster, "peer_alive", c.peerAlive)
			case m.healed(name, in, now):
				m.unfence(name, "the active node's adverts reach this node again: the split brain is over",
					"peer", in.Peer, "peer_address", in.PeerAddress)
			}
			continue
		}
		if !c.contested() {
			delete(m.claimSince, name)
			continue
		}
		if m.claimSince[name].IsZero() {
			m.claimSince[name] = now
		}
		if now.Sub(m.claimSince[name]) < fenceConfirm {
			continue
		}
		delete(m.claimSince, name)
		m.h.Fence(name, true, "why", "split brain: the active node holds the addresses too", "peer", in.Peer,
			"master_reported_at", c.myReport, "peer_reports_written_at", c.peerWritten)
		m.fencedAt[name] = now
	}
}

func (m *Mover) unfence(name, why string, attrs ...any) {
	m.h.Fence(name, false, append([]any{"why", why}, attrs...)...)
	delete(m.fencedAt, name)
	delete(m.healSince, name)
}

// healed reports whether the active node's adverts for fenced instance
// in have reached this node, through the same input filter keepalived's
// own socket sees, steadily for healConfirm since the fence: the nodes
// hear each other again. Unfenced, keepalived here hears the active
// node's adverts and stays BACKUP, a hot standby again, rather than
// waiting in FAULT until the active node fails and says so through the
// API server.
func (m *Mover) healed(name string, in *Instance, now time.Time) bool {
	if m.adverts == nil || in.RouterID == 0 {
		return false
	}
	heard := m.adverts.LastHeard(in.RouterID, in.PeerAddress)
	if !heard.After(m.fencedAt[name]) || now.Sub(heard) > healFresh {
		delete(m.healSince, name)
		return false
	}
	if m.healSince[name].IsZero() {
		m.healSince[name] = now
	}
	return now.Sub(m.healSince[name]) >= healConfirm
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
