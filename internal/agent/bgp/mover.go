package bgp

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"strings"
	"time"

	"pier.dev/pier/internal/agent/mover"
	"pier.dev/pier/internal/metrics"
	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/netnsdo"
)

// Mover is the agent's second way to move addresses (mover.Mover), the
// policy over the Speaker: every node a load balancer is placed on
// advertises its VIP and FIP while its HAProxy serves there, the active
// node as preferred. The router sends the traffic; nothing moves on the
// node. Each node accepts the addresses of the load balancers placed on it
// all the time (a local route on lo, tagged bgpRouteProto), so that a
// standby serves the moment the router switches.
//
// With ECMP (MoverConfig.ECMP) a load balancer placed on a set of nodes
// (model.Placement.ECMP, a native load balancer with the controller's
// --native-ecmp) is advertised by each of them with the same preference
// as the active node's (LOCAL_PREF 200, MED 0, no prepend): a router
// with multipath installs every node as a next hop and spreads the flows
// over them; each node DNATs in the kernel to the endpoint a consistent
// hash of the flow picks (package nft, Consistent). A node advertises
// only while its table is applied and current, and withdraws on drain
// and on exit like any other.

// bgpRouteProto tags the local routes of advertised addresses, so that a
// later agent finds and removes what one before it left.
const bgpRouteProto = 212

// MoverConfig configures a Mover.
type MoverConfig struct {
	Speaker Config
	// Node is this node's name: it advertises as preferred the load
	// balancers it is the active node of.
	Node string
	// Netns is the network namespace of the data plane, where the local
	// routes go ("" for the agent's own; the sessions are always the
	// agent's own).
	Netns string
	// ECMP advertises the load balancers of an ECMP placement with equal
	// preference from every node of it; without, such a placement is
	// advertised as a pair (its Active preferred).
	ECMP bool
	// Preempt sends the traffic back to the placement's active node as
	// soon as its data plane serves again after a failure (a second
	// move). Without it, the node that took over keeps the traffic while
	// it serves, as VRRP's nopreempt does (state).
	Preempt bool
	Metrics *metrics.Metrics
	Logger  *slog.Logger
}

// Mover moves the addresses of the load balancers placed here with BGP.
type Mover struct {
	cfg    MoverConfig
	logger *slog.Logger
	node   mover.Node
	// ready is set once the agent has seen the store (the first Sync):
	// until then it does not know what is placed here.
	ready   bool
	placed  []*model.LoadBalancer
	since   time.Time // when the agent started
	speaker *Speaker
	// advertised identifies the routes last given to the speaker, and
	// routes counts them.
	advertised string
	routes     int
	// local is the set of addresses with a local route.
	local    map[netip.Addr]bool
	draining bool
	lastErr  string
	// states is what each load balancer placed here is advertised as,
	// reported in its status.
	states map[string]model.BGPState
	// sessionsAt is when the sessions' states were last published.
	sessionsAt time.Time
}

// NewMover returns a Mover; its speaker starts at the first tick after
// the agent has seen the store.
func NewMover(cfg MoverConfig) *Mover {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	cfg.Speaker.Logger = cfg.Logger
	return &Mover{cfg: cfg, logger: cfg.Logger, local: map[netip.Addr]bool{}, states: map[string]model.BGPState{}}
}

var _ mover.Mover = (*Mover)(nil)

// Start prepares BGP at agent start. The speaker itself starts at the
// first tick after the agent has seen the store (ready): a session that
// came up before the routes were added would end the peers' graceful
// restart with nothing, and they would drop this node's routes while its
// HAProxy serves. The local routes a previous agent left are adopted, not
// flushed: the addresses keep being accepted across the restart.
func (m *Mover) Start(_ context.Context, node mover.Node) error {
	m.node, m.since = node, time.Now()
	addrs, err := netnsdo.LocalRoutes(m.cfg.Netns, bgpRouteProto)
	if err != nil {
		m.logger.Warn("bgp: cannot list the local routes a previous agent left", "error", err)
	}
	for _, addr := range addrs {
		m.local[addr] = true
	}
	if m.cfg.ECMP {
		if loose, err := tcpLoose(m.cfg.Netns); err != nil || !loose {
			m.logger.Warn("bgp: ECMP: this node drops the mid-flow TCP packets of a flow the routers move to it, without a SYN it never saw: set net.netfilter.nf_conntrack_tcp_loose=1",
				"loose", loose, "error", err)
		}
	}
	return nil
}

