package agent

import (
	"context"
	"log/slog"
	"sort"
	"time"

	"pier.dev/pier/internal/agent/driver"
	"pier.dev/pier/internal/model"
)

// statsEvery is how often the members up of a load balancer are read
// again from its data plane: an operator's page refreshes within
// seconds, and a member's health check takes seconds to change.
const statsEvery = 10 * time.Second

// statsRead is what a background member read hands back to the loop:
// which load balancers it read, and when it began.
type statsRead struct {
	at    time.Time
	uuids []string
}

// reporterOf is the driver that runs uuid here, if it can tell stats.
func (a *Agent) reporterOf(uuid string) (driver.Reporter, bool) {
	p, ok := a.held[uuid]
	if !ok {
		return nil, false
	}
	r, ok := a.drivers[p].(driver.Reporter)
	return r, ok
}

// withStats copies the driver's counts for lb into r. They are part of
// what report compares, so a report is written again only when they
// changed. The members are also the gauges of the member-health panel.
func (a *Agent) withStats(r *model.NodeStatus, lb *model.LoadBalancer) {
	rep, ok := a.reporterOf(lb.UUID)
	if !ok {
		return
	}
	s := rep.Stats(lb.UUID)
	r.Reloads, r.RuntimeUpdates, r.MembersUp, r.Members = s.Reloads, s.RuntimeUpdates, s.MembersUp, s.Members
	if m := a.cfg.Metrics; m != nil && lb.Name != "" {
		m.MembersUp.WithLabelValues(lb.Name).Set(float64(s.MembersUp))
		m.Members.WithLabelValues(lb.Name).Set(float64(s.Members))
	}
}

// forgetStats drops the member gauges of a load balancer no longer
// applied here.
func (a *Agent) forgetStats(uuid string) {
	lb := a.applied[uuid]
	if m := a.cfg.Metrics; m != nil && lb != nil {
		m.MembersUp.DeleteLabelValues(lb.Name)
		m.Members.DeleteLabelValues(lb.Name)
	}
}

// readMembers asks rep which members of uuids are up and returns when it
// asked. A failure keeps the last numbers: the data plane's own health is
// reported by its state and VRRP role, not here.
func readMembers(ctx context.Context, rep driver.Reporter, uuids []string, logger *slog.Logger) time.Time {
	at := time.Now()
	if err := rep.RefreshMembers(ctx, uuids); err != nil {
		logger.Debug("could not read members up", "load_balancers", len(uuids), "error", err)
	}
	return at
}

// refreshStats starts reading the members up of the load balancers
// applied here whose last read is statsEvery old, in a goroutine, unless
// the last read is still running; finishStatsRead takes its result in
// the loop. Not in the loop itself: on a node of 1,000 load balancers
// the reads took 50 ms of every second there, and a change that came
// meanwhile waited for them (a tenth of endpoint changes served 20–40 ms
// late in the scale benchmark).
func (a *Agent) refreshStats(ctx context.Context) {
	if a.statsReading {
		return
	}
	start := time.Now()
	due := map[driver.Reporter][]string{}
	for uuid := range a.applied {
		if start.Sub(a.statsAt[uuid]) < statsEvery {
			continue
		}
		if rep, ok := a.reporterOf(uuid); ok {
			due[rep] = append(due[rep], uuid)
		}
	}
	if len(due) == 0 {
		return
	}
	a.statsReading = true
	logger := a.cfg.Logger
	go func() {
		read := statsRead{at: start}
		for rep, uuids := range due {
			sort.Strings(uuids)
			readMembers(ctx, rep, uuids, logger)
			read.uuids = append(read.uuids, uuids...)
		}
		select {
		case a.statsReads <- read:
		case <-ctx.Done():
		}
	}()
}

// finishStatsRead records a background member read and reports the load
// balancers whose numbers changed (report skips a report equal to the
// last one written).
func (a *Agent) finishStatsRead(ctx context.Context, r statsRead) {
	a.statsReading = false
	for _, uuid := range r.uuids {
		if _, ok := a.applied[uuid]; !ok {
			continue
		}
		if r.at.After(a.statsAt[uuid]) {
			a.statsAt[uuid] = r.at
		}
		a.rereport(ctx, uuid)
	}
}
