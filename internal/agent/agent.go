// Package agent is the node role (the seed's vrouter-agent): it watches the
// store for LoadBalancers placed on its node, hands each to the driver of
// its provider (package driver; HAProxy is the first, haproxydriver), and
// reports what was applied back into the LoadBalancer's status. The core
// here queues, coalesces and retries changes and knows no data plane. It
// depends on the model, not on Kubernetes types.
package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"pier.dev/pier/internal/agent/addrhold"
	"pier.dev/pier/internal/agent/bgp"
	"pier.dev/pier/internal/agent/driver"
	"pier.dev/pier/internal/agent/haproxydriver"
	"pier.dev/pier/internal/agent/nativedriver"
	"pier.dev/pier/internal/haproxy/render"
	"pier.dev/pier/internal/metrics"
	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/store"
	"pier.dev/pier/internal/vrrp"
)

// Secrets gives the HAProxy driver the TLS material a Certificate
// references.
type Secrets = haproxydriver.Secrets

// Config configures an Agent.
type Config struct {
	Node  string
	Store store.Store
	// Drivers run the load balancers, one per provider. When empty, the
	// agent runs the HAProxy driver configured by the fields below.
	Drivers []driver.Driver

	StateDir      string // LoadBalancer folders live below <StateDir>/haproxy (package layout)
	Secrets       Secrets
	HAProxyBinary string
	// HAProxyProcesses packs the load balancers into at most this many
	// HAProxy processes (haproxydriver.Config.Processes); 0 runs one per
	// load balancer. The command line's default is
	// DefaultHAProxyProcesses.
	HAProxyProcesses int
	// HAProxyLanding sizes the landing process that serves a new load
	// balancer before its shard reloads (haproxydriver.Config.Landing);
	// Backends 0 runs none. Only with HAProxyProcesses.
	HAProxyLanding render.LandingOptions
	Render         render.Options

	// VRRP, when set, makes the agent hold the addresses of the load
	// balancers placed here with keepalived (package vrrp): MASTER where
	// it is active, BACKUP where standby, FAULT while their HAProxy is
	// unhealthy or the node drains. Nil: addresses are someone else's
	// business (pier run on loopback, a cloud, MetalLB).
	VRRP *VRRPConfig
	// BGP, when set, advertises the addresses of the load balancers
	// placed here to routers (package bgp) instead: the active node's
	// routes preferred, each withdrawn while its HAProxy is unhealthy or
	// the node drains. Exclusive with VRRP.
	BGP *bgp.Config
	// Heartbeats tells whether a peer node's agent is alive; the API
	// server arbitrates a split brain through it. Nil: always alive.
	Heartbeats Heartbeats
	// Netns is the network namespace of this node's data plane (pier
	// run --nodes); empty for the agent's own.
	Netns string
	// HandOverOnExit hands every address this node holds to its standby
	// (a planned handover) before Run returns.
	HandOverOnExit bool

	// ApplyConcurrency bounds the applies and removals that run at once,
	// each of a different load balancer; 0: DefaultApplyConcurrency, or
	// PackedApplyConcurrency with HAProxyProcesses.
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

// VRRPConfig configures address holding with VRRP.
type VRRPConfig struct {
	// Interface carries the adverts and the addresses.
	Interface string
	// KeepalivedBinary is keepalived; default "keepalived" from PATH.
	KeepalivedBinary string
	// Advert is the advert interval; default vrrp.DefaultAdvert.
	Advert time.Duration
}

// Heartbeats tells whether the agent of a node is alive (in Kubernetes
// mode: its Lease was renewed within its duration), and how current its
// status reports are.
type Heartbeats interface {
	Alive(node string) bool
	// ReportsWrittenAt is the time (node's own clock) up to which node's
	// agent had written every status report it made, as its last
	// heartbeat says (Agent.ReportsWrittenAt); the zero time when unknown.
	// A heartbeat renewed after an outage does not make the reports
	// current: they follow through their own writer, often later.
	ReportsWrittenAt(node string) time.Time
}

// DefaultApplyConcurrency is how many load balancers are applied at
// once by default. An apply is mostly `haproxy -c` and a reload, each a
// process on a core of its own: on a small node more at once would only
// queue for the CPU, while a few keep one slow apply (10,000 paths, about
// 1.5 s) from holding up the others.
const DefaultApplyConcurrency = 4

// PackedApplyConcurrency is the default when load balancers are packed
// into a few HAProxy processes: an apply there is mostly rendering and
// writing files, and the applies waiting for one process are loaded
// together with one check and one reload (haproxydriver.commit), so the
// more wait, the fewer reloads a cold start costs.
const PackedApplyConcurrency = 4096

// DefaultHAProxyProcesses is how many HAProxy processes (shards) the
// command line packs a node's load balancers into unless told otherwise.
// Four keep a node's memory bounded (3,000 load balancers: about 540 MiB
// of HAProxy, against about 19 MiB each as processes of their own), let a
// reload touch a quarter of them, and give a 2-core node's reloads room to
// run side by side; a crash takes down one shard, not the node.
const DefaultHAProxyProcesses = 4

// handedOverGrace bounds HAProxy's soft stop when an agent that handed
// its addresses over exits. Once the standby holds them, a connection
// still open here gets its client's packets only while the new holder
// hands them back (addrhold: 0.7 s after it becomes MASTER, within this
// node's 1 s linger); after that nothing on it can be served, and waiting
// for HAProxy's hard-stop-after (1 min by default) would only hold up a
// rollout. The margin covers a slow machine.
const handedOverGrace = 5 * time.Second

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
	inflight    map[string]string
	done        chan applyResult
	jobs        sync.WaitGroup
	concurrency int
	retry       map[string]time.Time
	// failed holds the spec hash of each LoadBalancer whose last apply
	// failed; the same spec is tried again only by the retry timer.
	failed map[string]string
	// reported holds the last report written per UUID (without its time).
	reported map[string]model.NodeStatus
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
	// included: the peers' reports arbitrate a split brain.
	latest map[string]*model.LoadBalancer
	// vrrp is set when the agent holds addresses (Config.VRRP).
	vrrp *pairState
	// routes is the BGP speaker's state (routes.go); nil without BGP.
	routes *routeState
	// drainReq carries SetDraining's requests into the loop; drainDue
	// says that a drain's delay is over.
	drainReq chan bool
	drainDue chan struct{}
	// recovered is set once the store was listed at start (recover);
	// probes is what the liveness and readiness probes read (ready.go).
	recovered bool
	probes    *probes
}