// tcpLoose reads net.netfilter.nf_conntrack_tcp_loose in netns: with it
// conntrack picks up a TCP flow from any packet of it, which ECMP needs
// when a router moves a flow to a node that never saw its SYN.
func tcpLoose(netns string) (bool, error) {
	var b []byte
	err := netnsdo.Do(netns, func() error {
		var err error
		b, err = os.ReadFile("/proc/sys/net/netfilter/nf_conntrack_tcp_loose")
		return err
	})
	if err != nil {
		return false, err
	}
	return strings.TrimSpace(string(b)) != "0", nil
}

// Sync takes the load balancers placed here. At the first, a new agent
// takes what its last reports say it advertised as its own state: the
// routers kept those routes through the restart (graceful restart), and
// a report without them would tell the other node that nobody holds the
// preference any more.
func (m *Mover) Sync(_ context.Context, placed []*model.LoadBalancer) {
	if !m.ready {
		for _, lb := range placed {
			if mine, ok := lb.Status.Report(m.cfg.Node); ok && mine.BGP != "" {
				m.states[lb.UUID] = mine.BGP
			}
		}
	}
	m.placed, m.ready = placed, true
}

// Role is what this node advertises for uuid.
func (m *Mover) Role(uuid string) mover.Role { return mover.Role{BGP: m.states[uuid]} }

// Reported: what the routers hear is this node's word, not its reports.
func (m *Mover) Reported(string, model.NodeStatus) {}

// Ready: a speaker that cannot start or advertise says so in the log and
// the metrics; the node still serves what the routers send it.
func (m *Mover) Ready() error { return nil }

// Holding reports whether this node advertises a route.
func (m *Mover) Holding() bool { return m.routes > 0 }

// Drain withdraws every route at the next tick (or advertises them
// again): the routers send the traffic to the standby nodes.
func (m *Mover) Drain(_ context.Context, on bool) {
	if m.draining != on {
		m.draining = on
		m.logger.Info("drain: this node's routes follow", "withdrawn", on)
	}
}

// speakerWait bounds how long a starting agent waits for the load
// balancers placed here to serve before it opens its sessions.
const speakerWait = 10 * time.Second

// placedHealthy reports whether every load balancer placed here serves.
// A restarted agent opens its sessions only then: the routers end their
// graceful restart with what the new speaker advertises first, and a
// route missing from it would move traffic away and back.
func (m *Mover) placedHealthy() bool {
	for _, lb := range m.placed {
		if len(routedAddrs(lb)) > 0 && !m.node.Healthy(lb.UUID) {
			return false
		}
	}
	return true
}

// startSpeaker starts the speaker.
func (m *Mover) startSpeaker(ctx context.Context) error {
	s, err := Start(ctx, m.cfg.Speaker)
	if err != nil {
		return err
	}
	m.speaker = s
	m.logger.Info("bgp: speaker started", "asn", m.cfg.Speaker.ASN, "router_id", m.cfg.Speaker.RouterID, "peers", len(m.cfg.Speaker.Peers),
		"bfd", m.cfg.Speaker.BFD.Enabled)
	return nil
}

// Tick advertises what serves here and withdraws what does not; it
// returns the load balancers whose state changed.
func (m *Mover) Tick(ctx context.Context) []string {
	if !m.ready {
		return nil
	}
	if m.speaker == nil {
		if !m.placedHealthy() && time.Since(m.since) < speakerWait {
			return nil
		}
		if err := m.startSpeaker(ctx); err != nil {
			if err.Error() != m.lastErr {
				m.logger.Error("bgp: speaker not started; retrying", "error", err)
			}
			m.lastErr = err.Error()
			return nil
		}
	}
	m.publishSessions(ctx)
	want, local, states := m.plan()
	m.syncLocalRoutes(local)
	key := fmt.Sprint(want)
	if key == m.advertised {
		return m.setStates(states)
	}
	if err := m.speaker.Advertise(ctx, want); err != nil {
		if err.Error() != m.lastErr {
			m.logger.Error("bgp: routes not updated", "error", err)
		}
		m.lastErr = err.Error()
		return nil
	}
	m.lastErr = ""
	m.logger.Info("bgp: routes advertised", "routes", len(want), "draining", m.draining)
	m.advertised, m.routes = key, len(want)
	if m.cfg.Metrics != nil {
		m.cfg.Metrics.BGPRoutes.Reset()
		for _, rt := range want {
			m.cfg.Metrics.BGPRoutes.WithLabelValues(fmt.Sprint(rt.Active)).Inc()
		}
	}
	return m.setStates(states)
}

