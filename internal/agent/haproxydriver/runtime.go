package haproxydriver

import (
	"context"
	"fmt"
	"strings"
	"time"

	"pier.dev/pier/internal/haproxy/render"
	"pier.dev/pier/internal/model"
)

// runtimeOnly applies c through the runtime API when PlanUpdate allows
// it (members within the server slots, route map entries, new pools in
// spares), and reports whether it dealt with c
// (applied, or refused by the check); anything else (or a refused
// command) needs a load.
func (d *Driver) runtimeOnly(ctx context.Context, c *change) bool {
	inst := c.inst
	if inst.restarted() {
		// The supervisor restarted HAProxy from the last config it loaded,
		// which may predate runtime updates: reload the current file.
		return false
	}
	if inst.sh.folding != nil {
		// A fold-in reload (landing.go) runs outside the lane with the
		// files as they were when it began: commands now could reach only
		// the worker it replaces. The load path reloads after it.
		d.cfg.Logger.Info("reload needed", "lb", c.lb.Name, "uuid", c.lb.UUID, "reason", "its shard is loading landed load balancers")
		return false
	}
	start := time.Now()
	plan, err := render.PlanUpdate(inst.result, c.r)
	if err != nil || plan.Reload {
		if err == nil {
			d.cfg.Logger.Info("reload needed", "lb", c.lb.Name, "uuid", c.lb.UUID, "reason", plan.Reason)
		}
		return false
	}
	planned := time.Since(start)
	if err := d.runtimeUpdate(ctx, inst, plan); err != nil {
		d.cfg.Metrics.RuntimeUpdates.WithLabelValues("failed").Inc()
		d.cfg.Logger.Warn("runtime update failed; reloading instead", "lb", c.lb.Name, "error", err)
		return false
	}
	sent := time.Since(start)
	c.r.RunsWith(plan) // the process knows the maps and pools by the names it loaded
	// The files follow what now runs: the check below reads the fragment,
	// and a later load or restart reads them all.
	if err := c.write(d); err != nil {
		d.cfg.Logger.Warn("could not write the updated files; taking the runtime update back", "lb", c.lb.Name, "error", err)
		d.takeBack(ctx, inst, c)
		c.out, c.err = inst, err
		return true
	}
	// The new members and routes serve from here; the fragment is
	// checked after the commands (checkUpdated says why).
	fragmentChecked, refused := d.checkUpdated(ctx, inst, c, plan)
	if refused {
		return true
	}
	checked := time.Since(start)
	d.cfg.Metrics.RuntimeUpdates.WithLabelValues("ok").Inc()
	d.mu.Lock()
	inst.stats.RuntimeUpdates++
	d.mu.Unlock()
	if err := d.install(c); err != nil {
		d.cfg.Logger.Warn("could not install the updated fragment", "lb", c.lb.Name, "error", err)
	}
	d.restage(ctx, inst, c.lb)
	msg := "members updated without reload"
	if plan.Routes {
		msg = "routes updated without reload"
	}
	d.cfg.Logger.Info(msg, "lb", c.lb.Name, "commands", len(plan.Commands),
		"plan_took", planned, "commands_took", sent-planned, "fragment_checked", fragmentChecked, "check_took", checked-sent,
		"install_took", time.Since(start)-checked)
	c.out = inst
	return true
}

