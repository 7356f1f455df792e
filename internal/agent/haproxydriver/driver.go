// Package haproxydriver runs the load balancers of the haproxy provider
// on one node (a driver.Driver). Per load balancer it renders once per
// apply (render.Render: fragment, crt-list, slot assignment), writes the
// files where layout says, and then starts HAProxy, or applies the plan
// between what runs and the new render: member changes through the
// runtime API (one connection per plan), any other change by a seamless
// reload.
//
// A HAProxy process (a shard, shard.go) loads a list of files:
// global.conf, its process.conf, and the fragment of each load balancer
// it runs. By default (Config.Processes 0) each load balancer runs in a
// process of its own whose folder is its own (layout.ProcessOf). With
// Config.Processes N the load balancers are packed into at most N
// processes (layout.Shard): a change to one reloads only its shard, and
// a fragment is checked alone before it joins, so one that HAProxy
// refuses is refused for its load balancer only.
//
// For an active/standby pair it also says, without I/O, whether a load
// balancer's HAProxy runs (Healthy), switches every process to close
// client connections after each response (Drain), and can run HAProxy
// in a network namespace (Config.Netns).
package haproxydriver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"pier.dev/pier/internal/agent/driver"
	"pier.dev/pier/internal/haproxy/accesslog"
	"pier.dev/pier/internal/haproxy/layout"
	"pier.dev/pier/internal/haproxy/process"
	"pier.dev/pier/internal/haproxy/render"
	"pier.dev/pier/internal/metrics"
	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/netnsdo"
)

// Secrets gives the driver the TLS material a Certificate references and
// the users a policy's basic auth references.
type Secrets interface {
	// TLSPair returns the tls.crt and tls.key of Secret namespace/name.
	TLSPair(namespace, name string) (certPEM, keyPEM []byte, err error)
	// Data returns the data of Secret namespace/name.
	Data(namespace, name string) (map[string][]byte, error)
}

// Config configures a Driver.
type Config struct {
	StateDir string // files live below <StateDir>/haproxy (package layout)
	Binary   string // haproxy; default "haproxy" from PATH
	Render   render.Options
	Secrets  Secrets
	// ConfigMaps gives the CA bundles of client validation; nil refuses
	// a load balancer that has some.
	ConfigMaps ConfigMaps
	// Netns, when set, is the network namespace HAProxy runs in (pier
	// run --nodes, tests); an agent on a node leaves it empty.
	Netns string
	// Processes bounds the HAProxy processes: load balancers are packed
	// into at most this many (shards). 0 runs one process per load
	// balancer.
	Processes int
	// Landing sizes the landing process (landing.go) that serves a new
	// load balancer without reloading its shard; Backends 0 runs none.
	// Only with shards (Processes > 0). Slots 0 takes Render.MinSlots.
	Landing render.LandingOptions
	// ExitGrace, when set, bounds the soft stop of each process at
	// Close(true): past it the process is stopped hard. An agent that
	// handed its addresses over before it exits sets it, since nothing
	// still connected here can be served any more (StopWithin).
	ExitGrace time.Duration
	// AccessLog, when set, receives the access-log lines of every HTTP
	// request (package accesslog; Render.AccessLog says which); nil: no
	// line is sent and no per-request metric counted.
	AccessLog io.Writer
	Metrics   *metrics.Metrics
	Logger    *slog.Logger
}

// DefaultProcesses is how many HAProxy processes (shards) the command
// line packs a node's load balancers into unless told otherwise. Four
// keep a node's memory bounded (3,000 load balancers: about 540 MiB of
// HAProxy, against about 19 MiB each as processes of their own), let a
// reload touch a quarter of them, and give a 2-core node's reloads room
// to run side by side; a crash takes down one shard, not the node.
const DefaultProcesses = 4

// Batches reports whether load balancers are packed into shards, whose
// waiting applies load together (driver.Batcher).
func (d *Driver) Batches() bool { return d.cfg.Processes > 0 }

