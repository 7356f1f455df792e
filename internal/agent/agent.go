// Package agent is the node role (the seed's vrouter-agent): it watches the
// store for LoadBalancers placed on its node and runs each with HAProxy —
// render, check with `haproxy -c`, then start, reload, or change members
// through the runtime API — and reports what it applied back into the
// LoadBalancer's status. It depends on the model, not on Kubernetes types.
package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"pier.dev/pier/internal/haproxy/render"
	"pier.dev/pier/internal/metrics"
	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/store"
)

// Secrets gives the agent the TLS material a Certificate references.
type Secrets interface {
	// TLSPair returns the tls.crt and tls.key of Secret namespace/name.
	TLSPair(namespace, name string) (certPEM, keyPEM []byte, err error)
}

// Config configures an Agent.
type Config struct {
	Node          string
	StateDir      string // LoadBalancer folders live in <StateDir>/haproxy/<uuid>/
	Store         store.Store
	Secrets       Secrets
	HAProxyBinary string
	Render        render.Options
	// StopOnExit stops HAProxy gracefully when Run returns (pier run).
	// The node agent leaves it serving, so that restarting the agent
	// drops nothing; the next agent adopts the running instances.
	StopOnExit bool
	Metrics    *metrics.Metrics
	Logger     *slog.Logger
}

// retryAfter is how long a failed apply waits before it is tried again
// when nothing changes in between (a Secret not readable yet, a port
// taken).
const retryAfter = 5 * time.Second

// Agent applies LoadBalancers placed on one node.
type Agent struct {
	cfg Config
	lbs map[string]*instance // running here, by UUID
	// stopping holds a channel per UUID whose HAProxy is being stopped;
	// it is closed when the stop has finished.
	stopping map[string]chan struct{}
	stops    sync.WaitGroup
	pending  map[string]*model.LoadBalancer
	retry    map[string]time.Time
	// failed holds the spec hash of each LoadBalancer whose last apply
	// failed; the same spec is tried again only by the retry timer.
	failed map[string]string
	// reported holds the last report written per UUID (without its time).
	reported map[string]model.NodeStatus
}

// New returns an Agent; Run starts it.
func New(cfg Config) *Agent {
	if cfg.HAProxyBinary == "" {
		cfg.HAProxyBinary = "haproxy"
	}
	return &Agent{
		cfg:      cfg,
		lbs:      map[string]*instance{},
		stopping: map[string]chan struct{}{},
		pending:  map[string]*model.LoadBalancer{},
		retry:    map[string]time.Time{},
		failed:   map[string]string{},
		reported: map[string]model.NodeStatus{},
	}
}

// Run applies store changes until ctx ends.
func (a *Agent) Run(ctx context.Context) error {
	events, err := a.cfg.Store.Watch(ctx)
	if err != nil {
		return fmt.Errorf("watch load balancers: %w", err)
	}
	defer a.shutdown()
	if err := a.stopOrphans(ctx); err != nil {
		return err
	}
	ticker := time.NewTicker(time.Second)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-events:
			if !ok {
				return nil
			}
			a.queue(ev)
			a.drain(events)
		case <-ticker.C:
			a.queueRetries()
			a.queueRestarted()
			a.forgetStopped()
		}
		a.applyPending(ctx)
	}
}

// drain takes every event already waiting, so a burst of changes is
// applied once per LoadBalancer, with its last state.
func (a *Agent) drain(events <-chan store.Event) {
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				return
			}
			a.queue(ev)
		default:
			return
		}
	}
}

func (a *Agent) queue(ev store.Event) {
	lb := ev.LoadBalancer
	if ev.Type == store.EventDelete {
		a.pending[lb.UUID] = nil
		return
	}
	// A spec that just failed waits for its retry timer: its own ERROR
	// report comes back as an event and must not retry it at once.
	if a.failed[lb.UUID] == lb.SpecHash() {
		return
	}
	// Status writes (ours included) come back as events: a spec this node
	// already runs needs nothing, and re-applying it would report again,
	// which would come back again.
	mine, _ := lb.Status.Report(a.cfg.Node)
	if inst := a.lbs[lb.UUID]; inst != nil && inst.applied != nil && !inst.restarted() &&
		inst.applied.SpecHash() == lb.SpecHash() && mine.State == model.StateActive {
		return
	}
	a.pending[lb.UUID] = lb
}

