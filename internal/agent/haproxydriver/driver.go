// Package haproxydriver runs the load balancers of the haproxy provider
// on one node (a driver.Driver). Per load balancer it renders once per
// apply (render.Render: fragment, crt-list, slot assignment), writes the
// files where layout says, and then starts HAProxy, or applies the plan
// between what runs and the new render: member changes through the
// runtime API (one connection per plan), any other change by a seamless
// reload. Today each load balancer runs in a HAProxy process of its own
// whose folder is the load balancer's (layout.ProcessOf); the process
// loads a list of files (global.conf, process.conf, fragments), so
// packing several load balancers into one process is a change here only.
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
	"log/slog"
	"sync"

	"pier.dev/pier/internal/agent/driver"
	"pier.dev/pier/internal/haproxy/layout"
	"pier.dev/pier/internal/haproxy/process"
	"pier.dev/pier/internal/haproxy/render"
	"pier.dev/pier/internal/metrics"
	"pier.dev/pier/internal/model"
)

// Secrets gives the driver the TLS material a Certificate references.
type Secrets interface {
	// TLSPair returns the tls.crt and tls.key of Secret namespace/name.
	TLSPair(namespace, name string) (certPEM, keyPEM []byte, err error)
}

// Config configures a Driver.
type Config struct {
	StateDir string // files live below <StateDir>/haproxy (package layout)
	Binary   string // haproxy; default "haproxy" from PATH
	Render   render.Options
	Secrets  Secrets
	// Netns, when set, is the network namespace HAProxy runs in (pier
	// run --nodes, tests); an agent on a node leaves it empty.
	Netns   string
	Metrics *metrics.Metrics
	Logger  *slog.Logger
}

// Driver is the HAProxy driver. Its methods are called from one
// goroutine (see driver.Driver); only stops run in the background.
type Driver struct {
	cfg    Config
	layout layout.Layout
	lbs    map[string]*instance // running here, by UUID
	// stopping holds a channel per UUID whose HAProxy is being stopped;
	// it is closed when the stop has finished.
	stopping map[string]chan struct{}
	stops    sync.WaitGroup
	// draining is the drain switch (Drain): process.conf starts every
	// process with it, so one that starts or reloads keeps draining.
	draining bool
}

var _ driver.Driver = (*Driver)(nil)

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
	if err := process.CheckNetns(cfg.Netns); err != nil {
		return nil, err
	}
	l, err := layout.New(cfg.StateDir)
	if err != nil {
		return nil, err
	}
	return &Driver{cfg: cfg, layout: l, lbs: map[string]*instance{}, stopping: map[string]chan struct{}{}}, nil
}

// Provider is model.ProviderHAProxy.
func (d *Driver) Provider() model.Provider { return model.ProviderHAProxy }

// instance is one load balancer running on this node, in a process of
// its own.
type instance struct {
	at      layout.LB
	proc    *process.Instance
	procAt  layout.Process
	result  *render.Result // what runs now
	hash    string
	orphan  bool   // left by a previous agent for a load balancer that is gone
	reloads uint64 // supervisor restarts already accounted for by a reload
	counted uint64 // supervisor restarts already counted in metrics
	// stats counts reloads and runtime updates, and holds the members up
	// as of the last RefreshMembers (Members is computed when asked).
	stats driver.Stats
}

// restarted reports whether the supervisor restarted HAProxy since the
// last apply.
func (i *instance) restarted() bool { return i.proc.Stats().Restarts != i.reloads }

// Apply brings one load balancer to its spec on this node.
func (d *Driver) Apply(ctx context.Context, lb *model.LoadBalancer) (driver.Applied, error) {
	at, err := d.layout.LB(lb.UUID)
	if err != nil {
		return driver.Applied{}, err
	}
	d.waitStopped(lb.UUID)
	inst := d.lbs[lb.UUID]
	certsChanged, err := d.writeCertificates(lb, at)
	if err != nil {
		return driver.Applied{}, err
	}
	r, err := render.Render(lb, at, d.previousSlots(inst, at), d.cfg.Render)
	if err != nil {
		return driver.Applied{}, fmt.Errorf("render: %w", err)
	}
	// Certificate files keep their names when a Secret rotates: their
	// content is part of what runs, so it is part of the hash.
	hash := hashOf(append(r.Fragment, certificateDigests(lb)...))
	if inst != nil && inst.hash == hash && inst.proc.Running() && !inst.restarted() {
		inst.result = r
		return driver.Applied{ConfigHash: hash}, nil
	}
	if err := writeFiles(at, r); err != nil {
		return driver.Applied{}, err
	}
	if inst == nil {
		inst, err = d.startInstance(ctx, lb, at, certsChanged)
		if inst != nil {
			// Running (adopted) even if bringing it up to date failed: the
			// next attempt must reload this instance, not adopt it again.
			d.lbs[lb.UUID] = inst
		}
	} else {
		err = d.update(ctx, inst, lb, r)
	}
	if errors.Is(err, process.ErrCheckFailed) {
		d.cfg.Metrics.ConfigRejected.Inc()
		err = fmt.Errorf("%w: haproxy -c rejected the rendered config: %v", driver.ErrRejected, err)
	}
	if err != nil {
		return driver.Applied{}, err
	}
	inst.result, inst.hash = r, hash
	inst.reloads = inst.proc.Stats().Restarts
	if err := pruneTLSFiles(at, lb, r); err != nil {
		d.cfg.Logger.Warn("could not remove old certificate files", "lb", lb.Name, "error", err)
	}
	return driver.Applied{ConfigHash: hash}, nil
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

// Drifted lists load balancers whose HAProxy the supervisor restarted:
// it came back with the last config it had loaded, which may miss
// member changes made through the runtime API since.
func (d *Driver) Drifted() []string {
	var out []string
	for uuid, inst := range d.lbs {
		if !inst.restarted() {
			continue
		}
		if n := inst.proc.Stats().Restarts; n > inst.counted {
			d.cfg.Metrics.HAProxyRestarts.Add(float64(n - inst.counted))
			inst.counted = n
		}
		out = append(out, uuid)
	}
	return out
}
