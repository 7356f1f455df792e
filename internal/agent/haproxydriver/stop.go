package haproxydriver

import (
	"context"
	"errors"
	"fmt"
	"os"

	"pier.dev/pier/internal/haproxy/layout"
	"pier.dev/pier/internal/haproxy/process"
)

// Recover stops the HAProxy of every load
// balancer folder that a previous agent left for a load balancer no
// longer placed here (deleted while no agent ran), and removes the
// folder. It runs before the first Apply, so a folder present now
// belongs to a previous incarnation.
func (d *Driver) Recover(ctx context.Context, placed map[string]bool) error {
	entries, err := os.ReadDir(d.layout.Root())
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read load balancer folders: %w", err)
	}
	for _, e := range entries {
		uuid := e.Name()
		at, err := d.layout.LB(uuid)
		if err != nil || !e.IsDir() || placed[uuid] {
			continue
		}
		pa := d.layout.ProcessOf(at)
		d.cfg.Logger.Info("stopping haproxy of a load balancer that is gone", "uuid", uuid, "dir", at.Dir)
		d.lbs[uuid] = &instance{at: at, procAt: pa, orphan: true, proc: process.New(process.Config{
			Binary: d.cfg.Binary, Dir: pa.Dir, Netns: d.cfg.Netns, Logger: d.cfg.Logger.With("uuid", uuid)})}
		d.stop(uuid, true)
	}
	return nil
}

// Remove stops the load balancer if it runs here and deletes its folder.
func (d *Driver) Remove(uuid string) { d.stop(uuid, true) }

// Close stops every load balancer (stop) or leaves them serving, and
// waits for the stops under way.
func (d *Driver) Close(stop bool) []string {
	var stopped []string
	for uuid, inst := range d.lbs {
		if stop {
			stopped = append(stopped, uuid)
			d.stop(uuid, false)
			continue
		}
		// Left serving for the next agent, which adopts it: this driver
		// must not restart it any more.
		inst.proc.Detach()
	}
	d.stops.Wait()
	return stopped
}

// waitStopped waits for a stop of uuid's previous incarnation.
func (d *Driver) waitStopped(uuid string) {
	if done, ok := d.stopping[uuid]; ok {
		<-done
		delete(d.stopping, uuid)
	}
	for id, done := range d.stopping { // forget stops that have finished
		select {
		case <-done:
			delete(d.stopping, id)
		default:
		}
	}
}

// stop stops HAProxy gracefully in the background: draining may take up
// to hard-stop-after, and other load balancers must not wait for it.
func (d *Driver) stop(uuid string, removeDir bool) {
	inst := d.lbs[uuid]
	if inst == nil {
		return
	}
	delete(d.lbs, uuid)
	done := make(chan struct{})
	d.stopping[uuid] = done
	d.stops.Add(1)
	go func() {
		defer d.stops.Done()
		defer close(done)
		d.stopInstance(inst, removeDir)
	}()
}

func (d *Driver) stopInstance(inst *instance, removeDir bool) {
	stop := inst.proc.Stop
	if inst.orphan {
		stop = inst.proc.StopStale
	}
	if err := stop(context.Background()); err != nil {
		d.cfg.Logger.Warn("haproxy stop", "uuid", inst.at.UUID, "error", err)
	}
	if removeDir {
		removeFolders(d, inst.at, inst.procAt)
	}
	d.cfg.Logger.Info("haproxy stopped", "uuid", inst.at.UUID, "removed", removeDir)
}

// removeFolders deletes the load balancer's folder and its process's.
func removeFolders(d *Driver, at layout.LB, pa layout.Process) {
	for _, dir := range []string{at.Dir, pa.Dir} {
		if err := os.RemoveAll(dir); err != nil {
			d.cfg.Logger.Warn("remove folder", "dir", dir, "error", err)
		}
	}
}
