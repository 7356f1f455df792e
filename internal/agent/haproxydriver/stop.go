package haproxydriver

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"pier.dev/pier/internal/haproxy/layout"
)

// Recover runs before the first Apply, so what it finds below the state
// folder belongs to a previous agent. For each load balancer folder:
//
//   - placed here, with a fragment: listed in its shard, so that the
//     first Apply adopts a running HAProxy with the set it runs and
//     reloads nothing when nothing changed;
//   - no longer placed here (deleted while no agent ran): taken out of
//     its shard, its folder removed once the shard no longer reads it.
//
// A process folder no placed load balancer maps to any more (every load
// balancer in it is gone, or --haproxy-processes changed) has its HAProxy
// stopped and the folder removed.
func (d *Driver) Recover(ctx context.Context, placed map[string]bool) error {
	entries, err := os.ReadDir(d.layout.Root())
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read load balancer folders: %w", err)
	}
	var shardDirs []layout.Process
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		if k, ok := shardNumber(e.Name()); ok {
			shardDirs = append(shardDirs, d.layout.Shard(k))
			continue
		}
		if at, err := d.layout.LB(e.Name()); err == nil {
			d.recoverLB(at, placed[at.UUID])
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, pa := range shardDirs {
		if d.shards[pa.Dir] == nil {
			d.shards[pa.Dir] = d.newShard(pa, d.cfg.Logger.With("shard", pa.Dir))
		}
	}
	for _, sh := range d.shards {
		if len(sh.lbs) == 0 {
			d.cfg.Logger.Info("stopping haproxy of load balancers that are gone", "dir", sh.at.Dir, "gone", len(sh.gone))
			d.stopShard(sh, true)
		}
	}
	return nil
}

// recoverLB lists a load balancer folder a previous agent left in its
// shard (placed) or among the shard's gone ones.
func (d *Driver) recoverLB(at layout.LB, placed bool) {
	sh := d.shardFor(at, d.cfg.Logger.With("uuid", at.UUID))
	if sh.at.Dir != at.Dir {
		// A process of its own from a run with one process per load
		// balancer: the shard serves it now. One still placed here keeps
		// serving until its shard does (handOver); one that is gone stops.
		d.mu.Lock()
		if placed {
			d.handover[at.UUID] = at
		} else {
			d.stopLeftover(at, at.Dir)
		}
		d.mu.Unlock()
	}
	if !placed {
		sh.gone = append(sh.gone, at)
		return
	}
	if _, err := os.Stat(at.Config()); err == nil {
		sh.lbs[at.UUID] = at
	}
}

// shardNumber parses a shard folder name, shard-<k>.
func shardNumber(name string) (int, bool) {
	rest, ok := strings.CutPrefix(name, layout.ShardPrefix)
	if !ok {
		return 0, false
	}
	k, err := strconv.Atoi(rest)
	return k, err == nil && k >= 0 && strconv.Itoa(k) == rest
}

// Remove stops serving the load balancer if it runs here and deletes its
// folder: its shard reloads without it, or stops if it was the last. It
// runs in the lane of the load balancer's process.
func (d *Driver) Remove(uuid string) {
	inst := d.instance(uuid)
	if inst == nil {
		return
	}
	sh := inst.sh
	defer d.enterLane(sh.at.Dir)()
	d.mu.Lock()
	if d.lbs[uuid] != inst { // removed while this waited for the lane
		d.mu.Unlock()
		return
	}
	delete(d.lbs, uuid)
	d.mu.Unlock()
	if d.accessLog != nil {
		d.accessLog.Delete(uuid)
	}
	if inst.landed && sh.folding[uuid] == nil {
		// Its shard never loaded it. (One a fold-in under way loads takes
		// the reload below, which also takes it out of the landing.)
		d.unlandRemoved(sh, inst)
		if len(sh.lbs) == 0 {
			d.mu.Lock()
			d.stopShard(sh, true)
			d.mu.Unlock()
		}
		return
	}
	delete(sh.lbs, uuid)
	sh.gone = append(sh.gone, inst.at)
	if len(sh.lbs) == 0 {
		d.mu.Lock()
		d.stopShard(sh, true)
		d.mu.Unlock()
		return
	}
	if err := d.reloadShard(context.Background(), sh); err != nil {
		// The folder stays in gone until the shard loads without it.
		d.cfg.Logger.Warn("load balancer removed, but its haproxy process still serves it until its next reload", "uuid", uuid, "dir", sh.at.Dir, "error", err)
		return
	}
	d.cfg.Logger.Info("load balancer left its haproxy process", "uuid", uuid, "dir", sh.at.Dir, "lbs", len(sh.lbs))
}

