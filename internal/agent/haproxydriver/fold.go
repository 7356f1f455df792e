package haproxydriver

import (
	"context"
	"maps"
	"time"
)

// scheduleFold arms sh's deferred reload: foldQuiet after the last
// landing, at most foldMax after the first one not yet folded; now fires
// it at once. It runs in sh's lane.
func (d *Driver) scheduleFold(sh *shard, now bool) {
	if sh.foldFirst.IsZero() {
		sh.foldFirst = time.Now()
	}
	delay := min(d.landing.quiet, d.landing.most-time.Since(sh.foldFirst))
	if now || delay < 0 {
		delay = 0
	}
	if sh.foldTimer != nil {
		sh.foldTimer.Stop()
	}
	sh.foldTimer = time.AfterFunc(delay, func() { d.foldIn(sh) })
}

// foldAllNow has every shard with landed load balancers fold them in at
// once. It may run in any lane: each fold enters its own.
func (d *Driver) foldAllNow() {
	d.mu.Lock()
	shards := make([]*shard, 0, len(d.shards))
	for _, sh := range d.shards {
		shards = append(shards, sh)
	}
	d.mu.Unlock()
	for _, sh := range shards {
		go d.foldIn(sh)
	}
}

// foldIn reloads sh if it has landed load balancers, and then unlands
// them. The reload runs outside sh's lane, which it holds only to take
// the file list and to account for the result: a reload of a large shard
// takes seconds, and new load balancers of the shard must land meanwhile
// (they join the next fold-in). process.Instance serialises the reload
// with any other of the shard, and stages the files when it starts. A
// failed reload is tried again foldMax later.
func (d *Driver) foldIn(sh *shard) {
	leave := d.enterLane(sh.at.Dir)
	d.mu.Lock()
	current := d.shards[sh.at.Dir] == sh
	d.mu.Unlock()
	if !current || len(sh.landed) == 0 || sh.folding != nil {
		leave()
		return
	}
	if sh.foldTimer != nil {
		sh.foldTimer.Stop()
		sh.foldTimer = nil
	}
	sh.foldFirst = time.Time{}
	sh.folding = maps.Clone(sh.landed)
	sh.proc.SetConfigFiles(sh.files())
	leave()

	start := time.Now()
	err := sh.proc.ReloadDeferred(context.Background())

	defer d.enterLane(sh.at.Dir)()
	folding := sh.folding
	sh.folding = nil
	d.mu.Lock()
	current = d.shards[sh.at.Dir] == sh
	d.mu.Unlock()
	if !current {
		return
	}
	if err != nil {
		d.cfg.Metrics.Reloads.WithLabelValues("failed").Inc()
		d.cfg.Logger.Warn("fold-in reload failed; the landing keeps serving, trying again later", "dir", sh.at.Dir, "landed", len(folding), "error", err)
		if len(sh.landed) > 0 {
			sh.foldFirst = time.Now()
			sh.foldTimer = time.AfterFunc(d.landing.most, func() { d.foldIn(sh) })
		}
		return
	}
	d.cfg.Metrics.Reloads.WithLabelValues("ok").Inc()
	d.noteLoad(sh)
	// Only those the reload loaded: others may have landed meanwhile, or
	// been loaded (and unlanded) by a reload of a change since.
	var folded []string
	for uuid, inst := range folding {
		if sh.landed[uuid] == inst {
			folded = append(folded, uuid)
		}
	}
	d.unlandSome(sh, folded)
	if len(sh.landed) > 0 {
		d.scheduleFold(sh, false)
	}
	d.cfg.Logger.Info("haproxy reloaded: landed load balancers folded into their shard", "dir", sh.at.Dir, "folded", len(folded),
		"lbs", len(sh.lbs), "took", time.Since(start).Round(time.Millisecond))
}

// unland runs when sh has loaded its file list (loaded): the load
// balancers it had landed are its own now. It runs in sh's lane.
func (d *Driver) unland(sh *shard) {
	if d.landing == nil || len(sh.landed) == 0 {
		return
	}
	if sh.foldTimer != nil {
		sh.foldTimer.Stop()
		sh.foldTimer = nil
	}
	sh.foldFirst = time.Time{}
	uuids := make([]string, 0, len(sh.landed))
	for uuid := range sh.landed {
		uuids = append(uuids, uuid)
	}
	d.unlandSome(sh, uuids)
}

// unlandSome takes load balancers sh now runs out of the landing: their
// addresses at once, their routes and servers after foldGrace. It runs
// in sh's lane.
func (d *Driver) unlandSome(sh *shard, uuids []string) {
	// The instances themselves, not d.lbs's: Apply records a new one
	// there only after its commit, and a reload of the same batch may
	// fold it in before.
	d.mu.Lock()
	for _, uuid := range uuids {
		if inst := sh.landed[uuid]; inst != nil {
			inst.landed = false
		}
	}
	d.mu.Unlock()
	for _, uuid := range uuids {
		delete(sh.landed, uuid)
	}
	d.dropLanded(uuids, "folded")
}

// dropLanded takes load balancers out of the landing: addresses now,
// the rest after foldGrace, then their spare backends are free again.
func (d *Driver) dropLanded(uuids []string, result string) {
	l := d.landing
	l.mu.Lock()
	defer l.mu.Unlock()
	var unbind, retire []fmtCommand
	var gone []*landed
	for _, uuid := range uuids {
		lb := l.lbs[uuid]
		if lb == nil {
			continue
		}
		delete(l.lbs, uuid)
		gone = append(gone, lb)
		unbind = append(unbind, commands(lb.plan.Unbind)...)
		retire = append(retire, commands(lb.plan.Retire)...)
		d.cfg.Metrics.Landings.WithLabelValues(result).Inc()
	}
	if len(gone) == 0 {
		return
	}
	ctx := context.Background()
	if err := d.landingBatch(ctx, unbind, false); err != nil {
		d.cfg.Logger.Warn("could not remove addresses from the landing", "error", err)
	}
	time.AfterFunc(l.grace, func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		if err := d.landingBatch(ctx, retire, false); err != nil {
			// Spares whose servers may still point at members stay out of
			// the free list; the landing's next restart frees them.
			d.cfg.Logger.Warn("could not retire landed load balancers", "error", err)
			return
		}
		for _, lb := range gone {
			l.free = append(l.free, lb.spares...)
		}
	})
}

// unlandRemoved takes a load balancer that is removed before its shard
// loaded it out of the landing and its shard's list; the shard never ran
// it, so no reload is needed. It runs in sh's lane.
func (d *Driver) unlandRemoved(sh *shard, inst *instance) {
	delete(sh.landed, inst.at.UUID)
	delete(sh.lbs, inst.at.UUID)
	sh.proc.SetConfigFiles(sh.files())
	d.dropLanded([]string{inst.at.UUID}, "removed")
	d.removeDir(inst.at.Dir)
	d.cfg.Logger.Info("landed load balancer removed before its shard loaded it", "uuid", inst.at.UUID, "dir", sh.at.Dir)
}
