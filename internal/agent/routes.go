package agent

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"pier.dev/pier/internal/agent/bgp"
	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/netnsdo"
)

// BGP is the agent's second way to move addresses (package bgp): every
// node a load balancer is placed on advertises its VIP and FIP while its
// HAProxy serves there, the active node as preferred. The router sends the
// traffic; nothing moves on the node. Each node accepts the addresses of
// the load balancers placed on it all the time (a local route on lo,
// tagged bgpRouteProto), so that a standby serves the moment the router
// switches.

// bgpRouteProto tags the local routes of advertised addresses, so that a
// later agent finds and removes what one before it left.
const bgpRouteProto = 212

// routeState is the agent's side of the BGP speaker.
type routeState struct {
	// ready is set once the agent has seen the store: until then it
	// does not know what is placed here.
	ready   bool
	since   time.Time // when the agent started
	speaker *bgp.Speaker
	// advertised identifies the routes last given to the speaker.
	advertised string
	// local is the set of addresses with a local route.
	local    map[netip.Addr]bool
	draining bool
	lastErr  string
	// states is what each load balancer placed here is advertised as,
	// reported in its status.
	states map[string]model.BGPState
}

// bgpStateOf is what this node advertises for uuid ("" without BGP).
func (a *Agent) bgpStateOf(uuid string) model.BGPState {
	if a.routes == nil {
		return ""
	}
	return a.routes.states[uuid]
}

// newRouteState prepares BGP at agent start. The speaker itself starts at
// the first tick after the agent has seen the store (ready): a session
// that came up before the routes were added would end the peers' graceful
// restart with nothing, and they would drop this node's routes while its
// HAProxy serves. The local routes a previous agent left are adopted, not
// flushed: the addresses keep being accepted across the restart.
func (a *Agent) newRouteState() *routeState {
	r := &routeState{local: map[netip.Addr]bool{}, states: map[string]model.BGPState{}, since: time.Now()}
	addrs, err := netnsdo.LocalRoutes(a.cfg.Netns, bgpRouteProto)
	if err != nil {
		a.cfg.Logger.Warn("bgp: cannot list the local routes a previous agent left", "error", err)
	}
	for _, addr := range addrs {
		r.local[addr] = true
	}
	return r
}

// speakerWait bounds how long a starting agent waits for the load
// balancers placed here to serve before it opens its sessions.
const speakerWait = 10 * time.Second

// placedHealthy reports whether every load balancer placed here serves.
// A restarted agent opens its sessions only then: the routers end their
// graceful restart with what the new speaker advertises first, and a
// route missing from it would move traffic away and back.
func (a *Agent) placedHealthy() bool {
	for uuid, lb := range a.latest {
		p := lb.Placement
		if (p.Active == a.cfg.Node || p.Standby == a.cfg.Node) && len(routedAddrs(lb)) > 0 && !a.healthy(uuid) {
			return false
		}
	}
	return true
}

// startBGP starts the speaker.
func (a *Agent) startBGP(ctx context.Context) error {
	cfg := *a.cfg.BGP
	cfg.Logger = a.cfg.Logger
	s, err := bgp.Start(ctx, cfg)
	if err != nil {
		return err
	}
	a.routes.speaker = s
	a.cfg.Logger.Info("bgp: speaker started", "asn", cfg.ASN, "router_id", cfg.RouterID, "peers", len(cfg.Peers))
	return nil
}

