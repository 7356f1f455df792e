package agent

import (
	"context"
	"log/slog"
	"math"
	"slices"
	"sort"
	"time"

	"pier.dev/pier/internal/agent/driver"
	"pier.dev/pier/internal/model"
)

// StatsEvery is the longest a load balancer's members up go unread from
// its data plane: an operator's page refreshes within seconds, and a
// member's health check takes seconds to change.
const StatsEvery = 10 * time.Second

// statsEveryMin is how often the members up are read on a node of few
// load balancers: a health check's interval (render: inter 2s), so that
// a member that goes down shows within two of them.
const statsEveryMin = 2 * time.Second

// statsReadsPerSecond bounds the reads a node makes: 100 load balancers
// a second, what a node of 1,000 read at StatsEvery (50 ms of a CPU
// every second, in the background).
const statsReadsPerSecond = 100

// statsEvery is how often the members of each of n load balancers are
// read: every statsEveryMin while that stays within statsReadsPerSecond,
// slower on a larger node, and at least every StatsEvery.
func statsEvery(n int) time.Duration {
	return min(max(statsEveryMin, time.Duration(n)*time.Second/statsReadsPerSecond), StatsEvery)
}

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
	if len(s.MembersDown) > 0 {
		r.MembersDown = slices.Clone(s.MembersDown[:min(len(s.MembersDown), model.MaxMembersDown)])
	}
	if a.cfg.RatesEvery > 0 {
		w := a.rates[lb.UUID].advance(s, time.Now(), a.cfg.RatesEvery)
		a.rates[lb.UUID] = w
		r.RequestsPerSecond, r.ErrorShare, r.RecentErrors = w.perSecond, w.errorShare, w.errors
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

// rateWindow measures a load balancer's request rate over windows of at
// least RatesEvery: the driver's totals when the window began, and the
// rates the last full window measured. The recent errors are taken when
// a window closes too: their counts change with every error, and taking
// them at each report would make a stream of errors a status write every
// few seconds per load balancer, where the window makes it one.
type rateWindow struct {
	began                 time.Time // zero: no window yet
	requests, errors5xx   uint64
	perSecond, errorShare float64
	errors                []model.RequestError
}

// advance closes the window once it is at least every long and opens the next;
// before that it keeps the last window's rates and errors. Totals that
// went down (a driver made anew) open a window without a rate, and keep
// the errors.
func (w rateWindow) advance(s driver.Stats, now time.Time, every time.Duration) rateWindow {
	elapsed := now.Sub(w.began)
	switch {
	case w.began.IsZero() || s.Requests < w.requests || s.Errors5xx < w.errors5xx:
		return rateWindow{began: now, requests: s.Requests, errors5xx: s.Errors5xx, errors: w.errors}
	case elapsed < every:
		return w
	}
	requests := s.Requests - w.requests
	next := rateWindow{began: now, requests: s.Requests, errors5xx: s.Errors5xx,
		perSecond: twoFigures(float64(requests) / elapsed.Seconds()), errors: recentErrors(s.RecentErrors)}
	if requests > 0 {
		next.errorShare = twoFigures(float64(min(s.Errors5xx-w.errors5xx, requests)) / float64(requests))
	}
	return next
}

// recentErrors is a report's copy of the driver's list, at most
// model.MaxRecentErrors, each bounded again (a driver is trusted no more
// than a client: the API server refuses a report past the schema's
// bounds).
func recentErrors(in []model.RequestError) []model.RequestError {
	if len(in) == 0 {
		return nil
	}
	out := make([]model.RequestError, min(len(in), model.MaxRecentErrors))
	for i := range out {
		out[i] = in[i].Bounded()
	}
	return out
}

// twoFigures rounds x to two significant figures (1234 -> 1200, 0.0456
// -> 0.046): what an operator reads, and a rate that wobbles in its
// third figure does not rewrite the report every window.
func twoFigures(x float64) float64 {
	if x == 0 {
		return 0
	}
	scale := math.Pow(10, 1-math.Floor(math.Log10(math.Abs(x))))
	return math.Round(x*scale) / scale
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
	every := statsEvery(len(a.applied))
	due := map[driver.Reporter][]string{}
	for uuid := range a.applied {
		if start.Sub(a.statsAt[uuid]) < every {
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
