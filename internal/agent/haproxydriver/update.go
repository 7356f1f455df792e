package haproxydriver

import (
	"context"
	"fmt"
	"os"
	"strings"

	"pier.dev/pier/internal/haproxy/layout"
	"pier.dev/pier/internal/haproxy/render"
	"pier.dev/pier/internal/model"
)

// join adds load balancer lb to its shard's file list and brings the
// shard's HAProxy to it: it starts the process, or adopts the one a
// previous agent left (reloading it only if what it runs differs), or
// reloads the running shard. If that fails with nothing running, lb
// leaves the list again.
func (d *Driver) join(ctx context.Context, lb *model.LoadBalancer, at layout.LB, certsChanged bool) (*instance, error) {
	sh := d.shardFor(at, d.cfg.Logger.With("lb", lb.Name, "uuid", lb.UUID))
	if err := d.writeProcessFiles(sh.at); err != nil {
		return nil, err
	}
	_, known := sh.lbs[at.UUID]
	sh.lbs[at.UUID] = at
	inst := &instance{at: at, sh: sh}
	if !sh.started {
		reloaded, err := d.startShard(ctx, sh, lb, certsChanged)
		if !sh.started {
			// Nothing runs: forget the shard, the next attempt starts afresh.
			d.mu.Lock()
			delete(d.shards, sh.at.Dir)
			d.mu.Unlock()
			return nil, err
		}
		if reloaded {
			inst.stats.Reloads++
		}
		return inst, err
	}
	sh.proc.SetConfigFiles(sh.files())
	changed, err := sh.proc.ConfigChanged()
	if err == nil && !changed && !certsChanged {
		// Adopted with this fragment already loaded (Recover listed it).
		return inst, nil
	}
	if err := d.reloadShard(ctx, sh); err != nil {
		if !known {
			delete(sh.lbs, at.UUID)
			// A restart after Recover must not list it either.
			_ = os.Remove(at.Config())
			sh.proc.SetConfigFiles(sh.files())
		}
		return nil, err
	}
	d.cfg.Logger.Info("load balancer joined its haproxy process", "lb", lb.Name, "uuid", lb.UUID, "vip", lb.VIP, "dir", sh.at.Dir, "lbs", len(sh.lbs))
	return inst, nil
}

// startShard starts the shard's HAProxy, or adopts the one a previous
// agent left running; an adopted HAProxy is reloaded only if the config
// it runs differs from the one just written.
func (d *Driver) startShard(ctx context.Context, sh *shard, lb *model.LoadBalancer, certsChanged bool) (reloaded bool, err error) {
	sh.proc.SetConfigFiles(sh.files())
	if err := sh.proc.Start(ctx); err != nil {
		d.cfg.Metrics.Reloads.WithLabelValues("failed").Inc()
		return false, fmt.Errorf("start haproxy: %w", err)
	}
	sh.started = true
	if !sh.proc.Adopted() {
		d.cfg.Metrics.Reloads.WithLabelValues("started").Inc()
		d.cfg.Logger.Info("haproxy running", "lb", lb.Name, "uuid", lb.UUID, "vip", lb.VIP, "fip", lb.FIP, "dir", sh.at.Dir)
		d.loaded(sh)
		return false, nil
	}
	changed, err := sh.proc.ConfigChanged()
	if err == nil && !changed && !certsChanged {
		d.cfg.Logger.Info("adopted running haproxy; config unchanged, no reload", "lb", lb.Name, "uuid", lb.UUID, "dir", sh.at.Dir)
		d.loaded(sh)
		return false, nil
	}
	// Start adopted a master that a previous agent left running with an
	// older config: bring it up to date.
	if err := d.reloadShard(ctx, sh); err != nil {
		return false, fmt.Errorf("adopted: %w", err)
	}
	d.cfg.Logger.Info("adopted running haproxy and reloaded it: its config was older", "lb", lb.Name, "uuid", lb.UUID, "dir", sh.at.Dir)
	return true, nil
}

// update moves a running HAProxy from what runs to r: through the
// runtime API when only members changed within the server slots, else by
// a reload.
func (d *Driver) update(ctx context.Context, inst *instance, lb *model.LoadBalancer, r *render.Result) error {
	plan, err := render.PlanUpdate(inst.result, r)
	if err != nil {
		return fmt.Errorf("plan: %w", err)
	}
	if inst.restarted() {
		// The supervisor restarted HAProxy from the last config it loaded,
		// which may predate runtime updates: reload the current file.
		plan = render.Plan{Reload: true, Reason: "haproxy was restarted by its supervisor"}
	}
	if !plan.Reload {
		err := d.runtimeUpdate(ctx, inst, plan)
		if err == nil {
			d.cfg.Metrics.RuntimeUpdates.WithLabelValues("ok").Inc()
			d.mu.Lock()
			inst.stats.RuntimeUpdates++
			d.mu.Unlock()
			d.cfg.Logger.Info("members updated without reload", "lb", lb.Name, "commands", len(plan.Commands))
			d.restage(ctx, inst, lb)
			return nil
		}
		d.cfg.Metrics.RuntimeUpdates.WithLabelValues("failed").Inc()
		d.cfg.Logger.Warn("runtime update failed; reloading instead", "lb", lb.Name, "error", err)
		plan.Reason = "runtime API update failed"
	}
	if err := d.reloadShard(ctx, inst.sh); err != nil {
		d.restoreFragment(inst)
		return err
	}
	d.mu.Lock()
	inst.stats.Reloads++
	d.mu.Unlock()
	d.cfg.Logger.Info("haproxy reloaded", "lb", lb.Name, "uuid", lb.UUID, "reason", plan.Reason)
	return nil
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
	if err := inst.sh.proc.Restage(ctx); err != nil {
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
