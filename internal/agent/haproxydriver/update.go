package haproxydriver

import (
	"context"
	"errors"
	"fmt"
	"os"

	"pier.dev/pier/internal/haproxy/layout"
	"pier.dev/pier/internal/haproxy/process"
	"pier.dev/pier/internal/haproxy/render"
	"pier.dev/pier/internal/model"
)

// change is one load balancer's newly written files waiting for its
// HAProxy process to load them (commit).
type change struct {
	lb           *model.LoadBalancer
	at           layout.LB
	inst         *instance // what runs now; nil: the load balancer joins its process
	r            *render.Result
	certsChanged bool

	// written: the load balancer's files hold r (Driver.writeLB).
	written bool
	// check is the context of the Apply that made the change: its end
	// (the load balancer deleted, the change superseded, the agent
	// stopping) cancels the `haproxy -c` of its fragment, and that of a
	// shard's set holding it (loadLive). Nothing else is cancelled: the
	// runtime commands and reloads of a lane, once begun, are seen
	// through, so that what runs and what the files say stay one.
	check context.Context

	done chan struct{} // closed once the change is loaded or refused
	out  *instance     // what runs afterwards (nil: nothing)
	err  error
}

// write writes c's files once (Driver.writeLB). A change to a load
// balancer that runs here is written only in its lane: after the runtime
// commands when they apply it, since the commands need none of the files
// and HAProxy reads them only at a load, which comes after in the same
// lane; before, the writes were a sixth of an endpoint change's way to
// traffic at 3,000 Ingresses (their renames wait on the file system's
// journal).
func (c *change) write(d *Driver) error {
	if c.written {
		return nil
	}
	if err := d.writeLB(c.at, c.r); err != nil {
		return err
	}
	c.written = true
	return nil
}

// commit brings c into its HAProxy process. Applies of the load
// balancers packed into one process meet in its lane: whichever gets in
// first loads every change waiting by then, with one check and one
// reload, and the others find theirs done. A cold start of many load
// balancers into a few shards thus costs a few reloads per shard, not
// one per load balancer. With one process per load balancer a lane only
// ever holds its own change.
func (d *Driver) commit(ctx context.Context, pa layout.Process, c *change) {
	ctx = context.WithoutCancel(ctx) // the lane's work; checks use c.check
	d.mu.Lock()
	d.waiting[pa.Dir] = append(d.waiting[pa.Dir], c)
	d.mu.Unlock()
	defer d.enterLane(pa.Dir)()
	select {
	case <-c.done:
		return
	default:
	}
	d.mu.Lock()
	batch := d.waiting[pa.Dir]
	delete(d.waiting, pa.Dir)
	d.mu.Unlock()
	d.waitStopped(pa.Dir)
	d.loadBatch(ctx, batch)
	for _, b := range batch {
		close(b.done)
	}
}

// loadBatch applies the changes of one process: member changes through
// the runtime API, the rest with one load. When a load of several
// changes fails, each is checked alone and loaded alone, so that only
// the one HAProxy refuses is refused.
func (d *Driver) loadBatch(ctx context.Context, batch []*change) {
	batch = d.dropCancelled(batch)
	if len(batch) == 0 {
		return
	}
	sh := d.shardFor(batch[0].at, d.cfg.Logger.With("lb", batch[0].lb.Name, "uuid", batch[0].lb.UUID))
	var loads []*change
	checks := d.landingChecks(ctx, sh, batch)
	var landings []*change
	landedAs := map[*change]*landed{}
	for _, c := range batch {
		// A landed load balancer is not in its shard's running config yet:
		// any change to it loads it (and so folds it in).
		if c.inst != nil && !c.inst.landed && d.runtimeOnly(ctx, c) {
			continue
		}
		if err := c.write(d); err != nil {
			c.out, c.err = c.inst, err
			continue
		}
		if checked := checks[c]; checked != nil {
			if lb := d.land(ctx, sh, c); lb != nil {
				landings, landedAs[c] = append(landings, c), lb
				continue
			}
			// The load installs the fragment: it must pass the check.
			if err := <-checked; err != nil {
				c.err = err
				continue
			}
		}
		loads = append(loads, c)
	}
	// Every landing of the batch serves by now; the checks end it.
	for _, c := range landings {
		d.settle(ctx, sh, c, landedAs[c], <-checks[c])
	}
	if len(loads) == 0 {
		return
	}
	loads, err := d.loadLive(ctx, sh, loads)
	if err == nil || len(loads) == 1 || !errors.Is(err, process.ErrCheckFailed) {
		return
	}
	d.cfg.Logger.Warn("haproxy refused a batch of changes; loading them one by one", "dir", sh.at.Dir, "changes", len(loads), "error", err)
	for _, c := range loads {
		c.out = nil
		c.err = d.loadAlone(ctx, c)
	}
}

