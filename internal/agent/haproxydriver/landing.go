package haproxydriver

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"sync"
	"time"

	"pier.dev/pier/internal/haproxy/layout"
	"pier.dev/pier/internal/haproxy/process"
	"pier.dev/pier/internal/haproxy/render"
)

// A new load balancer in a running shard would wait for the shard's
// reload: HAProxy's start-up alone is 40-50 ms, and a shard of 750 load
// balancers reloads in 1.5 s. With a landing (Config.Landing) it is
// served within milliseconds instead, by the landing process (package
// render's landing.go): one more HAProxy per node, bound on the wildcard
// address of the HTTP port, that learns the load balancer through its
// runtime API only. Its fragment joins the shard's file list as usual,
// but the shard is not reloaded then: it folds the landed load balancers
// in later, with one reload for all of them (foldIn), after a quiet
// second without a new landing and at most foldMax after the first.
// Any reload of the shard (a change, a removal, a fold) loads them too;
// once it has, the shard binds their addresses, and the landing forgets
// them (unland): addresses at once, routes and servers after foldGrace,
// when the requests it took are done.
//
// Only load balancers the landing reproduces exactly land
// (render.Landable); the others, and any change to a landed one, take the
// reload as before.

const (
	foldQuiet = time.Second
	foldMax   = 10 * time.Second
	foldGrace = 2 * time.Second
	// landingRetry spaces attempts to start a landing that failed (the
	// port taken by another program without SO_REUSEPORT, say).
	landingRetry = 30 * time.Second
)

// landing is the landing process and what it serves.
type landing struct {
	at   layout.Process
	proc *process.Instance
	opts render.LandingOptions
	// quiet, most and grace are foldQuiet, foldMax and foldGrace (tests
	// change them).
	quiet, most, grace time.Duration

	// mu serialises landings and retirements, and guards the fields below.
	mu       sync.Mutex
	started  bool
	failedAt time.Time
	restarts uint64 // supervisor restarts already accounted for
	free     []int  // spare backends no landed load balancer holds
	nextID   int
	lbs      map[string]*landed // by uuid
}

// landed is one load balancer in the landing.
type landed struct {
	name   string
	id     int
	spares []int
	plan   render.LandingPlan
	sh     *shard
}

// newLanding returns the landing the driver's config asks for, or nil:
// none without shards (with one process per load balancer a new one
// starts a process anyway) or with no spare backends.
func newLanding(cfg Config, l layout.Layout, exited func()) *landing {
	if cfg.Processes == 0 || cfg.Landing.Backends <= 0 {
		return nil
	}
	o := cfg.Landing
	if o.Slots == 0 {
		o.Slots = cfg.Render.MinSlots
	}
	if o.Slots == 0 {
		o.Slots = 16 // render.Options' default
	}
	if o.BackendMaxConn == 0 {
		o.BackendMaxConn = cfg.Render.BackendMaxConn
	}
	if o.BackendMaxConn == 0 {
		o.BackendMaxConn = render.DefaultBackendMaxConn
	}
	at := l.Landing()
	return &landing{at: at, opts: o, quiet: foldQuiet, most: foldMax, grace: foldGrace, lbs: map[string]*landed{}, proc: process.New(process.Config{
		Binary: cfg.Binary,
		Dir:    at.Dir,
		Netns:  cfg.Netns,
		Logger: cfg.Logger.With("process", "landing"),
		OnExit: exited,
	})}
}

// startLanding starts the landing process if it is not running; the
// caller holds l.mu. A landing a previous agent left running is adopted
// and reloaded, so that it starts empty: its entries were that agent's.
func (d *Driver) startLanding(ctx context.Context) error {
	l := d.landing
	if l.started {
		return nil
	}
	if !l.failedAt.IsZero() && time.Since(l.failedAt) < landingRetry {
		return fmt.Errorf("landing failed to start %s ago", time.Since(l.failedAt).Round(time.Second))
	}
	err := d.launchLanding(ctx)
	if err != nil {
		l.failedAt = time.Now()
		d.cfg.Logger.Warn("landing process did not start; new load balancers wait for their shard's reload", "dir", l.at.Dir, "error", err)
		return err
	}
	l.started, l.failedAt = true, time.Time{}
	l.restarts = l.proc.Stats().Restarts
	l.free = l.free[:0]
	for i := range l.opts.Backends {
		l.free = append(l.free, i)
	}
	d.cfg.Logger.Info("landing process running", "dir", l.at.Dir, "port", l.opts.Port, "spare_backends", l.opts.Backends)
	return nil
}