func (a *Agent) queueRetries() {
	now := time.Now()
	for uuid, at := range a.retry {
		if now.Before(at) {
			continue
		}
		delete(a.retry, uuid)
		delete(a.failed, uuid) // the timer is what retries a failed spec
		if _, queued := a.pending[uuid]; queued {
			continue
		}
		if lb, err := a.cfg.Store.Get(context.Background(), uuid); err == nil {
			a.pending[uuid] = lb
		}
	}
}

func (a *Agent) applyPending(ctx context.Context) {
	uuids := make([]string, 0, len(a.pending))
	for uuid := range a.pending {
		uuids = append(uuids, uuid)
	}
	sort.Strings(uuids)
	for _, uuid := range uuids {
		if ctx.Err() != nil {
			return
		}
		lb := a.pending[uuid]
		delete(a.pending, uuid)
		if lb == nil || !a.placedHere(lb) {
			a.remove(uuid)
			continue
		}
		start := time.Now()
		err := a.apply(ctx, lb)
		a.cfg.Metrics.ApplySeconds.Observe(time.Since(start).Seconds())
		if err == nil {
			delete(a.failed, uuid)
		} else {
			a.failed[uuid] = lb.SpecHash()
			if !errors.Is(err, errRejected) {
				a.retry[uuid] = time.Now().Add(retryAfter)
			}
			a.cfg.Logger.Error("apply failed; the previous config keeps serving", "lb", lb.Name, "uuid", uuid, "error", err)
			a.report(ctx, lb, model.StateError, "", err.Error())
		}
	}
}

func (a *Agent) placedHere(lb *model.LoadBalancer) bool {
	return lb.Provider == model.ProviderHAProxy &&
		(lb.Placement.Active == a.cfg.Node || lb.Placement.Standby == a.cfg.Node)
}

// report writes what this node applied into the LoadBalancer status, as
// this node's own entry: the active and the standby node both report. It
// reads nothing first: the last good spec and config are what this agent
// itself applied, and a report equal to the last one is not written again.
func (a *Agent) report(ctx context.Context, lb *model.LoadBalancer, state model.State, configHash, message string) {
	r := model.NodeStatus{Node: a.cfg.Node, State: state, ConfigHash: configHash, Message: message}
	if state == model.StateActive {
		r.SpecHash = lb.SpecHash()
	} else if inst := a.lbs[lb.UUID]; inst != nil && inst.applied != nil {
		// Keep the record of the last spec that did apply: it still serves.
		r.SpecHash, r.ConfigHash = inst.applied.SpecHash(), inst.configHash
	}
	if last, ok := a.reported[lb.UUID]; ok && last == r {
		return // nothing new: a write would only wake every watcher
	}
	stamped := r
	stamped.UpdatedAt = time.Now().UTC()
	if err := a.cfg.Store.PutNodeStatus(ctx, lb.UUID, stamped); err != nil {
		if !errors.Is(err, store.ErrNotFound) {
			a.cfg.Logger.Warn("could not report status", "lb", lb.Name, "error", err)
		}
		return
	}
	a.reported[lb.UUID] = r
}

func (a *Agent) shutdown() {
	if !a.cfg.StopOnExit {
		a.stops.Wait()
		return
	}
	stopped := make([]*model.LoadBalancer, 0, len(a.lbs))
	for uuid, inst := range a.lbs {
		stopped = append(stopped, inst.applied)
		a.stop(uuid, false)
	}
	a.stops.Wait()
	// HAProxy no longer serves these: say so, or the next start would
	// publish their addresses before it has started HAProxy again.
	for _, lb := range stopped {
		a.report(context.Background(), lb, model.StatePending, "", "HAProxy stopped when pier exited")
	}
}

// queueRestarted re-applies LoadBalancers whose HAProxy the supervisor
// restarted: it came back with the last config it had loaded, which may
// miss member changes made through the runtime API since.
func (a *Agent) queueRestarted() {
	for uuid, inst := range a.lbs {
		if !inst.restarted() {
			continue
		}
		if n := inst.proc.Stats().Restarts; n > inst.counted {
			a.cfg.Metrics.HAProxyRestarts.Add(float64(n - inst.counted))
			inst.counted = n
		}
		if _, queued := a.pending[uuid]; !queued {
			a.pending[uuid] = inst.applied
		}
	}
}

// forgetStopped drops the records of stops that have finished.
func (a *Agent) forgetStopped() {
	for uuid, done := range a.stopping {
		select {
		case <-done:
			delete(a.stopping, uuid)
		default:
		}
	}
}