// Close stops every HAProxy process (stop) or leaves them serving, and
// waits for the stops under way.
func (d *Driver) Close(stop bool) []string {
	d.closeLanding(stop)
	if d.accessLog != nil {
		if err := d.accessLog.Close(); err != nil {
			d.cfg.Logger.Warn("access log", "error", err)
		}
	}
	d.mu.Lock()
	for _, sh := range d.shards {
		if sh.foldTimer != nil {
			sh.foldTimer.Stop()
		}
	}
	var stopped []string
	if stop {
		for uuid := range d.lbs {
			stopped = append(stopped, uuid)
		}
	}
	for _, sh := range d.shards {
		if stop {
			d.stopShardOnExit(sh)
			continue
		}
		// Left serving for the next agent, which adopts it: this driver
		// must not restart it any more.
		sh.proc.Detach()
	}
	clear(d.lbs)
	clear(d.shards)
	d.mu.Unlock()
	d.stops.Wait()
	return stopped
}

// waitStopped waits for the stops under way of the folders dirs (a load
// balancer's, its process's), and forgets the stops that have finished.
func (d *Driver) waitStopped(dirs ...string) {
	for _, dir := range dirs {
		d.mu.Lock()
		done, ok := d.stopping[dir]
		d.mu.Unlock()
		if ok {
			<-done
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for dir, done := range d.stopping {
		select {
		case <-done:
			delete(d.stopping, dir)
		default:
		}
	}
}

// stopShard stops the shard's HAProxy gracefully in the background:
// draining may take up to hard-stop-after, and other load balancers must
// not wait for it. With removeDirs it then deletes the shard's folder and
// those of its gone load balancers. A shard this driver did not start is
// a previous agent's: its master is adopted just to be stopped. The
// caller holds d.mu.
func (d *Driver) stopShard(sh *shard, removeDirs bool) { d.stopShardAs(sh, removeDirs, false) }

// stopShardOnExit stops a shard as the agent exits (Close).
func (d *Driver) stopShardOnExit(sh *shard) { d.stopShardAs(sh, false, true) }

func (d *Driver) stopShardAs(sh *shard, removeDirs, exiting bool) {
	delete(d.shards, sh.at.Dir)
	var dirs []string
	if removeDirs {
		for _, at := range sh.gone {
			dirs = append(dirs, at.Dir)
		}
		dirs = append(dirs, sh.at.Dir)
	}
	stop := d.stopFor(sh.proc, exiting)
	if !sh.started {
		stop = sh.proc.StopStale
	}
	d.inBackground(append(dirs, sh.at.Dir), func() {
		if err := stop(context.Background()); err != nil {
			d.cfg.Logger.Warn("haproxy stop", "dir", sh.at.Dir, "error", err)
		}
		for _, dir := range dirs {
			d.removeDir(dir)
		}
		d.cfg.Logger.Info("haproxy stopped", "dir", sh.at.Dir, "removed", removeDirs)
	})
}

// stopLeftover stops, in the background, the HAProxy that a previous
// agent ran for the load balancer at in a process of its own, registered
// under key: the load balancer's folder makes its next Apply wait for the
// stop, another key does not. The caller holds d.mu.
func (d *Driver) stopLeftover(at layout.LB, key string) {
	sh := d.newShard(d.layout.ProcessOf(at), d.cfg.Logger.With("uuid", at.UUID))
	d.inBackground([]string{key}, func() {
		if err := sh.proc.StopStale(context.Background()); err != nil {
			d.cfg.Logger.Warn("haproxy stop", "dir", at.Dir, "error", err)
		}
	})
}

// handOver stops the processes of their own that a previous agent left
// serving these load balancers (Driver.handover), now that their shard
// serves them. Their next Apply does not wait for the stop: the old
// process only drains its connections.
func (d *Driver) handOver(cs []*change) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, c := range cs {
		at, ok := d.handover[c.at.UUID]
		if !ok {
			continue
		}
		delete(d.handover, c.at.UUID)
		d.cfg.Logger.Info("load balancer handed over from its own haproxy process to its shard; stopping the old one",
			"lb", c.lb.Name, "uuid", c.at.UUID, "old_dir", at.Dir)
		d.stopLeftover(at, at.Dir+" (handed over)")
	}
}

// inBackground runs fn in a goroutine that Close waits for and that an
// Apply touching one of dirs waits for first. The caller holds d.mu.
func (d *Driver) inBackground(dirs []string, fn func()) {
	done := make(chan struct{})
	for _, dir := range dirs {
		d.stopping[dir] = done
	}
	d.stops.Add(1)
	go func() {
		defer d.stops.Done()
		defer close(done)
		fn()
	}()
}
