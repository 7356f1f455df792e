package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"time"

	"pier.dev/pier/internal/agent/driver"
	"pier.dev/pier/internal/model"
)

// applyPending starts the pending applies and removals, at most
// Config.ApplyConcurrency at once and one at a time per load balancer; a
// load balancer whose apply is under way keeps its newest spec pending
// until that apply returns. Each runs in a goroutine and comes back
// through a.done (finishApply), so a slow apply holds up neither the
// loop nor the applies of other load balancers: one tenant's huge group
// must not hold up another's change.
func (a *Agent) applyPending(ctx context.Context) {
	if ctx.Err() != nil {
		return
	}
	a.cancelSuperseded()
	uuids := make([]string, 0, len(a.pending))
	for uuid := range a.pending {
		if _, busy := a.inflight[uuid]; !busy {
			uuids = append(uuids, uuid)
		}
	}
	sort.Strings(uuids)
	for _, uuid := range uuids {
		if len(a.inflight) >= a.concurrency {
			return
		}
		lb := a.pending[uuid]
		delete(a.pending, uuid)
		if lb == nil || a.driverOf(lb) == nil {
			a.startRemove(uuid)
			continue
		}
		a.startApply(ctx, lb)
	}
}

// applyResult is what an apply or a removal running in the background
// hands back to the loop.
type applyResult struct {
	uuid    string
	lb      *model.LoadBalancer // nil: a removal
	applied driver.Applied
	err     error
	took    time.Duration
	// membersRead is when the driver was asked which members are up
	// (zero: it was not).
	membersRead time.Time
}

// startApply hands lb to its driver in the background. A load balancer
// whose provider changed is first removed from the other driver.
func (a *Agent) startApply(ctx context.Context, lb *model.LoadBalancer) {
	var previous driver.Driver
	if p, ok := a.held[lb.UUID]; ok && p != lb.Provider {
		previous = a.drivers[p] // it must let go first
		a.forget(lb.UUID)
	}
	a.held[lb.UUID] = lb.Provider
	a.inflight[lb.UUID] = lb.SpecHash()
	actx, cancel := context.WithCancel(ctx)
	a.running[lb.UUID] = &runningApply{cancel: cancel, started: time.Now(), hash: lb.SpecHash(),
		keep: a.superseded[lb.UUID]}
	delete(a.superseded, lb.UUID)
	d := a.driverOf(lb)
	a.jobs.Add(1)
	go func() {
		defer a.jobs.Done()
		defer cancel()
		if previous != nil {
			previous.Remove(lb.UUID)
		}
		a.done <- runApply(actx, d, lb, a.cfg.Logger)
	}()
}

// runningApply is an apply under way: cancel ends it (the driver's
// `haproxy -c` of it is killed), why says why it was.
type runningApply struct {
	cancel  context.CancelFunc
	started time.Time
	hash    string // of the spec being applied
	// keep: the load balancer's previous apply was cancelled for a newer
	// spec; this one is not, so that specs arriving faster than a slow
	// load balancer applies cannot cancel every apply of it.
	keep bool
	why  string // "" while not cancelled
}

// supersedeAfter is how long an apply runs before a newer spec of its
// load balancer cancels it: far above a legitimate apply (a 10,000-path
// group takes about 1.5 s, a check of a 750-load-balancer shard 0.7 s),
// far below process.CheckTimeout, the most a check can take (30 s). A
// shorter apply finishes, and the newer spec follows it.
const supersedeAfter = 5 * time.Second

const supersededWhy = "a newer spec of its load balancer waits"

// cancelSuperseded cancels the applies whose work nobody wants any more:
// that of a load balancer deleted (or moved off this node) meanwhile, at
// once, and one that a newer spec waits for, once it has run
// supersedeAfter. A check that runs long (userlists to hash) holds its
// HAProxy process's lane, and every change of the other load balancers
// there waits behind it: it must not run on for a load balancer that is
// gone, nor for a spec that is already replaced.
func (a *Agent) cancelSuperseded() {
	if len(a.running) == 0 || len(a.pending) == 0 {
		return
	}
	for uuid, run := range a.running {
		next, queued := a.pending[uuid]
		if !queued || run.why != "" {
			continue
		}
		switch {
		case next == nil || a.driverOf(next) == nil:
			run.why = "its load balancer was deleted or left this node"
		case next.SpecHash() != run.hash && !run.keep && time.Since(run.started) >= supersedeAfter:
			run.why = supersededWhy
		default:
			continue
		}
		run.cancel()
		a.cfg.Logger.Info("apply cancelled", "uuid", uuid, "reason", run.why,
			"running_for", time.Since(run.started).Round(time.Millisecond))
	}
}

// runApply applies lb and, when it applied, reads which of its members
// are up, so that the report of the apply carries them: here, in the
// apply's goroutine, rather than in the loop, where a thousand applies
// finishing at once would each hold it for a runtime API call.
func runApply(ctx context.Context, d driver.Driver, lb *model.LoadBalancer, logger *slog.Logger) applyResult {
	start := time.Now()
	applied, err := d.Apply(ctx, lb)
	r := applyResult{uuid: lb.UUID, lb: lb, applied: applied, err: err, took: time.Since(start)}
	if rep, ok := d.(driver.Reporter); ok && err == nil {
		r.membersRead = readMembers(ctx, rep, []string{lb.UUID}, logger)
	}
	return r
}

