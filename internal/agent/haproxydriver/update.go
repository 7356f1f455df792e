package haproxydriver

import (
	"context"
	"fmt"
	"strings"

	"pier.dev/pier/internal/haproxy/layout"
	"pier.dev/pier/internal/haproxy/process"
	"pier.dev/pier/internal/haproxy/render"
	"pier.dev/pier/internal/model"
)

// startInstance starts HAProxy, or adopts the one a previous agent left
// running. An adopted HAProxy is reloaded only if the config it runs
// differs from the one just written.
func (d *Driver) startInstance(ctx context.Context, lb *model.LoadBalancer, at layout.LB, certsChanged bool) (*instance, error) {
	pa := d.layout.ProcessOf(at)
	if err := d.writeProcessFiles(pa); err != nil {
		return nil, err
	}
	proc := process.New(process.Config{
		Binary:      d.cfg.Binary,
		Dir:         pa.Dir,
		ConfigFiles: pa.Files(at),
		Netns:       d.cfg.Netns,
		Logger:      d.cfg.Logger.With("lb", lb.Name, "uuid", lb.UUID),
	})
	if err := proc.Start(ctx); err != nil {
		d.cfg.Metrics.Reloads.WithLabelValues("failed").Inc()
		return nil, fmt.Errorf("start haproxy: %w", err)
	}
	inst := &instance{at: at, proc: proc, procAt: pa}
	if !proc.Adopted() {
		d.cfg.Metrics.Reloads.WithLabelValues("started").Inc()
		d.cfg.Logger.Info("haproxy running", "lb", lb.Name, "uuid", lb.UUID, "vip", lb.VIP, "fip", lb.FIP, "dir", pa.Dir)
		return inst, nil
	}
	changed, err := proc.ConfigChanged()
	if err == nil && !changed && !certsChanged {
		d.cfg.Logger.Info("adopted running haproxy; config unchanged, no reload", "lb", lb.Name, "uuid", lb.UUID)
		return inst, nil
	}
	// Start adopted a master that a previous agent left running with an
	// older config: bring it up to date.
	if err := proc.Reload(ctx); err != nil {
		d.cfg.Metrics.Reloads.WithLabelValues("failed").Inc()
		return inst, fmt.Errorf("reload adopted haproxy: %w", err)
	}
	d.cfg.Metrics.Reloads.WithLabelValues("ok").Inc()
	inst.stats.Reloads++
	d.cfg.Logger.Info("adopted running haproxy and reloaded it: its config was older", "lb", lb.Name, "uuid", lb.UUID)
	return inst, nil
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
			inst.stats.RuntimeUpdates++
			d.cfg.Logger.Info("members updated without reload", "lb", lb.Name, "commands", len(plan.Commands))
			d.restage(ctx, inst, lb)
			return nil
		}
		d.cfg.Metrics.RuntimeUpdates.WithLabelValues("failed").Inc()
		d.cfg.Logger.Warn("runtime update failed; reloading instead", "lb", lb.Name, "error", err)
		plan.Reason = "runtime API update failed"
	}
	if err := inst.proc.Reload(ctx); err != nil {
		d.cfg.Metrics.Reloads.WithLabelValues("failed").Inc()
		return fmt.Errorf("reload haproxy: %w", err)
	}
	d.cfg.Metrics.Reloads.WithLabelValues("ok").Inc()
	inst.stats.Reloads++
	d.cfg.Logger.Info("haproxy reloaded", "lb", lb.Name, "uuid", lb.UUID, "reason", plan.Reason)
	return nil
}

// restage makes the file the runtime commands just matched the one a
// restart or a new agent starts from. If it fails, HAProxy serves the
// right state anyway; only a later restart or adoption reloads.
func (d *Driver) restage(ctx context.Context, inst *instance, lb *model.LoadBalancer) {
	if err := inst.proc.Restage(ctx); err != nil {
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
	return inst.proc.RuntimeBatch(ctx, inst.procAt.Socket(), cmds, func(cmd, answer string) error {
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