func (d *Driver) launchLanding(ctx context.Context) error {
	l := d.landing
	if err := d.writeProcessFiles(l.at); err != nil {
		return err
	}
	cfg, err := render.LandingConfig(l.at, l.opts)
	if err != nil {
		return err
	}
	conf := filepath.Join(l.at.Dir, "landing.conf")
	if err := writeIfChanged(conf, cfg, 0o600); err != nil {
		return err
	}
	for _, name := range render.LandingMapNames() {
		if err := os.WriteFile(l.at.LandingMap(name), nil, 0o600); err != nil {
			return fmt.Errorf("landing map: %w", err)
		}
	}
	l.proc.SetConfigFiles([]string{l.at.Global, l.at.Conf(), conf})
	if err := l.proc.Start(ctx); err != nil {
		return err
	}
	if l.proc.Adopted() {
		return l.proc.Reload(ctx)
	}
	return nil
}

// startLandingSoon starts the landing in the background, so that the
// first landing does not wait for it.
func (d *Driver) startLandingSoon() {
	if d.landing == nil {
		return
	}
	go func() {
		d.landing.mu.Lock()
		defer d.landing.mu.Unlock()
		_ = d.startLanding(context.Background())
	}()
}

// landingChecks starts, side by side, HAProxy's check of the fragment of
// each change of batch that may land (landable): a fragment joins a list
// the shard reloads with later, so it is checked alone, and beside the
// landing commands rather than before them, as runtimeOnly does: the
// check (50-140 ms) takes far longer than the commands. Side by side, a
// burst of new load balancers in one shard lands within milliseconds
// each, not one check after the other. It runs in sh's lane.
func (d *Driver) landingChecks(ctx context.Context, sh *shard, batch []*change) map[*change]chan error {
	joining := 0
	for _, c := range batch {
		if c.inst == nil {
			joining++
		}
	}
	if joining > maxLandingBatch {
		// A burst (a cold start, a bulk apply): one check and one reload
		// of the shard load it sooner than a check each, side by side,
		// which at thousands of load balancers starved the machine (a
		// 3,000-Ingress start took 102 s instead of 12).
		return nil
	}
	var out map[*change]chan error
	for _, c := range batch {
		if c.inst != nil || !d.landable(sh, c) {
			continue
		}
		if out == nil {
			if err := d.writeProcessFiles(sh.at); err != nil {
				return nil
			}
			out = map[*change]chan error{}
		}
		checked := make(chan error, 1)
		go func() { checked <- d.checkCandidate(c.check, sh, c) }()
		out[c] = checked
	}
	return out
}

// maxLandingBatch is the most load balancers joining one shard at once
// that land; a larger batch takes the shard's reload (landingChecks).
const maxLandingBatch = 8

// landable reports whether c, a load balancer joining its shard sh, may
// land: the landing runs beside a running shard, the shard does not list
// it already, and the landing reproduces it (render.Landable).
func (d *Driver) landable(sh *shard, c *change) bool {
	l := d.landing
	if l == nil || !sh.started || !sh.proc.Running() {
		return false
	}
	d.mu.Lock()
	_, handedOver := d.handover[c.at.UUID]
	d.mu.Unlock()
	if _, listed := sh.lbs[c.at.UUID]; listed || handedOver {
		return false // an adopted shard may run it already, or its own process does
	}
	if reason := render.Landable(c.r, l.opts); reason != "" {
		d.cfg.Logger.Info("load balancer does not land; its shard reloads", "lb", c.lb.Name, "uuid", c.lb.UUID, "reason", reason)
		return false
	}
	return true
}

// land sends c's landing commands (c is landable) and returns what
// settle needs, or nil when c did not land: the landing is not running,
// has too few spare backends, or refused a command. c then takes the
// load path. It runs in sh's lane.
func (d *Driver) land(ctx context.Context, sh *shard, c *change) *landed {
	l := d.landing
	log := d.cfg.Logger.With("lb", c.lb.Name, "uuid", c.lb.UUID)
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := d.startLanding(ctx); err != nil {
		return nil
	}
	d.relandIfRestarted(ctx)
	pools := c.r.Pools()
	if len(l.free) < pools {
		log.Info("landing out of spare backends; its shard reloads, and every shard folds its landed load balancers in now", "free", len(l.free), "pools", pools)
		d.foldAllNow()
		return nil
	}
	spares := append([]int(nil), l.free[:pools]...)
	plan, err := render.PlanLanding(c.r, l.at, l.opts, l.nextID, spares)
	if err != nil {
		log.Warn("landing plan failed; its shard reloads", "error", err)
		return nil
	}
	if err := d.landingBatch(ctx, commands(plan.Land), true); err != nil {
		d.cfg.Metrics.Landings.WithLabelValues("failed").Inc()
		log.Warn("landing failed; its shard reloads", "error", err)
		d.retireNow(ctx, plan)
		return nil
	}
	l.free = l.free[pools:]
	lb := &landed{name: c.lb.Name, id: l.nextID, spares: spares, plan: plan, sh: sh}
	l.lbs[c.at.UUID] = lb
	l.nextID++
	return lb
}

