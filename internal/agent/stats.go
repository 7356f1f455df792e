package agent

import (
	"context"
	"log/slog"
	"sort"
	"time"

	"pier.dev/pier/internal/agent/driver"
	"pier.dev/pier/internal/model"
)

const (
	// statsEvery is how often the members up of a load balancer are read
	// again from its data plane: an operator's page refreshes within
	// seconds, and a member's health check takes seconds to change.
	statsEvery = 10 * time.Second
	// statsBudget bounds how long one tick of the loop spends reading
	// members: one read takes about 1 ms, so a node with a thousand load
	// balancers spreads them over a few ticks instead of holding the loop
	// (and the address holder's 50 ms tick) for a second.
	statsBudget = 50 * time.Millisecond
)

// reporterOf is the driver that runs uuid here, if it can tell stats.
func (a *Agent) reporterOf(uuid string) (driver.Reporter, bool) {
	p, ok := a.held[uuid]
	if !ok {
		return nil, false
	}
	r, ok := a.drivers[p].(driver.Reporter)
	return r, ok
}

// withStats copies the driver's counts for uuid into r. They are part of
// what report compares, so a report is written again only when they
// changed.
func (a *Agent) withStats(r *model.NodeStatus, uuid string) {
	rep, ok := a.reporterOf(uuid)
	if !ok {
		return
	}
	s := rep.Stats(uuid)
	r.Reloads, r.RuntimeUpdates, r.MembersUp, r.Members = s.Reloads, s.RuntimeUpdates, s.MembersUp, s.Members
}

// refreshMembers asks uuid's driver which members are up now. A failure
// keeps the last numbers: the data plane's own health is reported by
// its state and VRRP role, not here.
func (a *Agent) refreshMembers(ctx context.Context, uuid string) {
	rep, ok := a.reporterOf(uuid)
	if !ok {
		return
	}
	a.statsAt[uuid] = readMembers(ctx, rep, uuid, a.cfg.Logger)
}

// readMembers asks rep which members of uuid are up and returns when it
// asked. A failure keeps the last numbers (refreshMembers).
func readMembers(ctx context.Context, rep driver.Reporter, uuid string, logger *slog.Logger) time.Time {
	at := time.Now()
	if err := rep.RefreshMembers(ctx, uuid); err != nil {
		logger.Debug("could not read members up", "uuid", uuid, "error", err)
	}
	return at
}

// refreshStats reads the members up of the load balancers applied here
// whose last read is statsEvery old, within statsBudget, and reports
// those whose numbers changed (report skips a report equal to the last
// one written). What the budget leaves is due at the next tick.
func (a *Agent) refreshStats(ctx context.Context) {
	start := time.Now()
	deadline, cancel := context.WithDeadline(ctx, start.Add(statsBudget))
	defer cancel()
	uuids := make([]string, 0, len(a.applied))
	for uuid := range a.applied {
		uuids = append(uuids, uuid)
	}
	sort.Strings(uuids)
	for _, uuid := range uuids {
		if time.Since(start) >= statsBudget {
			return
		}
		if start.Sub(a.statsAt[uuid]) < statsEvery {
			continue
		}
		a.refreshMembers(deadline, uuid)
		a.rereport(ctx, uuid)
	}
}
