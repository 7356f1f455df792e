package haproxydriver

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"os"
	"sort"
	"sync"
	"time"

	"pier.dev/pier/internal/haproxy/layout"
	"pier.dev/pier/internal/haproxy/process"
)

// shard is one HAProxy process and the load balancers whose fragments it
// loads. Its fields belong to its lane (lanes.go). With Config.Processes 0 every load balancer has a shard of its
// own whose folder is the load balancer's (layout.ProcessOf, the seed's
// isolation); with N > 0 the load balancers share N shards
// (layout.Shard). Both modes go through the same code: only the folder a
// load balancer maps to differs (processFor).
type shard struct {
	at   layout.Process
	proc *process.Instance
	// lbs are the load balancers whose fragment is in the file list: the
	// ones applied here, and after Recover the placed ones a previous
	// agent left in this process, so adopting it does not drop them.
	lbs map[string]layout.LB
	// gone are folders of load balancers that left the shard. The
	// running HAProxy may still read their maps and crt-lists (a
	// supervisor restart loads the last good set), so they are removed
	// only once the shard has loaded a set without them.
	gone    []layout.LB
	started bool   // Start succeeded: later changes reload
	counted uint64 // supervisor restarts already counted in metrics
	// landed are the load balancers in lbs that the landing serves until
	// the shard loads them (landing.go); foldTimer fires that load, and
	// foldFirst is when the first of them landed.
	landed    map[string]*instance
	foldTimer *time.Timer
	foldFirst time.Time
	// folding are the landed ones a fold-in reload under way loads
	// (foldIn runs it outside the lane); nil when none runs.
	folding map[string]*instance
	// droppedPid and dropped are the worker and its DroppedLogs as last
	// read (countDropped). droppedMu guards them: the applies of several
	// load balancers of the shard read its stats at once.
	droppedMu  sync.Mutex
	droppedPid string
	dropped    uint64
}

// files is what the shard loads: global.conf, process.conf, then the
// fragments in UUID order, so the same set always stages the same bytes
// and an adopted HAProxy is not reloaded for an ordering.
func (s *shard) files() []string {
	uuids := make([]string, 0, len(s.lbs))
	for uuid := range s.lbs {
		uuids = append(uuids, uuid)
	}
	sort.Strings(uuids)
	lbs := make([]layout.LB, len(uuids))
	for i, uuid := range uuids {
		lbs[i] = s.lbs[uuid]
	}
	return s.at.Files(lbs...)
}

// packs reports whether the shard may load other load balancers than
// uuid, whose fragment must then be checked alone first.
func (d *Driver) packs() bool { return d.cfg.Processes > 0 }

// processFor is the process folder load balancer at runs in.
func (d *Driver) processFor(at layout.LB) layout.Process {
	if !d.packs() {
		return d.layout.ProcessOf(at)
	}
	return d.layout.Shard(shardIndex(at.UUID, d.cfg.Processes))
}

// shardIndex assigns a load balancer to one of n shards by a hash of its
// UUID: stable across agent restarts without a record to keep, and
// spread evenly enough (UUIDs are random). Changing n moves load
// balancers; Recover stops the shards no placed one maps to any more.
func shardIndex(uuid string, n int) int {
	h := fnv.New32a()
	h.Write([]byte(uuid))
	return int(h.Sum32() % uint32(n))
}

// shardFor returns the shard load balancer at maps to, creating it (not
// started) if needed.
func (d *Driver) shardFor(at layout.LB, log *slog.Logger) *shard {
	pa := d.processFor(at)
	d.mu.Lock()
	defer d.mu.Unlock()
	if sh := d.shards[pa.Dir]; sh != nil {
		return sh
	}
	if d.packs() {
		log = d.cfg.Logger.With("shard", pa.Dir)
	}
	sh := d.newShard(pa, log)
	d.shards[pa.Dir] = sh
	return sh
}

func (d *Driver) newShard(pa layout.Process, log *slog.Logger) *shard {
	return &shard{at: pa, lbs: map[string]layout.LB{}, landed: map[string]*instance{}, proc: process.New(process.Config{
		Binary: d.cfg.Binary,
		Dir:    pa.Dir,
		Netns:  d.cfg.Netns,
		Logger: log,
		OnExit: d.processExited,
	})}
}

// loaded records that the shard now runs its current file list: the
// folders of load balancers that left it are no longer read, and every
// load balancer in it runs its current files, so a supervisor restart is
// accounted for them all by this one load (not one reload each).
func (d *Driver) loaded(sh *shard) {
	d.noteLoad(sh)
	for _, at := range sh.gone {
		if _, back := sh.lbs[at.UUID]; !back { // applied again since it left
			d.removeDir(at.Dir)
		}
	}
	sh.gone = nil
	d.unland(sh)
}

// noteLoad records that the shard's HAProxy just read its file list (a
// start, a reload, a fold-in): every load balancer in it runs its own
// files, with the maps and pools of its result named as that result
// names them, and a supervisor restart is accounted for them all.
func (d *Driver) noteLoad(sh *shard) {
	sh.started = true
	restarts := sh.proc.Stats().Restarts
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, inst := range d.lbs {
		if inst.sh == sh {
			inst.reloads = restarts
			if inst.result != nil {
				inst.result.Reloaded()
			}
		}
	}
}

// reloadShard reloads the shard's HAProxy with its current file list.
func (d *Driver) reloadShard(ctx context.Context, sh *shard) error {
	sh.proc.SetConfigFiles(sh.files())
	if err := sh.proc.Reload(ctx); err != nil {
		d.cfg.Metrics.Reloads.WithLabelValues("failed").Inc()
		return fmt.Errorf("reload haproxy: %w", err)
	}
	d.cfg.Metrics.Reloads.WithLabelValues("ok").Inc()
	d.loaded(sh)
	return nil
}

// checkAlone runs `haproxy -c` on c's candidate fragment with the
// shard's global.conf and process.conf only. A shard reloads all its
// fragments at once: one that HAProxy refuses must be refused for its
// own load balancer before it is in the list, or every later reload of
// the shard would fail with it. A refused candidate is removed.
func (d *Driver) checkAlone(ctx context.Context, sh *shard, c *change) error {
	if err := d.writeProcessFiles(sh.at); err != nil {
		return err
	}
	return d.checkCandidate(ctx, sh, c)
}

// checkCandidate is checkAlone once the process files are written.
func (d *Driver) checkCandidate(ctx context.Context, sh *shard, c *change) error {
	err := process.Check(ctx, d.cfg.Binary, []string{sh.at.Global, sh.at.Conf(), c.at.Candidate()})
	if err != nil {
		_ = os.Remove(c.at.Candidate())
		if ctx.Err() != nil && !errors.Is(err, process.ErrCheckFailed) {
			d.cfg.Metrics.FragmentChecks.WithLabelValues("cancelled").Inc()
			d.cfg.Logger.Info("fragment check cancelled: the change is no longer wanted", "lb", c.lb.Name, "uuid", c.lb.UUID)
			return err
		}
		d.cfg.Metrics.FragmentChecks.WithLabelValues("refused").Inc()
		d.cfg.Logger.Warn("fragment refused by haproxy -c; its process keeps the last good set", "lb", c.lb.Name, "uuid", c.lb.UUID, "error", err)
		return err
	}
	d.cfg.Metrics.FragmentChecks.WithLabelValues("ok").Inc()
	return nil
}

func (d *Driver) removeDir(dir string) {
	if err := os.RemoveAll(dir); err != nil {
		d.cfg.Logger.Warn("remove folder", "dir", dir, "error", err)
	}
}
