package haproxydriver

import (
	"context"
	"fmt"
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