// tickRoutes advertises what serves here and withdraws what does not.
func (a *Agent) tickRoutes(ctx context.Context) {
	r := a.routes
	if !r.ready {
		return
	}
	if r.speaker == nil {
		if !a.placedHealthy() && time.Since(r.since) < speakerWait {
			return
		}
		if err := a.startBGP(ctx); err != nil {
			if err.Error() != r.lastErr {
				a.cfg.Logger.Error("bgp: speaker not started; retrying", "error", err)
			}
			r.lastErr = err.Error()
			return
		}
	}
	var want []bgp.Route
	local := map[netip.Addr]bool{}
	states := map[string]model.BGPState{}
	for _, uuid := range sortedUUIDs(a.latest) {
		lb := a.latest[uuid]
		p := lb.Placement
		addrs := routedAddrs(lb)
		if (p.Active != a.cfg.Node && p.Standby != a.cfg.Node) || len(addrs) == 0 {
			continue
		}
		state := model.BGPWithdrawn
		if !r.draining && a.healthy(uuid) {
			state = model.BGPAdvertised
			if p.Active == a.cfg.Node {
				state = model.BGPPreferred
			}
		}
		states[uuid] = state
		for _, addr := range addrs {
			local[addr] = true
			if state != model.BGPWithdrawn {
				want = append(want, bgp.Route{Addr: addr, Active: state == model.BGPPreferred})
			}
		}
	}
	a.syncLocalRoutes(local)
	key := fmt.Sprint(want)
	if key == r.advertised {
		a.setBGPStates(ctx, states)
		return
	}
	if err := r.speaker.Advertise(ctx, want); err != nil {
		if err.Error() != r.lastErr {
			a.cfg.Logger.Error("bgp: routes not updated", "error", err)
		}
		r.lastErr = err.Error()
		return
	}
	r.lastErr = ""
	a.cfg.Logger.Info("bgp: routes advertised", "routes", len(want), "draining", r.draining)
	r.advertised = key
	a.setBGPStates(ctx, states)
	if a.cfg.Metrics != nil {
		a.cfg.Metrics.BGPRoutes.Reset()
		for _, rt := range want {
			a.cfg.Metrics.BGPRoutes.WithLabelValues(fmt.Sprint(rt.Active)).Inc()
		}
	}
}

// setBGPStates records what is advertised per load balancer and reports
// the changes in their status.
func (a *Agent) setBGPStates(ctx context.Context, states map[string]model.BGPState) {
	old := a.routes.states
	a.routes.states = states
	for uuid, state := range states {
		if old[uuid] != state {
			a.rereport(ctx, uuid)
		}
	}
}

// refreshBGPSessions publishes the state of each session (once a second).
func (a *Agent) refreshBGPSessions(ctx context.Context) {
	if a.routes == nil || a.routes.speaker == nil || a.cfg.Metrics == nil {
		return
	}
	peers, err := a.routes.speaker.Peers(ctx)
	if err != nil {
		return
	}
	for _, p := range peers {
		up := 0.0
		if p.Established {
			up = 1
		}
		a.cfg.Metrics.BGPSessionUp.WithLabelValues(p.Address).Set(up)
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
func (a *Agent) syncLocalRoutes(want map[netip.Addr]bool) {
	r := a.routes
	for addr := range want {
		if r.local[addr] {
			continue
		}
		if err := netnsdo.AddLocalRoute(a.cfg.Netns, addr, bgpRouteProto); err != nil {
			a.cfg.Logger.Warn("bgp: could not accept an address locally", "address", addr, "error", err)
			continue
		}
		r.local[addr] = true
	}
	for addr := range r.local {
		if want[addr] {
			continue
		}
		if err := netnsdo.DeleteLocalRoute(a.cfg.Netns, addr, bgpRouteProto); err != nil {
			a.cfg.Logger.Warn("bgp: could not remove a local route", "address", addr, "error", err)
		}
		delete(r.local, addr)
	}
}

// stopBGP closes the sessions (the peers withdraw the routes) and removes
// the local routes.
func (a *Agent) stopBGP(ctx context.Context) {
	if a.routes == nil {
		return
	}
	if a.routes.speaker != nil {
		a.routes.speaker.Stop(ctx)
	}
	a.flushLocalRoutes()
}

func (a *Agent) flushLocalRoutes() {
	if err := netnsdo.FlushLocalRoutes(a.cfg.Netns, bgpRouteProto); err != nil {
		a.cfg.Logger.Warn("bgp: could not remove the local routes", "error", err)
	}
}

func sortedUUIDs(m map[string]*model.LoadBalancer) []string {
	out := make([]string, 0, len(m))
	for uuid := range m {
		out = append(out, uuid)
	}
	slices.Sort(out)
	return out
}