// settle finishes c's landing once HAProxy's check of its fragment
// answered (checkErr): the fragment joins its shard's list, to be loaded
// by the deferred reload. A refused fragment leaves the landing, and c
// is refused. It runs in sh's lane.
func (d *Driver) settle(ctx context.Context, sh *shard, c *change, lb *landed, checkErr error) {
	err := checkErr
	if err == nil {
		err = d.install(c)
	}
	if err != nil {
		d.dropLanded([]string{c.at.UUID}, "failed")
		c.err = err
		return
	}
	sh.lbs[c.at.UUID] = c.at
	c.out = &instance{at: c.at, sh: sh, landed: true}
	sh.landed[c.at.UUID] = c.out
	sh.proc.SetConfigFiles(sh.files())
	d.cfg.Metrics.Landings.WithLabelValues("landed").Inc()
	d.landing.mu.Lock()
	free := len(d.landing.free)
	d.landing.mu.Unlock()
	d.cfg.Logger.Info("load balancer landed without reload", "lb", c.lb.Name, "uuid", c.lb.UUID, "vip", c.lb.VIP, "fip", c.lb.FIP,
		"dir", sh.at.Dir, "landing_id", lb.id, "landed", len(sh.landed), "free_spares", free)
	d.scheduleFold(sh, false)
}

// landingBatch sends cmds to the landing over one connection. strict
// stops at the first refused answer; otherwise refusals are logged (an
// entry already gone is what retiring wants anyway).
func (d *Driver) landingBatch(ctx context.Context, cmds []fmtCommand, strict bool) error {
	if len(cmds) == 0 {
		return nil
	}
	l := d.landing
	lines := make([]string, len(cmds))
	for i, c := range cmds {
		lines[i] = c.String()
	}
	return l.proc.RuntimeBatch(ctx, l.at.Socket(), lines, func(cmd, answer string) error {
		if answer == "" || runtimeOK(answer) {
			return nil
		}
		if strict {
			return fmt.Errorf("%s: %s", cmd, answer)
		}
		d.cfg.Logger.Debug("landing command refused", "command", cmd, "answer", answer)
		return nil
	})
}

// fmtCommand is a runtime command (encode.Command).
type fmtCommand = interface{ String() string }

// retireNow takes a failed landing back at once; the caller holds l.mu
// and has not yet taken the spares from the free list.
func (d *Driver) retireNow(ctx context.Context, plan render.LandingPlan) {
	if err := d.landingBatch(ctx, commands(plan.Unbind, plan.Retire), false); err != nil {
		d.cfg.Logger.Warn("could not take a failed landing back", "error", err)
	}
}

func commands[C fmtCommand](lists ...[]C) []fmtCommand {
	var out []fmtCommand
	for _, list := range lists {
		for _, c := range list {
			out = append(out, c)
		}
	}
	return out
}

// relandIfRestarted sends every landed load balancer's commands again
// when the supervisor restarted the landing (it came back from its file,
// empty), and has their shards fold them in now. The caller holds l.mu.
func (d *Driver) relandIfRestarted(ctx context.Context) {
	l := d.landing
	n := l.proc.Stats().Restarts
	if !l.started || n == l.restarts {
		return
	}
	l.restarts = n
	d.cfg.Logger.Warn("landing process restarted; landing its load balancers again until their shards fold them in", "landed", len(l.lbs))
	for uuid, lb := range l.lbs {
		if err := d.landingBatch(ctx, commands(lb.plan.Land), true); err != nil {
			d.cfg.Logger.Warn("could not land again", "lb", lb.name, "uuid", uuid, "error", err)
		}
	}
	d.foldAllNow()
}

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

// closeLanding stops (or leaves running, for the next agent to adopt and
// empty) the landing process. The caller holds neither d.mu nor l.mu.
func (d *Driver) closeLanding(stop bool) {
	l := d.landing
	if l == nil {
		return
	}
	l.mu.Lock()
	started := l.started
	l.started = false
	l.mu.Unlock()
	if !started {
		return
	}
	if !stop {
		l.proc.Detach()
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.inBackground([]string{l.at.Dir}, func() {
		if err := d.stopFor(l.proc, true)(context.Background()); err != nil {
			d.cfg.Logger.Warn("landing stop", "dir", l.at.Dir, "error", err)
		}
	})
}

// checkLanding lands again what a restarted landing lost (Drifted asks).
func (d *Driver) checkLanding() {
	l := d.landing
	l.mu.Lock()
	defer l.mu.Unlock()
	d.relandIfRestarted(context.Background())
}
