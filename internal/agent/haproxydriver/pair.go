package haproxydriver

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"pier.dev/pier/internal/agent/driver"
	"pier.dev/pier/internal/haproxy/render"
)

var (
	_ driver.HealthChecker = (*Driver)(nil)
	_ driver.Drainer       = (*Driver)(nil)
)

// Healthy reports whether load balancer uuid was applied here and the
// HAProxy master of its shard runs now. It does no I/O: the master's liveness is what
// the process supervisor already tracks (Wait for its child, a 20 ms
// poll for an adopted master). The master stands for its workers too:
// HAProxy 2.6 exits the master when a worker dies (exit-on-failure,
// measured under 10 ms) and a worker exits when the master dies (under
// 20 ms), and a started or restarted master counts as running only once
// `show proc` lists a worker.
func (d *Driver) Healthy(uuid string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	inst := d.lbs[uuid]
	return inst != nil && inst.hash != "" && inst.sh.proc.Running()
}

// Drain switches the drain mode of every HAProxy process on this node:
// while on, each response carries "Connection: close" and its client
// connection closes after it (render.DrainCommands). The switch goes to
// each running process over the runtime API, then into its process.conf,
// from which every later start and reload take it. A process the
// supervisor restarts meanwhile comes up from its last loaded files with
// the old value until the reload that Drifted asks for. It tries every
// process and returns the failures joined. Each process is switched in
// its lane, after the apply under way there.
func (d *Driver) Drain(ctx context.Context, on bool) error {
	d.mu.Lock()
	d.draining = on
	procs := d.processes()
	d.mu.Unlock()
	var errs []error
	for _, sh := range procs {
		leave := d.enterLane(sh.at.Dir)
		err := d.drainProcess(ctx, sh, on)
		leave()
		if err != nil {
			errs = append(errs, fmt.Errorf("drain %s: %w", sh.at.Dir, err))
		}
	}
	d.cfg.Logger.Info("drain switched", "on", on, "processes", len(procs), "failed", len(errs))
	return errors.Join(errs...)
}

func (d *Driver) drainProcess(ctx context.Context, sh *shard, on bool) error {
	if sh.proc.Running() {
		err := sh.proc.RuntimeBatch(ctx, sh.at.Socket(), render.DrainCommands(on), func(cmd, answer string) error {
			if answer != "" {
				return fmt.Errorf("%s: %s", cmd, answer)
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("runtime API: %w", err)
		}
	}
	return d.writeProcessFiles(sh.at)
}

// processes returns the HAProxy processes (shards), sorted by folder.
// The caller holds d.mu.
func (d *Driver) processes() []*shard {
	out := make([]*shard, 0, len(d.shards))
	for _, sh := range d.shards {
		out = append(out, sh)
	}
	sort.Slice(out, func(a, b int) bool { return out[a].at.Dir < out[b].at.Dir })
	return out
}