// New returns an Agent; Run starts it.
func New(cfg Config) *Agent {
	a := &Agent{
		cfg:      cfg,
		drivers:  map[model.Provider]driver.Driver{},
		applied:  map[string]*model.LoadBalancer{},
		held:     map[string]model.Provider{},
		hashes:   map[string]string{},
		reported: map[string]model.NodeStatus{},
		pending:  map[string]*model.LoadBalancer{},
		inflight: map[string]string{},
		retry:    map[string]time.Time{},
		failed:   map[string]string{},

		lastReport: map[string]model.NodeStatus{},
		latest:     map[string]*model.LoadBalancer{},
		statsAt:    map[string]time.Time{},
		rates:      map[string]rateWindow{},
		statsReads: make(chan statsRead, 1),
		drainReq:   make(chan bool, 1),
		drainDue:   make(chan struct{}, 1),
		probes:     newProbes(),
	}
	if len(cfg.Drivers) == 0 {
		var exitGrace time.Duration
		if cfg.HandOverOnExit && cfg.StopOnExit {
			exitGrace = handedOverGrace
		}
		d, err := haproxydriver.New(haproxydriver.Config{StateDir: cfg.StateDir, Binary: cfg.HAProxyBinary, Netns: cfg.Netns, Processes: cfg.HAProxyProcesses, ExitGrace: exitGrace,
			Landing: cfg.HAProxyLanding, Render: cfg.Render, Secrets: cfg.Secrets, Metrics: cfg.Metrics, Logger: cfg.Logger})
		if err != nil {
			a.err = fmt.Errorf("haproxy driver: %w", err)
			return a
		}
		cfg.Drivers = []driver.Driver{d, newNativeDriver(cfg)}
	}
	for _, d := range cfg.Drivers {
		a.drivers[d.Provider()] = d
	}
	a.concurrency = cfg.ApplyConcurrency
	switch {
	case a.concurrency > 0:
	case cfg.HAProxyProcesses > 0:
		a.concurrency = PackedApplyConcurrency
	default:
		a.concurrency = DefaultApplyConcurrency
	}
	// Room for every result: a job never blocks on a loop that has ended.
	a.done = make(chan applyResult, a.concurrency)
	if cfg.VRRP != nil {
		h, err := addrhold.New(addrhold.Config{Node: cfg.Node, Interface: cfg.VRRP.Interface,
			Dir: addrhold.DefaultDir(cfg.StateDir), Netns: cfg.Netns, Advert: cfg.VRRP.Advert,
			KeepalivedBinary: cfg.VRRP.KeepalivedBinary, Logger: cfg.Logger.With("component", "vrrp")})
		if err != nil {
			a.err = fmt.Errorf("vrrp: %w", err)
			return a
		}
		a.vrrp = newPairState(h)
	}
	if cfg.BGP != nil && cfg.VRRP != nil {
		a.err = fmt.Errorf("BGP and VRRP both configured: pick one way to move the addresses")
		return a
	}
	a.writer = newStatusWriter(cfg.Store, cfg.Logger)
	return a
}

