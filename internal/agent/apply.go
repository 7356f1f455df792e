package agent

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"pier.dev/pier/internal/agent/driver"
	"pier.dev/pier/internal/model"
)

func (a *Agent) applyPending(ctx context.Context) {
	uuids := make([]string, 0, len(a.pending))
	for uuid := range a.pending {
		uuids = append(uuids, uuid)
	}
	sort.Strings(uuids)
	for _, uuid := range uuids {
		if ctx.Err() != nil {
			return
		}
		lb := a.pending[uuid]
		delete(a.pending, uuid)
		if lb == nil || a.driverOf(lb) == nil {
			a.remove(uuid)
			continue
		}
		a.applyOne(ctx, lb)
	}
}

// applyOne hands lb to its driver and reports the outcome.
func (a *Agent) applyOne(ctx context.Context, lb *model.LoadBalancer) {
	if p, ok := a.held[lb.UUID]; ok && p != lb.Provider {
		a.remove(lb.UUID) // the other driver must let go first
	}
	a.held[lb.UUID] = lb.Provider
	start := time.Now()
	applied, err := a.driverOf(lb).Apply(ctx, lb)
	a.cfg.Metrics.ApplySeconds.Observe(time.Since(start).Seconds())
	if err != nil {
		a.failed[lb.UUID] = lb.SpecHash()
		if !errors.Is(err, driver.ErrRejected) {
			a.retry[lb.UUID] = time.Now().Add(retryAfter)
		}
		a.cfg.Logger.Error("apply failed; the previous config keeps serving", "lb", lb.Name, "uuid", lb.UUID, "error", err)
		a.report(ctx, lb, model.StateError, "", err.Error())
		return
	}
	delete(a.failed, lb.UUID)
	a.applied[lb.UUID], a.hashes[lb.UUID] = lb, applied.ConfigHash
	a.refreshMembers(ctx, lb.UUID) // members may have changed: report them with the apply
	a.report(context.WithoutCancel(ctx), lb, model.StateActive, applied.ConfigHash, "")
}

// driverOf is the driver that runs lb on this node, or nil when lb is
// not placed here or no driver runs its provider.
func (a *Agent) driverOf(lb *model.LoadBalancer) driver.Driver {
	if lb.Placement.Active != a.cfg.Node && lb.Placement.Standby != a.cfg.Node {
		return nil
	}
	return a.drivers[lb.Provider]
}

// remove stops the load balancer if a driver was given it here.
func (a *Agent) remove(uuid string) {
	if p, ok := a.held[uuid]; ok {
		a.drivers[p].Remove(uuid)
	}
	delete(a.held, uuid)
	delete(a.applied, uuid)
	delete(a.hashes, uuid)
	delete(a.retry, uuid)
	delete(a.failed, uuid)
	delete(a.reported, uuid)
	delete(a.lastReport, uuid)
	a.writer.forget(uuid)
	delete(a.statsAt, uuid)
	a.vrrp.forget(uuid)
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
	if a.cfg.StopOnExit {
		// The routes go first, as the addresses below. Without
		// StopOnExit the sessions end with the process, unannounced:
		// the routers keep the routes for the restart time (graceful
		// restart) while HAProxy keeps serving.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		a.stopBGP(ctx)
		cancel()
	}
	if a.vrrp != nil && a.cfg.StopOnExit {
		// keepalived first: it sends priority 0 and releases the
		// addresses, so a peer takes over before HAProxy stops here.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := a.vrrp.h.Stop(ctx); err != nil {
			a.cfg.Logger.Warn("vrrp: stop keepalived", "error", err)
		}
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
