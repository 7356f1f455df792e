// Package agent is the node role (the seed's vrouter-agent): it watches the
// store for LoadBalancers placed on its node, hands each to the driver of
// its provider (package driver: haproxydriver, nativedriver), gives the
// mover of the addresses (package mover: VRRP in addrhold, BGP in bgp)
// the placements and the data plane's health, and reports what was
// applied, and the mover's role, back into the LoadBalancer's status. The
// core here queues, coalesces and retries changes; it knows no data plane
// and no way of moving addresses: pier agent and pier run build the
// drivers and the mover. It depends on the model, not on Kubernetes
// types.
package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"pier.dev/pier/internal/agent/driver"
	"pier.dev/pier/internal/agent/mover"
	"pier.dev/pier/internal/metrics"
	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/store"
)

// Config configures an Agent.
type Config struct {
	Node  string
	Store store.Store
	// Drivers run the load balancers, one per provider (package driver:
	// haproxydriver, nativedriver); pier agent and pier run build them.
	Drivers []driver.Driver

	// Mover, when set, moves the addresses of the load balancers placed
	// here (package mover): VRRP (package addrhold) holds them with
	// keepalived, MASTER where the data plane is active, BACKUP where
	// standby, FAULT while it is unhealthy or the node drains; BGP
	// (package bgp) advertises them to routers, the active node's routes
	// preferred, each withdrawn while its data plane is unhealthy or the
	// node drains. Nil: addresses are someone else's business (pier run
	// on loopback, a cloud, MetalLB).
	Mover mover.Mover
	// HandOverOnExit hands every address this node holds to its standby
	// (a planned handover) before Run returns.
	HandOverOnExit bool

	// ApplyConcurrency bounds the applies and removals that run at once,
	// each of a different load balancer; 0: DefaultApplyConcurrency, or
	// PackedApplyConcurrency when a driver batches (driver.Batcher).
	ApplyConcurrency int

	// StopOnExit stops the data plane gracefully when Run returns (pier
	// run). The node agent leaves it serving, so that restarting the
	// agent drops nothing; the next agent adopts what runs.
	StopOnExit bool
	// RatesEvery is the window over which a load balancer's request rate
	// and 5xx share are measured for its report; 0 reports none. Each
	// change of the rounded rates is a status write (in Kubernetes mode
	// an API write), at most one a window per load balancer.
	RatesEvery time.Duration
	Metrics    *metrics.Metrics
	Logger     *slog.Logger
}

// DefaultApplyConcurrency is how many load balancers are applied at
// once by default. An apply is mostly `haproxy -c` and a reload, each a
// process on a core of its own: on a small node more at once would only
// queue for the CPU, while a few keep one slow apply (10,000 paths, about
// 1.5 s) from holding up the others.
const DefaultApplyConcurrency = 4

// PackedApplyConcurrency is the default when a driver batches
// (driver.Batcher: load balancers packed into a few HAProxy processes):
// an apply there is mostly rendering and writing files, and the applies
// waiting for one process are loaded together with one check and one
// reload (haproxydriver.commit), so the more wait, the fewer reloads a
// cold start costs.
const PackedApplyConcurrency = 4096

// retryAfter is how long a failed apply waits before it is tried again
// when nothing changes in between (a Secret not readable yet, a port
// taken).
const retryAfter = 5 * time.Second

