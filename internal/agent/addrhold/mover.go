package addrhold

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"pier.dev/pier/internal/agent/mover"
	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/vrrp"
)

// Timers of the active/standby pair (docs/failover.md).
const (
	// drainDelay is how long a planned handover lets clients see
	// "Connection: close" before the addresses move: a busy keep-alive
	// connection closes after its next response, well within it.
	drainDelay = 50 * time.Millisecond
	// fenceGrace is how long a standby holds the addresses before the
	// API server's word may fence it: long enough for an active node
	// whose HAProxy died to report FAULT.
	fenceGrace = time.Second
	// fenceConfirm is how long the peer's current claim must stand: its
	// Lease (which says how current its reports are) and its reports come
	// through two watches, and the Lease may arrive first.
	fenceConfirm = 2 * time.Second
	// healFresh and healConfirm: a fenced standby lifts its fence once
	// the active node's adverts, one every advert interval (100 ms), have
	// kept reaching it for healConfirm, none older than healFresh.
	healFresh   = 500 * time.Millisecond
	healConfirm = time.Second
)

// Heartbeats tells whether the agent of a node is alive (in Kubernetes
// mode: its Lease was renewed within its duration), and how current its
// status reports are.
type Heartbeats interface {
	Alive(node string) bool
	// ReportsWrittenAt is the time (node's own clock) up to which node's
	// agent had written every status report it made, as its last
	// heartbeat says (agent.Agent.ReportsWrittenAt); the zero time when
	// unknown. A heartbeat renewed after an outage does not make the
	// reports current: they follow through their own writer, often later.
	ReportsWrittenAt(node string) time.Time
}

// Mover moves the addresses with VRRP (mover.Mover): the Holder runs
// keepalived, and this is its policy: the split brain arbitration, the
// fences and their healing, and planned handovers.
type Mover struct {
	h          *Holder
	heartbeats Heartbeats
	netns      string
	logger     *slog.Logger
	node       mover.Node
	// synced identifies the placements the holder was last synced to;
	// placed is the newest view of each load balancer placed here (the
	// peers' reports arbitrate a split brain).
	synced string
	placed map[string]*model.LoadBalancer
	// roles per load balancer UUID, from the last tick.
	roles map[string]model.VRRPState
	// masterReportedAt is when this node's MASTER report for a UUID was
	// written: proof that the API server heard it.
	masterReportedAt map[string]time.Time
	// claimSince is when the peer's MASTER claim was first seen fresh,
	// per instance (arbitrate).
	claimSince map[string]time.Time
	// adverts hears the peers' VRRP adverts (nil if it could not
	// listen); fencedAt is when each fenced instance was fenced, and
	// healSince when the peer's adverts were first heard again since.
	adverts   *vrrp.Adverts
	fencedAt  map[string]time.Time
	healSince map[string]time.Time
	draining  bool
	drainAt   time.Time // when the gates close in a pending drain
	lastErr   string
}

// NewMover returns a Mover over a new Holder (New). heartbeats tells
// whether the peers are alive, for the API server's arbitration of a split
// brain; nil: no arbitration.
func NewMover(cfg Config, heartbeats Heartbeats) (*Mover, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	h, err := New(cfg)
	if err != nil {
		return nil, err
	}
	return &Mover{h: h, heartbeats: heartbeats, netns: cfg.Netns, logger: cfg.Logger, placed: map[string]*model.LoadBalancer{},
		roles: map[string]model.VRRPState{}, masterReportedAt: map[string]time.Time{}, claimSince: map[string]time.Time{},
		fencedAt: map[string]time.Time{}, healSince: map[string]time.Time{}}, nil
}

var _ mover.Mover = (*Mover)(nil)

// Start listens to the peers' adverts, which tell when a split brain is
// over.
func (m *Mover) Start(_ context.Context, node mover.Node) error {
	m.node = node
	adverts, err := vrrp.ListenAdverts(m.netns)
	if err != nil {
		m.logger.Warn("vrrp: cannot hear the peers' adverts; a standby fenced in a split brain stays fenced "+
			"until the active node fails or leaves, instead of until the nodes hear each other again", "error", err)
		return nil
	}
	m.adverts = adverts
	return nil
}

// Role is this node's VRRP role for a load balancer.
func (m *Mover) Role(uuid string) mover.Role { return mover.Role{VRRP: m.roles[uuid]} }