// loadAlone checks c's fragment alone before loading it (packed
// processes only: a process of its own checks its single fragment when
// it loads).
func (d *Driver) loadAlone(ctx context.Context, c *change) error {
	sh := d.shardFor(c.at, d.cfg.Logger.With("lb", c.lb.Name, "uuid", c.lb.UUID))
	if d.packs() {
		if err := writeIfChanged(c.at.Candidate(), c.r.Fragment, 0o600); err != nil {
			return err
		}
		if err := d.checkAlone(c.check, sh, c); err != nil {
			c.out = c.inst
			return err
		}
	}
	_, err := d.loadLive(ctx, sh, []*change{c})
	return err
}

// dropCancelled settles the changes whose Apply was cancelled before
// their lane took them, and returns the others.
func (d *Driver) dropCancelled(cs []*change) []*change {
	live := cs[:0:0]
	for _, c := range cs {
		if err := c.check.Err(); err != nil {
			c.out, c.err = c.inst, fmt.Errorf("apply cancelled: %w", err)
			continue
		}
		live = append(live, c)
	}
	return live
}

// loadLive is load with the shard's check cancelled as soon as one of
// cs is: a set holding a fragment nobody wants any more (its load
// balancer deleted, or a newer spec waiting) is not checked to its end,
// which a costly one (userlists to hash, up to process.CheckTimeout)
// would make every other change of the shard wait for. The changes that
// are still wanted are then loaded again, without the cancelled ones
// (their fragments were taken back by load); live are those.
func (d *Driver) loadLive(ctx context.Context, sh *shard, cs []*change) (live []*change, err error) {
	for {
		checkCtx, stop := cancelledByAny(ctx, cs)
		err = d.load(checkCtx, sh, cs)
		stop()
		if err == nil {
			return cs, nil // loaded, the cancelled ones too if their check had passed
		}
		live = d.dropCancelled(cs)
		if len(live) == len(cs) || len(live) == 0 {
			return live, err
		}
		d.cfg.Logger.Info("shard check cancelled: a load balancer of the batch was deleted or superseded; loading the others",
			"dir", sh.at.Dir, "cancelled", len(cs)-len(live), "loading", len(live))
		cs = cs[:0:0]
		for _, c := range live {
			c.out, c.err = nil, nil
			if d.packs() { // load took the fragment back
				if err := writeIfChanged(c.at.Candidate(), c.r.Fragment, 0o600); err != nil {
					c.out, c.err = c.inst, err
					continue
				}
			}
			cs = append(cs, c)
		}
		if len(cs) == 0 {
			return live, err
		}
		// A shard that failed to start was forgotten: start afresh.
		sh = d.shardFor(cs[0].at, d.cfg.Logger.With("lb", cs[0].lb.Name, "uuid", cs[0].lb.UUID))
	}
}

// cancelledByAny is ctx, cancelled as soon as the check context of one
// of cs is; stop releases it.
func cancelledByAny(ctx context.Context, cs []*change) (context.Context, func()) {
	checkCtx, cancel := context.WithCancel(ctx)
	stops := make([]func() bool, 0, len(cs))
	for _, c := range cs {
		stops = append(stops, context.AfterFunc(c.check, cancel))
	}
	return checkCtx, func() {
		for _, s := range stops {
			s()
		}
		cancel()
	}
}

// load installs the changes' fragments in the process's file list and
// starts, adopts or reloads the process once. On failure the list is as
// it was: a load balancer that was joining leaves it, a changed one gets
// back the fragment that runs. It sets each change's out and err.
func (d *Driver) load(ctx context.Context, sh *shard, cs []*change) error {
	err := d.loadInstalled(ctx, sh, cs)
	for _, c := range cs {
		c.err = err
		if c.out == nil {
			c.out = c.inst
		}
	}
	return err
}