// Agent applies LoadBalancers placed on one node.
type Agent struct {
	cfg     Config
	err     error // from New: Run returns it
	drivers map[model.Provider]driver.Driver
	// applied is the spec running here, by UUID, and its config hash.
	applied map[string]*model.LoadBalancer
	hashes  map[string]string
	// held is the provider whose driver was given each UUID, even if
	// its apply failed: that driver must let go when it leaves.
	held    map[string]model.Provider
	pending map[string]*model.LoadBalancer // nil: delete
	// inflight holds the spec hash of each load balancer whose apply runs
	// in the background ("" for a removal); done brings the results back
	// to the loop, jobs counts them for shutdown.
	inflight map[string]string
	// running is each apply under way (not removals), which a deletion
	// or a newer spec may cancel (cancelSuperseded); superseded marks the
	// load balancers whose last apply a newer spec cancelled.
	running     map[string]*runningApply
	superseded  map[string]bool
	done        chan applyResult
	jobs        sync.WaitGroup
	concurrency int
	retry       map[string]time.Time
	// failed holds the spec hash of each LoadBalancer whose last apply
	// failed; the same spec is tried again only by the retry timer.
	failed map[string]string
	// stale marks the load balancers whose newest apply failed here for a
	// reason of this node's (not a rejection of the spec, which every
	// node makes alike), until an apply succeeds: an ECMP node with a
	// stale table withdraws (healthy), retries included.
	stale map[string]bool
	// reported holds the last report written per UUID (without its time),
	// and reportedAt when it was queued (healLostReports).
	reported   map[string]model.NodeStatus
	reportedAt map[string]time.Time
	// writer writes reports in the background.
	writer *statusWriter
	// lastReport is the state last reported per UUID (what a role change
	// reports again).
	lastReport map[string]model.NodeStatus

	// statsAt is when the members up of each UUID were last read
	// (stats.go); statsReading says a background read runs, and
	// statsReads brings its result into the loop.
	statsAt      map[string]time.Time
	statsReading bool
	statsReads   chan statsRead
	// rates is each UUID's request rate window (stats.go).
	rates map[string]rateWindow

	// latest is the newest store view of every LoadBalancer, status
	// included: the mover gets those placed here (movers.go).
	latest map[string]*model.LoadBalancer
	// mover moves the addresses (nil: nobody here does); served holds
	// the UUIDs whose data plane was healthy here since they were given
	// to their driver (mover.Node.Served).
	mover  mover.Mover
	served map[string]bool
	// drainReq carries SetDraining's requests into the loop; wake is the
	// mover's request for a tick (mover.Node.Wake).
	drainReq chan bool
	wake     chan struct{}
	// recovered is set once the store was listed at start (recover);
	// probes is what the liveness and readiness probes read (ready.go).
	recovered bool
	probes    *probes
}

// New returns an Agent; Run starts it.
func New(cfg Config) *Agent {
	a := &Agent{
		cfg:        cfg,
		drivers:    map[model.Provider]driver.Driver{},
		applied:    map[string]*model.LoadBalancer{},
		held:       map[string]model.Provider{},
		hashes:     map[string]string{},
		reported:   map[string]model.NodeStatus{},
		reportedAt: map[string]time.Time{},
		pending:    map[string]*model.LoadBalancer{},
		inflight:   map[string]string{},
		running:    map[string]*runningApply{},

		superseded: map[string]bool{},
		retry:      map[string]time.Time{},
		failed:     map[string]string{},
		stale:      map[string]bool{},

		lastReport: map[string]model.NodeStatus{},
		latest:     map[string]*model.LoadBalancer{},
		statsAt:    map[string]time.Time{},
		rates:      map[string]rateWindow{},
		statsReads: make(chan statsRead, 1),
		served:     map[string]bool{},
		drainReq:   make(chan bool, 1),
		wake:       make(chan struct{}, 1),
		probes:     newProbes(),
	}
	if len(cfg.Drivers) == 0 {
		a.err = errors.New("agent: no drivers: nothing could run a load balancer here")
		return a
	}
	for _, d := range cfg.Drivers {
		a.drivers[d.Provider()] = d
		// A process that dies releases its addresses at once: the mover's
		// next look comes now, not up to a tick later.
		if hn, ok := d.(driver.HealthNotifier); ok && cfg.Mover != nil {
			hn.NotifyHealth(moverNode{a}.Wake)
		}
	}
	a.concurrency = cfg.ApplyConcurrency
	if a.concurrency <= 0 {
		a.concurrency = DefaultApplyConcurrency
		for _, d := range cfg.Drivers {
			if b, ok := d.(driver.Batcher); ok && b.Batches() {
				a.concurrency = PackedApplyConcurrency
			}
		}
	}
	// Room for every result: a job never blocks on a loop that has ended.
	a.done = make(chan applyResult, a.concurrency)
	a.mover = cfg.Mover
	a.writer = newStatusWriter(cfg.Store, cfg.Logger)
	return a
}