// stopFor is how a process of this driver stops: softly, or at the exit
// of an agent that handed its addresses over within ExitGrace.
func (d *Driver) stopFor(proc *process.Instance, exiting bool) func(context.Context) error {
	if exiting && d.cfg.ExitGrace > 0 {
		return func(ctx context.Context) error { return proc.StopWithin(ctx, d.cfg.ExitGrace) }
	}
	return proc.Stop
}

// Driver is the HAProxy driver. Applies and removals of load balancers
// in different HAProxy processes run at once; those of one process take
// turns (lanes.go). Healthy, Stats and Drifted never wait for them.
type Driver struct {
	cfg    Config
	layout layout.Layout

	// mu guards the maps below, the drain switch, and the fields of an
	// instance that readers outside its lane see (hash, result, stats,
	// reloads). It is held for bookkeeping only, never across HAProxy
	// work, so the agent's loop never waits for an apply.
	mu     sync.Mutex
	lbs    map[string]*instance // running here, by UUID
	shards map[string]*shard    // HAProxy processes, by folder
	// lanes serialise the work on one HAProxy process, by its folder;
	// waiting holds the changes that wait to be loaded into it (commit).
	lanes   map[string]*lane
	waiting map[string][]*change
	// stopping holds a channel per folder (load balancer or process)
	// whose HAProxy is being stopped and the folder removed; it is
	// closed when the stop has finished.
	stopping map[string]chan struct{}
	stops    sync.WaitGroup
	// handover holds, by UUID, the folders of the processes of their own
	// that a previous agent (one process per load balancer) left serving
	// load balancers still placed here and now packed into shards. Each
	// keeps serving until its shard serves the load balancer, then it is
	// stopped (handOver): changing --haproxy-processes, as an upgrade to
	// shards by default does, drops no request.
	handover map[string]layout.LB
	// draining is the drain switch (Drain): process.conf starts every
	// process with it, so one that starts or reloads keeps draining.
	draining bool
	// landing is the landing process, nil when there is none.
	landing *landing
	// accessLog reads the access-log lines; nil when Config.AccessLog is.
	accessLog      *accesslog.Log
	accessLogStart sync.Once
	// healthChanged is the agent's NotifyHealth function, called when a
	// process exits; nil until given.
	healthChanged atomic.Pointer[func()]
}

var _ driver.Driver = (*Driver)(nil)

var _ driver.HealthNotifier = (*Driver)(nil)

// NotifyHealth implements driver.HealthNotifier: changed is called when
// an HAProxy process of this driver exits on its own, so that the
// addresses of the load balancers it served move at once.
func (d *Driver) NotifyHealth(changed func()) { d.healthChanged.Store(&changed) }

// processExited is every process's Config.OnExit.
func (d *Driver) processExited() {
	if f := d.healthChanged.Load(); f != nil {
		(*f)()
	}
}