func (d *Driver) loadInstalled(ctx context.Context, sh *shard, cs []*change) error {
	if err := d.writeProcessFiles(sh.at); err != nil {
		return err
	}
	known := map[string]bool{}
	certsChanged, joinsOnly := false, true
	for _, c := range cs {
		if err := d.install(c); err != nil {
			return err
		}
		_, known[c.at.UUID] = sh.lbs[c.at.UUID]
		sh.lbs[c.at.UUID] = c.at
		certsChanged = certsChanged || c.certsChanged
		joinsOnly = joinsOnly && c.inst == nil
	}
	if !sh.started {
		reloaded, err := d.startShard(ctx, sh, cs, certsChanged)
		if !sh.started {
			// Nothing runs: forget the shard, the next attempt starts afresh.
			d.mu.Lock()
			delete(d.shards, sh.at.Dir)
			d.mu.Unlock()
			return err
		}
		// Running, adopted even if bringing it up to date failed: the next
		// attempt must reload these instances, not adopt them again.
		d.joined(sh, cs, reloaded)
		if err == nil {
			d.handOver(cs)
		}
		return err
	}
	sh.proc.SetConfigFiles(sh.files())
	if changed, err := sh.proc.ConfigChanged(); err == nil && !changed && !certsChanged && joinsOnly {
		d.joined(sh, cs, false) // adopted with these fragments loaded (Recover listed them)
		d.handOver(cs)
		return nil
	}
	if err := d.reloadShard(ctx, sh); err != nil {
		d.undo(sh, cs, known)
		return err
	}
	d.joined(sh, cs, true)
	d.handOver(cs)
	d.cfg.Logger.Info("haproxy reloaded", "lb", cs[0].lb.Name, "uuid", cs[0].lb.UUID, "dir", sh.at.Dir, "lbs", len(sh.lbs), "changes", len(cs))
	return nil
}

// install puts a packed load balancer's new fragment in place of the one
// its process lists (a process of its own reads the fragment written by
// Apply, and checks it itself before loading).
func (d *Driver) install(c *change) error {
	if !d.packs() {
		return nil
	}
	if err := os.Rename(c.at.Candidate(), c.at.Config()); err != nil {
		return fmt.Errorf("install %s: %w", c.at.Config(), err)
	}
	return nil
}

// undo takes back what a failed reload tried: joining load balancers
// leave the list (and their fragment goes, so that a restart does not
// list them either), changed ones get back the fragment that runs.
func (d *Driver) undo(sh *shard, cs []*change, known map[string]bool) {
	for _, c := range cs {
		switch {
		case c.inst != nil:
			d.restoreFragment(c.inst)
		case !known[c.at.UUID]:
			delete(sh.lbs, c.at.UUID)
			_ = os.Remove(c.at.Config())
		}
	}
	sh.proc.SetConfigFiles(sh.files())
}

// joined records that the changes now run in sh: a new instance for each
// load balancer that joined, a reload counted for each when there was one.
func (d *Driver) joined(sh *shard, cs []*change, reloaded bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, c := range cs {
		if c.out == nil && c.inst == nil {
			c.out = &instance{at: c.at, sh: sh}
			d.cfg.Logger.Info("load balancer joined its haproxy process", "lb", c.lb.Name, "uuid", c.lb.UUID, "vip", c.lb.VIP, "dir", sh.at.Dir, "lbs", len(sh.lbs))
		}
		if reloaded {
			if c.out != nil {
				c.out.stats.Reloads++
			} else {
				c.inst.stats.Reloads++
			}
		}
	}
}

// startShard starts the shard's HAProxy, or adopts the one a previous
// agent left running; an adopted HAProxy is reloaded only if the config
// it runs differs from the one just written.
func (d *Driver) startShard(ctx context.Context, sh *shard, cs []*change, certsChanged bool) (reloaded bool, err error) {
	first := cs[0].lb // named in the log lines: with one process per load balancer, the only one
	log := d.cfg.Logger.With("lb", first.Name, "uuid", first.UUID, "dir", sh.at.Dir, "lbs", len(sh.lbs))
	sh.proc.SetConfigFiles(sh.files())
	if err := sh.proc.Start(ctx); err != nil {
		d.cfg.Metrics.Reloads.WithLabelValues("failed").Inc()
		return false, fmt.Errorf("start haproxy: %w", err)
	}
	sh.started = true
	if !sh.proc.Adopted() {
		d.cfg.Metrics.Reloads.WithLabelValues("started").Inc()
		log.Info("haproxy running", "vip", first.VIP, "fip", first.FIP)
		d.loaded(sh)
		d.startLandingSoon()
		return false, nil
	}
	changed, err := sh.proc.ConfigChanged()
	if err == nil && !changed && !certsChanged {
		log.Info("adopted running haproxy; config unchanged, no reload")
		d.loaded(sh)
		d.startLandingSoon()
		return false, nil
	}
	// Start adopted a master that a previous agent left running with an
	// older config: bring it up to date.
	if err := d.reloadShard(ctx, sh); err != nil {
		return false, fmt.Errorf("adopted: %w", err)
	}
	log.Info("adopted running haproxy and reloaded it: its config was older")
	d.startLandingSoon()
	return true, nil
}