// Run applies store changes until ctx ends.
func (a *Agent) Run(ctx context.Context) error {
	if a.err != nil {
		return a.err
	}
	events, err := a.cfg.Store.Watch(ctx)
	if err != nil {
		return fmt.Errorf("watch load balancers: %w", err)
	}
	// The writer outlives ctx: shutdown's last reports go through it.
	wctx, stopWriter := context.WithCancel(context.WithoutCancel(ctx))
	go a.writer.run(wctx)
	defer stopWriter()
	defer a.shutdown()
	if err := a.recover(ctx); err != nil {
		return err
	}
	a.recovered = true
	ticker := time.NewTicker(time.Second)
	defer ticker.Stop()
	// The mover looks at health and roles often: a dead HAProxy must stop
	// attracting its traffic within one tick for the failover target.
	var moverTick <-chan time.Time
	if a.mover != nil {
		if err := a.mover.Start(ctx, moverNode{a}); err != nil {
			return fmt.Errorf("address mover: %w", err)
		}
		t := time.NewTicker(mover.TickEvery)
		defer t.Stop()
		moverTick = t.C
	}
	for {
		a.probes.turnedAt.Store(time.Now().UnixNano())
		select {
		case <-ctx.Done():
			a.probes.setReady(errors.New("stopping"))
			if a.cfg.HandOverOnExit {
				a.drainBeforeExit()
			}
			return nil
		case ev, ok := <-events:
			if !ok {
				return nil
			}
			a.queue(ev)
			a.drain(events)
		case r := <-a.done:
			a.finishApply(ctx, r)
		case r := <-a.statsReads:
			a.finishStatsRead(ctx, r)
		case <-ticker.C:
			a.probes.setReady(a.checkReady())
			a.queueRetries()
			a.queueDrifted()
			a.healLostReports(ctx, time.Now())
			a.refreshStats(ctx)
		case <-moverTick:
			a.tickMover(ctx)
			continue
		case <-a.wake:
			a.tickMover(ctx)
			continue
		case w := <-a.writer.written:
			if a.mover != nil {
				a.mover.Reported(w.uuid, w.report)
			}
			continue
		case on := <-a.drainReq:
			a.setDraining(ctx, on)
			continue
		}
		a.applyPending(ctx)
		a.syncMover(ctx)
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
		delete(a.latest, lb.UUID)
		return
	}
	a.latest[lb.UUID] = lb
	// A spec that just failed waits for its retry timer: its own ERROR
	// report comes back as an event and must not retry it at once.
	if a.failed[lb.UUID] == lb.SpecHash() {
		return
	}
	// Status writes (ours included) come back as events: a spec this node
	// already runs needs nothing, and re-applying it would report again,
	// which would come back again. A driver that drifted says so by tick.
	h, busy := a.inflight[lb.UUID]
	if _, queued := a.pending[lb.UUID]; busy && h == lb.SpecHash() && !queued {
		return // being applied now: its result is reported when it returns
	}
	mine, _ := lb.Status.Report(a.cfg.Node)
	if cur := a.applied[lb.UUID]; cur != nil && cur.SpecHash() == lb.SpecHash() && mine.State == model.StateActive {
		return
	}
	a.forgetLostReport(lb.UUID, mine)
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

// queueDrifted re-applies load balancers whose running state a driver
// says may have drifted from their last apply.
func (a *Agent) queueDrifted() {
	for _, d := range a.drivers {
		for _, uuid := range d.Drifted() {
			if _, queued := a.pending[uuid]; !queued && a.applied[uuid] != nil {
				a.pending[uuid] = a.applied[uuid]
			}
		}
	}
}

// ReportsWrittenAt is the time up to which every status report this agent
// made is in the store: its heartbeat carries it, so that a peer takes
// this node's reports for its current word only up to then (arbitrate).
func (a *Agent) ReportsWrittenAt() time.Time { return a.writer.writtenAt() }

// SetDraining starts (on) or ends a planned handover of every address
// this node holds: the agent of a cordoned node calls it. It returns at
// once; the handover runs in the agent's loop.
func (a *Agent) SetDraining(on bool) {
	for {
		select {
		case a.drainReq <- on:
			return
		default:
		}
		// A request not taken yet is replaced: only the last one counts.
		select {
		case <-a.drainReq:
		default:
		}
	}
}