// plan is what to advertise (the addresses of the load balancers that
// serve here, unless the node drains), what to accept locally (every
// address placed here) and what each load balancer is advertised as.
func (m *Mover) plan() (want []Route, local map[netip.Addr]bool, states map[string]model.BGPState) {
	local, states = map[netip.Addr]bool{}, map[string]model.BGPState{}
	for _, lb := range m.placed {
		addrs := routedAddrs(lb)
		if len(addrs) == 0 {
			continue
		}
		state := m.state(lb)
		states[lb.UUID] = state
		for _, addr := range addrs {
			local[addr] = true
			if state != model.BGPWithdrawn && state != notYetServed {
				want = append(want, Route{Addr: addr, Active: state != model.BGPAdvertised})
			}
		}
	}
	return want, local, states
}

// notYetServed is the state of a load balancer whose data plane has not
// served here since it was given to its driver: nothing is advertised
// and nothing is reported. Reporting it withdrawn would tell the other
// node of the pair that this one failed, and at a cold start the standby,
// often healthy a few milliseconds before the active, would take the
// preference and keep it (no second move) for a failure that never was.
const notYetServed model.BGPState = ""

// state is what this node advertises lb as. The rules:
//
//   - Nothing (notYetServed) until lb's data plane first serves here.
//   - Withdrawn while the node drains or lb's data plane does not serve
//     here (for a native load balancer: its nftables table is not applied
//     with lb's current spec, or the last transaction failed).
//   - With ECMP, a load balancer of an ECMP placement is advertised by
//     every node of it with the same preference (the active's): the
//     routers' multipath spreads its flows over them.
//   - Else the active node's routes are preferred, the standby's
//     advertised with a lower preference; without Preempt, the node that
//     serves keeps the preference (takesOver, yields).
func (m *Mover) state(lb *model.LoadBalancer) model.BGPState {
	switch {
	case m.draining:
		return model.BGPWithdrawn
	case !m.node.Healthy(lb.UUID) && !m.node.Served(lb.UUID):
		return notYetServed
	case !m.node.Healthy(lb.UUID):
		return model.BGPWithdrawn
	case m.cfg.ECMP && len(lb.Placement.ECMP) > 0:
		return model.BGPECMP
	case lb.Placement.Active == m.cfg.Node:
		if !m.cfg.Preempt && m.yields(lb) {
			return model.BGPAdvertised
		}
		return model.BGPPreferred
	case !m.cfg.Preempt && m.takesOver(lb):
		return model.BGPPreferred
	}
	return model.BGPAdvertised
}

// takesOver: the standby prefers its own routes once the active node
// reports its routes withdrawn (its data plane failed or it drains), and
// keeps them preferred until the active node reports them preferred
// again, which it does only once this node's are not (yields). Each
// side reads the other's last report in the load balancer's status, so
// with the API server away the standby does not take over: the routers
// still send it the traffic (the active's routes are gone), and the
// active takes it back when it serves again, as with Preempt.
func (m *Mover) takesOver(lb *model.LoadBalancer) bool {
	active, ok := lb.Status.Report(lb.Placement.Active)
	switch {
	case ok && active.BGP == model.BGPWithdrawn:
		return true
	case m.was(lb) == model.BGPPreferred:
		return !ok || active.BGP != model.BGPPreferred
	}
	return false
}