// newNativeDriver returns the nftables driver of the native provider, or,
// when this process cannot program nftables (no nft, no root), one that
// reports every native load balancer in ERROR with the reason: Services
// fail visibly and Ingresses are unaffected.
func newNativeDriver(cfg Config) driver.Driver {
	logger := cfg.Logger
	if logger == nil {
		logger = slog.Default()
	}
	d, err := nativedriver.New(nativedriver.Config{StateDir: cfg.StateDir, Netns: cfg.Netns, Logger: logger})
	if err != nil {
		logger.Warn("native provider unavailable: Services of type LoadBalancer will not be served here", "error", err)
		return nativedriver.Unavailable(err)
	}
	return d
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
	if a.cfg.BGP != nil {
		a.routes = a.newRouteState()
	}
	if a.vrrp != nil {
		adverts, err := vrrp.ListenAdverts(a.cfg.Netns)
		if err != nil {
			a.cfg.Logger.Warn("vrrp: cannot hear the peers' adverts; a standby fenced in a split brain stays fenced "+
				"until the active node fails or leaves, instead of until the nodes hear each other again", "error", err)
		} else {
			a.vrrp.adverts = adverts
			defer adverts.Close()
		}
	}
	ticker := time.NewTicker(time.Second)
	defer ticker.Stop()
	// The address holder looks at health and roles often: a dead HAProxy
	// must close its gate within one tick for the failover target.
	var holderTick <-chan time.Time
	if a.vrrp != nil || a.routes != nil {
		t := time.NewTicker(holderInterval)
		defer t.Stop()
		holderTick = t.C
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
			a.refreshStats(ctx)
			a.refreshBGPSessions(ctx)
		case <-holderTick:
			a.tickAddresses(ctx)
			continue
		case <-a.drainDue:
			a.tickAddresses(ctx)
			continue
		case w := <-a.writer.written:
			a.vrrp.reportedRole(w.uuid, w.report.VRRP, w.report.UpdatedAt)
			continue
		case on := <-a.drainReq:
			a.setDraining(ctx, on)
			continue
		}
		a.applyPending(ctx)
		a.syncHolder(ctx)
		if a.routes != nil {
			a.routes.ready = true
		}
	}
}

// tickAddresses runs the periodic work of whatever moves the addresses.
func (a *Agent) tickAddresses(ctx context.Context) {
	if a.vrrp != nil {
		a.tickHolder(ctx)
	}
	if a.routes != nil {
		a.tickRoutes(ctx)
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