// Reported records when this node's MASTER report was written.
func (m *Mover) Reported(uuid string, r model.NodeStatus) {
	if r.VRRP != model.VRRPMaster {
		delete(m.masterReportedAt, uuid)
	} else if _, ok := m.masterReportedAt[uuid]; !ok {
		m.masterReportedAt[uuid] = r.UpdatedAt
	}
}

// Sync gives the holder the placements of this node when they changed (a
// load balancer placed, moved or gone, an address changed).
func (m *Mover) Sync(ctx context.Context, placed []*model.LoadBalancer) {
	now := make(map[string]*model.LoadBalancer, len(placed))
	var key strings.Builder
	for _, lb := range placed {
		now[lb.UUID] = lb
		fmt.Fprintf(&key, "%s %+v %s %s\n", lb.UUID, lb.Placement, lb.VIP, lb.FIP)
	}
	for uuid := range m.placed {
		if now[uuid] == nil {
			delete(m.masterReportedAt, uuid) // a later placement here starts afresh
		}
	}
	m.placed = now
	if key.String() == m.synced {
		return
	}
	if err := m.h.Sync(ctx, placed); err != nil {
		m.logger.Error("vrrp: keepalived not updated; the previous instances keep running", "error", err)
		return
	}
	m.synced = key.String()
}

// Tick runs the holder's periodic work: a pending drain, the split brain
// arbitration, the gates; it returns the load balancers whose role
// changed.
func (m *Mover) Tick(context.Context) []string {
	if !m.drainAt.IsZero() && !time.Now().Before(m.drainAt) {
		m.logger.Info("drain: handing the addresses to the standby nodes")
		m.h.SetDraining(true)
		m.drainAt = time.Time{}
	}
	m.arbitrate()
	roles, err := m.h.Tick(m.node.Healthy, m.node.Served)
	if err != nil {
		if err.Error() != m.lastErr {
			m.logger.Error("vrrp: tick", "error", err)
		}
		m.lastErr = err.Error()
	} else {
		m.lastErr = ""
	}
	if roles == nil {
		return nil
	}
	var changed []string
	for uuid := range m.roles {
		if _, ok := roles[uuid]; !ok {
			delete(m.roles, uuid) // its addresses are no longer held here
			changed = append(changed, uuid)
		}
	}
	for uuid, role := range roles {
		if m.roles[uuid] == role {
			continue
		}
		m.logger.Info("vrrp role", "instance", m.h.InstanceOf(uuid), "uuid", uuid, "role", role, "was", m.roles[uuid])
		m.roles[uuid] = role
		changed = append(changed, uuid)
	}
	return changed
}

// Ready says why keepalived cannot hold the addresses, if it cannot.
func (m *Mover) Ready() error {
	if m.lastErr != "" {
		return errors.New("vrrp: " + m.lastErr)
	}
	return nil
}

// Drain starts or ends a planned handover. Starting asks every client to
// reconnect, then, after drainDelay, closes every gate: keepalived sends
// priority 0 and the standby takes over at once. Ending reopens the
// gates; with nopreempt, the addresses stay where they are until the next
// failure.
func (m *Mover) Drain(ctx context.Context, on bool) {
	if m.draining == on {
		return
	}
	m.draining = on
	m.node.Reconnect(ctx, on)
	if on {
		m.logger.Info("drain: asking clients to reconnect before the addresses move", "delay", drainDelay)
		m.drainAt = time.Now().Add(drainDelay)
		m.h.PrepareDrain()
		time.AfterFunc(drainDelay, m.node.Wake)
		return
	}
	m.logger.Info("drain ended: this node may hold addresses again")
	m.drainAt = time.Time{}
	m.h.SetDraining(false)
}

// Holding reports whether this node holds the addresses of an instance,
// or a drain has yet to close the gates.
func (m *Mover) Holding() bool {
	if !m.drainAt.IsZero() {
		return true
	}
	for name := range m.h.Instances() {
		if m.h.InstanceRole(name) == model.VRRPMaster {
			return true
		}
	}
	return false
}

// Close stops listening to adverts and, with stop, keepalived: it sends
// priority 0 and releases the addresses, so a peer takes over before
// HAProxy stops here.
func (m *Mover) Close(ctx context.Context, stop bool) {
	if m.adverts != nil {
		m.adverts.Close()
	}
	if !stop {
		return
	}
	if err := m.h.Stop(ctx); err != nil {
		m.logger.Warn("vrrp: stop keepalived", "error", err)
	}
}
