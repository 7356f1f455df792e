package agent

import (
	"context"
	"time"

	"pier.dev/pier/internal/model"
)

// report writes what this node applied into the LoadBalancer status, as
// this node's own entry: the active and the standby node both report. It
// reads nothing first: the last good spec and config are what this agent
// itself applied, and a report equal to the last one is not written again.
// The write itself happens in the background (statusWriter).
func (a *Agent) report(_ context.Context, lb *model.LoadBalancer, state model.State, configHash, message string) {
	role := a.roleOf(lb.UUID)
	r := model.NodeStatus{Node: a.cfg.Node, State: state, ConfigHash: configHash, Message: message, VRRP: role.VRRP, BGP: role.BGP}
	if state == model.StateActive {
		r.SpecHash = lb.SpecHash()
	} else if cur := a.applied[lb.UUID]; cur != nil {
		// Keep the record of the last spec that did apply: it still serves.
		r.SpecHash, r.ConfigHash = cur.SpecHash(), a.hashes[lb.UUID]
	}
	a.withStats(&r, lb)
	a.lastReport[lb.UUID] = model.NodeStatus{State: state, ConfigHash: configHash, Message: message}
	if last, ok := a.reported[lb.UUID]; ok && last.Equal(r) {
		return // nothing new: a write would only wake every watcher
	}
	stamped := r
	stamped.UpdatedAt = time.Now().UTC()
	a.writer.put(lb.UUID, stamped)
	a.reported[lb.UUID] = r
	a.reportedAt[lb.UUID] = stamped.UpdatedAt
}

// forgetLostReport: the stored status does not hold the report this
// agent last wrote for uuid, and none is waiting to be written. The write
// was lost (overwritten, or never reached the object) or the event is
// older than it: either way the next report must be written, not found
// equal to the last and dropped, or this node's entry stays missing for
// as long as nothing changes (a load balancer without the active node's
// report never gets its Ingress status). At worst this costs one write
// that finds the status unchanged.
func (a *Agent) forgetLostReport(uuid string, stored model.NodeStatus) {
	last, ok := a.reported[uuid]
	if !ok || a.writer.has(uuid) {
		return
	}
	if !reportHeld(stored, last) {
		delete(a.reported, uuid)
	}
}

// reportHeld reports whether stored, this node's entry as the store holds
// it, says what the agent's last report said. The stats (members, rates,
// recent errors) and the message are left out: they may come back from
// the store in another form (an empty list as none, invalid UTF-8
// replaced) and would make every event look like a lost write, and every
// rewrite another event.
func reportHeld(stored, last model.NodeStatus) bool {
	return stored.Node == last.Node && stored.State == last.State && stored.SpecHash == last.SpecHash &&
		stored.ConfigHash == last.ConfigHash && stored.VRRP == last.VRRP && stored.BGP == last.BGP
}

// lostReportAfter is how long after a report was queued its absence from
// the watched object counts as lost: long enough for the write and the
// watch event that carries it back, even on a slow API server.
const lostReportAfter = 10 * time.Second

// healLostReports writes again every report that is not pending, was
// queued more than lostReportAfter ago, and is not what the newest
// watched copy of its object holds for this node, on a placement that
// still names it. forgetLostReport does the same when an event arrives;
// this catches the report lost with no event after it: the last write
// to a load balancer that nothing changes again. Such a loss was once a
// store that took a write for done when its read ran out of time after a
// conflict (package apiretry says how); this stays as the net for any
// other, since a load balancer without its active node's report keeps
// its Ingress without status until something else changes it. It reads
// nothing: the watched copies are in memory; a rewrite that finds the
// report there after all costs one read.
func (a *Agent) healLostReports(ctx context.Context, now time.Time) {
	for uuid, last := range a.reported {
		if now.Sub(a.reportedAt[uuid]) < lostReportAfter || a.writer.has(uuid) {
			continue
		}
		lb := a.latest[uuid]
		if lb == nil || !lb.Placement.Has(a.cfg.Node) {
			continue
		}
		stored, _ := lb.Status.Report(a.cfg.Node)
		if reportHeld(stored, last) {
			continue
		}
		a.cfg.Logger.Info("status report missing from the stored load balancer; writing it again",
			"lb", lb.Name, "uuid", uuid, "stored_state", stored.State, "reported_state", last.State,
			"reported_at", a.reportedAt[uuid])
		delete(a.reported, uuid)
		a.rereport(ctx, uuid)
	}
}

// rereport writes uuid's last report again with its current role (the
// mover's) and stats.
func (a *Agent) rereport(ctx context.Context, uuid string) {
	last, ok := a.lastReport[uuid]
	if !ok {
		return
	}
	lb := a.applied[uuid]
	if lb == nil {
		lb = a.latest[uuid]
	}
	if lb == nil {
		return
	}
	a.report(ctx, lb, last.State, last.ConfigHash, last.Message)
}