// checkUpdated checks c's fragment once its runtime update is sent, as
// runtimeOnly needs it: checked tells whether haproxy -c ran, refused
// that it refused the fragment (the update is taken back, c rejected).
//
// In a shard the fragment joins a list other load balancers reload with, so it is checked
// alone; the check (40–60 ms of a CPU) runs after the commands rather
// than before or beside them: before, it was most of the time an
// endpoint change took to serve, and beside, its haproxy -c took the
// CPU the commands needed. The fragment differs from the one that
// runs only in what PlanUpdate allows at runtime; should HAProxy
// refuse it all the same, the commands are taken back and the change
// is rejected. A member change whose fragment differs from the
// checked one only in server addresses, weights and states
// (render.MembersOnly) is not checked again: those words are typed,
// so HAProxy cannot refuse what it accepted with other values, and
// the check cost several times the rest of an endpoint change.
func (d *Driver) checkUpdated(ctx context.Context, inst *instance, c *change, plan render.Plan) (checked, refused bool) {
	if !d.packs() {
		return false, false
	}
	if !plan.Routes && render.MembersOnly(inst.result.Fragment, c.r.Fragment) {
		d.cfg.Metrics.FragmentChecks.WithLabelValues("skipped").Inc()
		return false, false
	}
	if err := d.checkAlone(c.check, inst.sh, c); err != nil {
		d.takeBack(ctx, inst, c)
		c.out, c.err = inst, err
		return false, true
	}
	return true, false
}

// takeBack returns the members of c's load balancer to the slots of the
// result that runs, after runtime commands HAProxy's check of the new
// fragment then refused. If that fails too, a reload of the last good
// set does it.
func (d *Driver) takeBack(ctx context.Context, inst *instance, c *change) {
	back, err := render.PlanUpdate(c.r, inst.result)
	if err == nil && !back.Reload {
		if err = d.runtimeUpdate(ctx, inst, back); err == nil {
			inst.result.RunsWith(back)
		}
	} else if err == nil {
		err = fmt.Errorf("taking back needs a reload: %s", back.Reason)
	}
	if err != nil {
		d.cfg.Logger.Warn("could not take back refused members; reloading the last good set", "lb", c.lb.Name, "error", err)
		if err := d.reloadShard(ctx, inst.sh); err != nil {
			d.cfg.Logger.Error("reload of the last good set failed", "lb", c.lb.Name, "error", err)
		}
	}
}

// restoreFragment puts back the fragment that runs after its shard
// failed to reload with a new one, when the shard packs others: their
// next reload must not carry it.
func (d *Driver) restoreFragment(inst *instance) {
	if !d.packs() || inst.result == nil {
		return
	}
	if err := writeIfChanged(inst.at.Config(), inst.result.Fragment, 0o600); err != nil {
		d.cfg.Logger.Warn("could not restore the fragment that runs", "uuid", inst.at.UUID, "error", err)
	}
}

// restage makes the file the runtime commands just matched the one a
// restart or a new agent starts from. If it fails, HAProxy serves the
// right state anyway; only a later restart or adoption reloads.
func (d *Driver) restage(ctx context.Context, inst *instance, lb *model.LoadBalancer) {
	restage := inst.sh.proc.Restage
	if d.packs() {
		// The fragment, the only file that changed, was checked alone, or
		// differs from one that was only in member values (MembersOnly):
		// it replaces its copy in the active set.
		restage = func(ctx context.Context) error { return inst.sh.proc.RestageFile(ctx, inst.at.Config()) }
	}
	if err := restage(ctx); err != nil {
		d.cfg.Logger.Warn("could not record the updated config as last-known-good", "lb", lb.Name, "error", err)
	}
}

// runtimeUpdate sends the whole plan over one runtime API connection,
// checking each answer; the first refused one stops it.
func (d *Driver) runtimeUpdate(ctx context.Context, inst *instance, plan render.Plan) error {
	cmds := make([]string, len(plan.Commands))
	for i, c := range plan.Commands {
		cmds[i] = c.String()
	}
	return inst.sh.proc.RuntimeBatch(ctx, inst.sh.at.Socket(), cmds, func(cmd, answer string) error {
		if answer != "" && !runtimeOK(answer) {
			return fmt.Errorf("%s: %s", cmd, answer)
		}
		return nil
	})
}

// runtimeOK tells a harmless answer from an error: `set server … addr`
// answers with a description of the change, other set commands answer
// nothing.
func runtimeOK(answer string) bool {
	return strings.Contains(answer, "changed from") || strings.Contains(answer, "no need to change")
}