// New returns a Driver. It starts nothing.
func New(cfg Config) (*Driver, error) {
	if cfg.Binary == "" {
		cfg.Binary = "haproxy"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Metrics == nil {
		cfg.Metrics = metrics.New()
	}
	if cfg.Processes < 0 {
		return nil, fmt.Errorf("haproxy processes %d: must be 0 (one per load balancer) or more", cfg.Processes)
	}
	if err := netnsdo.CheckName(cfg.Netns); err != nil {
		return nil, err
	}
	l, err := layout.New(cfg.StateDir)
	if err != nil {
		return nil, err
	}
	var log *accesslog.Log
	cfg.Render.AccessLog.Socket = ""
	if cfg.AccessLog != nil {
		log = accesslog.New(accesslog.Config{Socket: l.AccessLog(), Output: cfg.AccessLog, Options: cfg.Render.AccessLog,
			Metrics: cfg.Metrics, Logger: cfg.Logger.With("component", "access-log")})
		cfg.Render.AccessLog = log.Options()
	}
	d := &Driver{cfg: cfg, layout: l, lbs: map[string]*instance{}, shards: map[string]*shard{},
		lanes: map[string]*lane{}, waiting: map[string][]*change{}, stopping: map[string]chan struct{}{},
		handover: map[string]layout.LB{}, accessLog: log}
	d.landing = newLanding(cfg, l, d.processExited)
	return d, nil
}

// startAccessLog binds the access-log socket once. A failure leaves
// the lines dropped by HAProxy and is logged: traffic is served all the
// same.
func (d *Driver) startAccessLog() {
	if d.accessLog == nil {
		return
	}
	d.accessLogStart.Do(func() {
		if err := os.MkdirAll(d.layout.Root(), 0o700); err != nil {
			d.cfg.Logger.Error("no access logs", "error", err)
			return
		}
		if err := d.accessLog.Start(); err != nil {
			d.cfg.Logger.Error("no access logs", "error", err)
			return
		}
		if err := d.openAccessLogPath(); err != nil {
			d.cfg.Logger.Error("no access logs: HAProxy's workers cannot reach the socket", "error", err)
		}
	})
}

// openAccessLogPath lets HAProxy's workers send to the socket when they
// run as another user (--haproxy-user): a worker resolves the socket's
// path at every line, so it needs to search the state folder and its
// haproxy folder, and to write the socket. Their group gets exactly
// that (0710 folders, a 0660 socket); everything in them stays closed
// to it (shard folders are 0700, certificate keys 0600), and no other
// user can reach or forge a line.
func (d *Driver) openAccessLogPath() error {
	if d.cfg.Render.Group == "" {
		return nil
	}
	g, err := user.LookupGroup(d.cfg.Render.Group)
	if err != nil {
		return err
	}
	gid, err := strconv.Atoi(g.Gid)
	if err != nil {
		return fmt.Errorf("group %s: gid %q", d.cfg.Render.Group, g.Gid)
	}
	for _, p := range []struct {
		path string
		mode os.FileMode
	}{{filepath.Dir(d.layout.Root()), 0o710}, {d.layout.Root(), 0o710}, {d.layout.AccessLog(), 0o660}} {
		if err := os.Chown(p.path, -1, gid); err != nil {
			return err
		}
		if err := os.Chmod(p.path, p.mode); err != nil {
			return err
		}
	}
	return nil
}

// Provider is model.ProviderHAProxy.
func (d *Driver) Provider() model.Provider { return model.ProviderHAProxy }

// instance is one load balancer running on this node, in its shard's
// process. Only its lane writes it; writes of the fields that Healthy,
// Stats, RefreshMembers and Drifted read are made under Driver.mu.
type instance struct {
	at      layout.LB
	sh      *shard
	result  *render.Result // what runs now
	hash    string
	reloads uint64 // supervisor restarts already accounted for by a reload
	// landed: the landing serves it until its shard loads it (landing.go).
	landed bool
	// stats counts reloads and runtime updates, and holds the members up
	// as of the last RefreshMembers (Members is computed when asked).
	stats driver.Stats
	// baseline is what the last read of its request counters saw.
	baseline requestBaseline
}

// restarted reports whether the supervisor restarted HAProxy since the
// last apply.
func (i *instance) restarted() bool { return i.sh.proc.Stats().Restarts != i.reloads }

// Apply brings one load balancer to its spec on this node: it renders
// the load balancer's own files and commits them to its HAProxy process,
// in the process's lane (update.go). The files are written here for a
// load balancer that joins its process, in the lane for one that runs
// (change.write).
func (d *Driver) Apply(ctx context.Context, lb *model.LoadBalancer) (driver.Applied, error) {
	at, err := d.layout.LB(lb.UUID)
	if err != nil {
		return driver.Applied{}, err
	}
	pa := d.processFor(at)
	d.waitStopped(at.Dir, pa.Dir)
	inst := d.instance(lb.UUID)
	certsChanged, err := d.writeCertificates(lb, at)
	if err != nil {
		return driver.Applied{}, err
	}
	upstreamChanged, err := d.writeUpstreamFiles(lb, at)
	if err != nil {
		return driver.Applied{}, err
	}
	clientCAsChanged, err := d.writeClientCAs(lb, at)
	if err != nil {
		return driver.Applied{}, err
	}
	certsChanged = certsChanged || upstreamChanged || clientCAsChanged
	opts := d.cfg.Render
	opts.Users = d.authUsers
	if d.accessLog != nil {
		d.startAccessLog()
		d.accessLog.Set(lb)
	}
	r, err := render.Render(lb, at, d.previousSlots(inst, at), opts)
	if err != nil {
		return driver.Applied{}, fmt.Errorf("render: %w", err)
	}
	// Certificate files keep their names when a Secret rotates: their
	// content is part of what runs, so it is part of the hash.
	hash := hashOf(append(r.Fragment, certificateDigests(lb)...))
	if inst != nil && inst.hash == hash && inst.sh.proc.Running() && !inst.restarted() {
		d.mu.Lock()
		r.RunsAs(inst.result)
		inst.result = r
		d.mu.Unlock()
		return driver.Applied{ConfigHash: hash}, nil
	}
	c := &change{lb: lb, at: at, inst: inst, r: r, certsChanged: certsChanged, check: ctx, done: make(chan struct{})}
	if inst == nil {
		// A load balancer joining its process is written here, beside
		// other applies; one that runs here is written in its lane, after
		// the runtime commands when they can do (change.write).
		if err := c.write(d); err != nil {
			return driver.Applied{}, err
		}
	}
	d.commit(ctx, pa, c)
	if c.out != nil && inst == nil {
		d.mu.Lock()
		d.lbs[lb.UUID] = c.out
		d.mu.Unlock()
	}
	if c.err != nil {
		return driver.Applied{}, d.rejected(c.err)
	}
	inst = c.out
	d.mu.Lock()
	inst.result, inst.hash = r, hash
	inst.reloads = inst.sh.proc.Stats().Restarts
	d.mu.Unlock()
	if err := pruneTLSFiles(at, lb, r); err != nil {
		d.cfg.Logger.Warn("could not remove old certificate files", "lb", lb.Name, "error", err)
	}
	return driver.Applied{ConfigHash: hash}, nil
}

// instance is the load balancer uuid running here, or nil.
func (d *Driver) instance(uuid string) *instance {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.lbs[uuid]
}

// rejected marks a configuration HAProxy refused as driver.ErrRejected:
// retrying the same spec cannot help.
func (d *Driver) rejected(err error) error {
	if !errors.Is(err, process.ErrCheckFailed) {
		return err
	}
	d.cfg.Metrics.ConfigRejected.Inc()
	return fmt.Errorf("%w: haproxy -c rejected the rendered config: %v", driver.ErrRejected, err)
}

// previousSlots is the slot assignment members keep: what runs, else the
// record a previous agent left beside the fragment.
func (d *Driver) previousSlots(inst *instance, at layout.LB) render.Slots {
	if inst != nil && inst.result != nil {
		return inst.result.Slots
	}
	s, err := readSlots(at)
	if err != nil {
		d.cfg.Logger.Warn("slot record unreadable; members take slots in sorted order", "uuid", at.UUID, "error", err)
	}
	return s
}

// fdShortfall is how many file descriptors p's config asks for beyond
// its limit, 0 when it fits.
func fdShortfall(p *process.Instance) int {
	if s, ok := p.FDShortfall(); ok {
		return s.Needed - s.Limit
	}
	return 0
}

// Drifted lists load balancers whose HAProxy the supervisor restarted:
// it came back with the last config it had loaded, which may miss
// member changes made through the runtime API since. The agent asks on
// every tick, so the processes' file descriptor shortfall is published
// here too.
func (d *Driver) Drifted() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	shortfall := 0
	for _, sh := range d.shards {
		if n := sh.proc.Stats().Restarts; n > sh.counted {
			d.cfg.Metrics.HAProxyRestarts.Add(float64(n - sh.counted))
			sh.counted = n
		}
		shortfall = max(shortfall, fdShortfall(sh.proc))
	}
	if d.landing != nil {
		shortfall = max(shortfall, fdShortfall(d.landing.proc))
	}
	d.cfg.Metrics.FDShortfall.Set(float64(shortfall))
	if d.landing != nil {
		go d.checkLanding()
	}
	var out []string
	for uuid, inst := range d.lbs {
		if inst.restarted() {
			out = append(out, uuid)
		}
	}
	return out
}