// was is what this node advertised lb as: at its last tick, or, for a
// new agent, in its last report, so that an agent's restart (graceful:
// the routers keep its routes) does not move the traffic either.
func (m *Mover) was(lb *model.LoadBalancer) model.BGPState {
	if st, ok := m.states[lb.UUID]; ok {
		return st
	}
	mine, _ := lb.Status.Report(m.cfg.Node)
	return mine.BGP
}

// yields: the active node, back after a failure, leaves the preference
// to the standby that took over while the standby still reports its
// routes preferred; its own routes are advertised as a standby's, so
// the routers keep the traffic where it is. Once the standby withdraws
// (or reports a lower preference), the active node prefers its routes
// again.
func (m *Mover) yields(lb *model.LoadBalancer) bool {
	if m.was(lb) == model.BGPPreferred {
		return false // it serves as preferred now: nothing to give back
	}
	standby, ok := lb.Status.Report(lb.Placement.Standby)
	return ok && lb.Placement.Standby != "" && standby.BGP == model.BGPPreferred
}

// setStates records what is advertised per load balancer and returns the
// ones that changed, those no longer advertised from here included.
func (m *Mover) setStates(states map[string]model.BGPState) []string {
	old := m.states
	m.states = states
	var changed []string
	for uuid, state := range states {
		if old[uuid] != state {
			changed = append(changed, uuid)
		}
	}
	for uuid := range old {
		if _, ok := states[uuid]; !ok {
			changed = append(changed, uuid)
		}
	}
	return changed
}

// publishSessions publishes the state of each session, once a second.
func (m *Mover) publishSessions(ctx context.Context) {
	if m.cfg.Metrics == nil || time.Since(m.sessionsAt) < time.Second {
		return
	}
	m.sessionsAt = time.Now()
	peers, err := m.speaker.Peers(ctx)
	if err != nil {
		return
	}
	for _, p := range peers {
		up := 0.0
		if p.Established {
			up = 1
		}
		m.cfg.Metrics.BGPSessionUp.WithLabelValues(p.Address).Set(up)
		if p.BFD != "" {
			bfdUp := 0.0
			if p.BFD == "up" {
				bfdUp = 1
			}
			m.cfg.Metrics.BGPBFDUp.WithLabelValues(p.Address).Set(bfdUp)
		}
	}
}

// routedAddrs are the addresses of a load balancer a router can carry.
func routedAddrs(lb *model.LoadBalancer) []netip.Addr {
	var out []netip.Addr
	for _, s := range []string{lb.VIP, lb.FIP} {
		if a, err := netip.ParseAddr(s); err == nil && !a.IsLoopback() && !a.IsUnspecified() {
			out = append(out, a.Unmap())
		}
	}
	return out
}

// syncLocalRoutes makes the node accept exactly the addresses in want.
func (m *Mover) syncLocalRoutes(want map[netip.Addr]bool) {
	for addr := range want {
		if m.local[addr] {
			continue
		}
		if err := netnsdo.AddLocalRoute(m.cfg.Netns, addr, bgpRouteProto); err != nil {
			m.logger.Warn("bgp: could not accept an address locally", "address", addr, "error", err)
			continue
		}
		m.local[addr] = true
	}
	for addr := range m.local {
		if want[addr] {
			continue
		}
		if err := netnsdo.DeleteLocalRoute(m.cfg.Netns, addr, bgpRouteProto); err != nil {
			m.logger.Warn("bgp: could not remove a local route", "address", addr, "error", err)
		}
		delete(m.local, addr)
	}
}

// Close, with stop, closes the sessions (the peers withdraw the routes)
// and removes the local routes. Without, the sessions end with the
// process, unannounced: the routers keep the routes for the restart time
// (graceful restart) while HAProxy keeps serving; BFD is stopped first
// with admin-down, or the routers would take the silence for a failure.
func (m *Mover) Close(ctx context.Context, stop bool) {
	if !stop {
		if m.speaker != nil {
			m.speaker.StopBFD()
		}
		return
	}
	if m.speaker != nil {
		m.speaker.Stop(ctx)
	}
	if err := netnsdo.FlushLocalRoutes(m.cfg.Netns, bgpRouteProto); err != nil {
		m.logger.Warn("bgp: could not remove the local routes", "error", err)
	}
}