// startRemove stops the load balancer in the background if a driver was
// given it here. What the agent knows of it goes at once.
func (a *Agent) startRemove(uuid string) {
	p, ok := a.held[uuid]
	a.forget(uuid)
	if !ok {
		return
	}
	d := a.drivers[p]
	a.held[uuid] = p // until the driver has let go
	a.inflight[uuid] = ""
	a.jobs.Add(1)
	go func() {
		defer a.jobs.Done()
		d.Remove(uuid)
		a.done <- applyResult{uuid: uuid}
	}()
}

// finishApply records what an apply or a removal did and reports it.
func (a *Agent) finishApply(ctx context.Context, r applyResult) {
	delete(a.inflight, r.uuid)
	if r.lb == nil {
		delete(a.held, r.uuid)
		return
	}
	lb := r.lb
	run := a.running[r.uuid]
	delete(a.running, r.uuid)
	a.cfg.Metrics.ApplySeconds.Observe(r.took.Seconds())
	if r.err != nil && run != nil && run.why != "" {
		// Cancelled on purpose: what runs is what ran before, and the
		// removal or the newer spec waiting in pending comes next. It
		// is neither a failure to report nor one to retry.
		if run.why == supersededWhy {
			a.superseded[lb.UUID] = true
		}
		a.cfg.Logger.Info("apply ended by its cancellation", "lb", lb.Name, "uuid", lb.UUID, "error", r.err)
		return
	}
	if r.err != nil {
		a.failed[lb.UUID] = lb.SpecHash()
		if !errors.Is(r.err, driver.ErrRejected) {
			a.retry[lb.UUID] = time.Now().Add(retryAfter)
			a.stale[lb.UUID] = true
		}
		a.cfg.Logger.Error("apply failed; the previous config keeps serving", "lb", lb.Name, "uuid", lb.UUID, "error", r.err)
		a.report(ctx, lb, model.StateError, "", r.err.Error())
		return
	}
	delete(a.failed, lb.UUID)
	delete(a.stale, lb.UUID)
	a.applied[lb.UUID], a.hashes[lb.UUID] = lb, r.applied.ConfigHash
	if !r.membersRead.IsZero() {
		a.statsAt[lb.UUID] = r.membersRead
	}
	a.report(context.WithoutCancel(ctx), lb, model.StateActive, r.applied.ConfigHash, "")
}

// waitApplies waits for the applies and removals under way, at shutdown:
// the drivers close only after them. A successful apply still counts as
// running here, so that shutdown reports it stopped.
func (a *Agent) waitApplies() {
	a.jobs.Wait()
	for {
		select {
		case r := <-a.done:
			delete(a.inflight, r.uuid)
			if r.lb != nil && r.err == nil {
				a.applied[r.uuid] = r.lb
			}
		default:
			return
		}
	}
}

// driverOf is the driver that runs lb on this node, or nil when lb is
// not placed here or no driver runs its provider.
func (a *Agent) driverOf(lb *model.LoadBalancer) driver.Driver {
	if !lb.Placement.Has(a.cfg.Node) {
		return nil
	}
	return a.drivers[lb.Provider]
}

// forget drops what the agent knows of load balancer uuid, but the
// driver it was given to (held): startRemove and startApply deal with
// that.
func (a *Agent) forget(uuid string) {
	a.forgetStats(uuid)
	delete(a.held, uuid)
	delete(a.applied, uuid)
	delete(a.hashes, uuid)
	delete(a.retry, uuid)
	delete(a.failed, uuid)
	delete(a.stale, uuid)
	delete(a.reported, uuid)
	delete(a.reportedAt, uuid)
	delete(a.lastReport, uuid)
	a.writer.forget(uuid)
	delete(a.statsAt, uuid)
	delete(a.served, uuid)
	delete(a.superseded, uuid)
	delete(a.rates, uuid)
}

// recover lets each driver stop what a previous agent left for load
// balancers no longer placed here, before the first event.
func (a *Agent) recover(ctx context.Context) error {
	lbs, err := a.cfg.Store.List(ctx)
	if err != nil {
		return fmt.Errorf("list load balancers: %w", err)
	}
	for p, d := range a.drivers {
		placed := map[string]bool{}
		for _, lb := range lbs {
			placed[lb.UUID] = lb.Provider == p && a.driverOf(lb) != nil
		}
		if err := d.Recover(ctx, placed); err != nil {
			return fmt.Errorf("%s driver: %w", p, err)
		}
	}
	return nil
}

func (a *Agent) shutdown() {
	a.waitApplies()
	if a.mover != nil {
		// The addresses go first (with StopOnExit): the other nodes take
		// over before the data plane stops here.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		a.mover.Close(ctx, a.cfg.StopOnExit)
		cancel()
	}
	for _, d := range a.drivers {
		for _, uuid := range d.Close(a.cfg.StopOnExit) {
			// The data plane no longer serves these: say so, or the next
			// start would publish their addresses before it runs them.
			if lb := a.applied[uuid]; lb != nil {
				a.report(context.Background(), lb, model.StatePending, "", "HAProxy stopped when pier exited")
			}
		}
	}
	a.writer.flush(writeTimeout)
}
