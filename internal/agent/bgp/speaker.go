// Package bgp is the agent's BGP speaker: pier's second way to move
// addresses, for networks where the nodes share no L2 segment (the seeds'
// way: "both nodes advertise the floating IP prefix to the gateway router
// ... the active node with a local preference of 200 and the standby node
// with 100").
//
// Every node a load balancer is placed on advertises a host route (/32,
// /128) for its VIP and FIP while its HAProxy serves there, the active
// node as preferred, the standby as less preferred: the router sends
// traffic to the active node, and to the standby the moment the active
// node withdraws (its HAProxy died, it drains) or its session drops.
//
// How "preferred" is said depends on the peering:
//   - iBGP (peer ASN = ours, the seeds' case): LOCAL_PREF 200 active, 100
//     standby. LOCAL_PREF is only exchanged inside one AS.
//   - eBGP: LOCAL_PREF is not sent; the standby's routes get a worse MED
//     and, when every peer is eBGP, its own ASN prepended to the AS path
//     (an iBGP peer would drop a route carrying its own ASN). MED is
//     compared only between routes from the same neighbouring AS, so the
//     prepend is what a router with several upstream ASes sees.
//
// The speaker opens the sessions itself (no listener on port 179 unless
// ListenPort asks) with GoBGP as a library.
//
// pier only advertises. The global RIB's import policy accepts the
// speaker's own paths and rejects every path a peer sends, so nothing a
// router says reaches the RIB, the best-path choice or the routes sent
// to the other peers; what a peer sends is still kept, before policy, in
// its Adj-RIB-In, and MaxPrefixes bounds that: a router that sends more
// ends its session (Cease, maximum number of prefixes). A session may be
// signed with TCP-MD5 (RFC 2385, Peer.Password), which the kernel checks
// on every segment: a neighbour without the key can neither open a
// session nor reset one.
//
// With Config.BFD the speaker also runs a BFD session (package bfd) with
// every peer: a router with BFD on its side drops the node's session and
// routes a few hundred milliseconds after the node stops answering,
// instead of after the hold time; the speaker resets a peer's BGP session
// the moment BFD says the peer is gone, so it reconnects at once when the
// path is back.
package bgp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"sync"
	"time"

	api "github.com/osrg/gobgp/v3/api"
	"github.com/osrg/gobgp/v3/pkg/server"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"pier.dev/pier/internal/bfd"
	"pier.dev/pier/internal/netnsdo"
)

// Preference values of the seeds.
const (
	LocalPrefActive  = 200
	LocalPrefStandby = 100
)

// Config configures a Speaker.
type Config struct {
	ASN      uint32
	RouterID netip.Addr // IPv4, unique per node
	// NextHop of the routes: the node's address the peers reach it at
	// (default RouterID).
	NextHop netip.Addr
	// NextHop6 is the next hop of IPv6 routes; without it IPv6 addresses
	// are not advertised.
	NextHop6 netip.Addr
	Peers    []Peer
	// ListenPort is where the speaker accepts sessions; 0: it does not
	// listen, it only connects (the default).
	ListenPort int
	// StandbyMED is the MED of a standby's routes (the active's is 0);
	// StandbyPrepend how many times the standby prepends its ASN towards
	// eBGP peers (0: the default of 2; negative: none).
	StandbyMED     uint32
	StandbyPrepend int
	// RestartTime is what the speaker asks its peers to wait, keeping its
	// routes, when its session ends without a word (BGP graceful restart,
	// RFC 4724): an agent that restarts keeps its routes, since HAProxy
	// keeps serving. 0: the default of 5 s. A node that dies is then out
	// of the router's choice after the hold time (9 s) plus this.
	RestartTime time.Duration
	// HoldTime is the session's hold time, the keepalive a third of it
	// (0: 9 s). Without BFD it is how long a dead node stays the
	// routers' choice (plus RestartTime).
	HoldTime time.Duration
	// BFD, when enabled, runs a BFD session with every peer.
	BFD BFD
	// MaxPrefixes is how many routes a peer may send per address family
	// before its session is ended; they are all rejected, but kept before
	// policy, so this bounds the memory a router can make the speaker
	// use. 0: DefaultMaxPrefixes; negative: no limit.
	MaxPrefixes int
	// Netns, when set, is the network namespace the speaker's listener
	// lives in (pier run --nodes --ecmp: every node's speaker in one
	// process): GoBGP creates it on its serving goroutine, which runs on
	// a thread moved there for good. Sessions then only come in: the
	// peers connect to ListenPort (required), the speaker never dials.
	Netns  string
	Logger *slog.Logger
}

// BirdBFDProtocol is the bfd protocol a bird2 router needs for pier's
// sessions, beside `bfd on;` in each BGP protocol: packets every 100 ms
// each way, bird's side seen gone after three missed.
const BirdBFDProtocol = "protocol bfd {\n  interface \"*\" { interval 100 ms; multiplier 3; };\n}\n"

// DefaultMaxPrefixes leaves room for what routers send a host they
// peer with (a default route, the fabric's loopbacks) and ends a session
// that leaks a full table (about a million routes) long before it costs
// memory.
const DefaultMaxPrefixes = 1000

// Peer is one BGP neighbour.
type Peer struct {
	Address netip.Addr
	ASN     uint32
	Port    uint16 // 0: 179
	// Password, when set, signs the session with TCP-MD5; the router
	// must be given the same.
	Password Password
}

// connectRetry is how long the speaker waits between attempts to
// connect, and after a session ends before the first (sessions.go); GoBGP
// adds up to as much again as jitter. A router that restarts has this
// node's routes again within 1–2 s of listening (GoBGP's default
// connect-retry is 120 s, bird's own 120 s too).
const connectRetry = time.Second

// importPolicy is the global RIB's import policy: the speaker's own
// paths in, every other out.
const importPolicy = "pier-own-paths-only"

// Route is a host route to advertise: Active says the node is the load
// balancer's active node (preferred).
type Route struct {
	Addr   netip.Addr
	Active bool
}

// Speaker advertises routes to its peers.
type Speaker struct {
	cfg    Config
	srv    *server.BgpServer
	mu     sync.Mutex
	routes map[netip.Addr]bool // advertised, by address → active
	ibgp   bool                // some peer is iBGP
	log    *slog.Logger
	// replaced is when each peer was last replaced after its session
	// ended (sessions.go); stopWatch ends that watch.
	replaced  map[string]time.Time
	stopWatch context.CancelFunc
	// bfd and its sessions, by peer address: nil without Config.BFD.
	bfd         *bfd.Server
	bfdSessions map[netip.Addr]*bfd.Session
}

// Start starts the speaker and its sessions.
func Start(ctx context.Context, cfg Config) (*Speaker, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if !cfg.NextHop.IsValid() {
		cfg.NextHop = cfg.RouterID
	}
	if cfg.StandbyMED == 0 {
		cfg.StandbyMED = 100
	}
	if cfg.StandbyPrepend == 0 {
		cfg.StandbyPrepend = 2
	}
	if cfg.RestartTime == 0 {
		cfg.RestartTime = 5 * time.Second
	}
	if cfg.HoldTime == 0 {
		cfg.HoldTime = 9 * time.Second
	}
	if cfg.MaxPrefixes == 0 {
		cfg.MaxPrefixes = DefaultMaxPrefixes
	}
	if cfg.Netns != "" && cfg.ListenPort == 0 {
		return nil, fmt.Errorf("BGP speaker in namespace %s: a listen port is required", cfg.Netns)
	}
	srv := server.NewBgpServer(server.LoggerOption(newLogger(cfg.Logger)))
	if err := serve(srv, cfg.Netns); err != nil {
		return nil, err
	}
	s := &Speaker{cfg: cfg, srv: srv, routes: map[netip.Addr]bool{}, log: cfg.Logger, replaced: map[string]time.Time{}}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	listen := int32(-1)
	if cfg.ListenPort > 0 {
		listen = int32(cfg.ListenPort)
	}
	if err := srv.StartBgp(ctx, &api.StartBgpRequest{Global: &api.Global{
		Asn: cfg.ASN, RouterId: cfg.RouterID.String(), ListenPort: listen,
	}}); err != nil {
		srv.Stop()
		return nil, fmt.Errorf("start BGP: %w", err)
	}
	// Before the first peer: no path of theirs may ever be accepted.
	if err := rejectImports(ctx, srv); err != nil {
		srv.Stop()
		return nil, err
	}
	for _, p := range cfg.Peers {
		if p.ASN == cfg.ASN {
			s.ibgp = true
		}
		if err := srv.AddPeer(ctx, s.peerRequest(p, true)); err != nil {
			srv.Stop()
			// GoBGP's error names the peer, never its configuration;
			// the password stays out of it either way.
			return nil, fmt.Errorf("BGP peer %s: %w", p.Address, err)
		}
	}
	if err := s.watchSessions(); err != nil {
		srv.Stop()
		return nil, err
	}
	if cfg.BFD.Enabled {
		if err := s.startBFD(); err != nil {
			s.stopWatch()
			srv.Stop()
			return nil, err
		}
	}
	return s, nil
}

// peerRequest is p's configuration. restarting sets the Restart and
// Forwarding bits of the OPEN: without them a router ends its graceful
// restart the moment the new session is up, before this speaker's routes
// arrive, and moves the traffic away and back. The speaker then sends its
// routes once the peer's End-of-RIB came (at once from a router that
// sends us nothing), or after the deferral time. A peer replaced after
// its session ended (sessions.go) is not restarting: the routes go at
// once.
func (s *Speaker) peerRequest(p Peer, restarting bool) *api.AddPeerRequest {
	cfg := s.cfg
	hold := uint64(max(cfg.HoldTime.Seconds(), 3)) // BGP's smallest non-zero hold time
	var limit uint32                               // 0: GoBGP's "no limit"
	if cfg.MaxPrefixes > 0 {
		limit = uint32(cfg.MaxPrefixes)
	}
	port := uint32(p.Port)
	if port == 0 {
		port = 179
	}
	retry := uint64(connectRetry.Seconds())
	return &api.AddPeerRequest{Peer: &api.Peer{
		Conf:      &api.PeerConf{NeighborAddress: p.Address.String(), PeerAsn: p.ASN, AuthPassword: string(p.Password)},
		Transport: &api.Transport{RemotePort: port, PassiveMode: cfg.Netns != ""},
		// Short retries: a router that restarts is back in seconds,
		// and GoBGP's default connect-retry is 120 s.
		Timers: &api.Timers{Config: &api.TimersConfig{ConnectRetry: retry, HoldTime: hold,
			KeepaliveInterval: max(hold/3, 1), IdleHoldTimeAfterReset: retry}},
		GracefulRestart: &api.GracefulRestart{Enabled: true, RestartTime: uint32(cfg.RestartTime.Seconds()),
			LocalRestarting: restarting, DeferralTime: 3},
		AfiSafis: []*api.AfiSafi{afiSafi(netip.IPv4Unspecified(), limit), afiSafi(netip.IPv6Unspecified(), limit)},
	}}
}

// afiSafi enables a family with graceful restart and the prefix limit.
func afiSafi(family netip.Addr, limit uint32) *api.AfiSafi {
	f := familyOf(family)
	return &api.AfiSafi{Config: &api.AfiSafiConfig{Family: f, Enabled: true},
		MpGracefulRestart: &api.MpGracefulRestart{Config: &api.MpGracefulRestartConfig{Enabled: true}},
		PrefixLimits:      &api.PrefixLimit{Family: f, MaxPrefixes: limit, ShutdownThresholdPct: 80}}
}

// rejectImports installs the global import policy: a path the speaker
// added itself (route type local) is accepted, anything else falls to the
// default action, reject. GoBGP runs the global import policy on local
// paths too, so a bare default of reject would withdraw pier's own routes.
func rejectImports(ctx context.Context, srv *server.BgpServer) error {
	policy := &api.Policy{Name: importPolicy, Statements: []*api.Statement{{
		Name:       importPolicy + "-local",
		Conditions: &api.Conditions{RouteType: api.Conditions_ROUTE_TYPE_LOCAL},
		Actions:    &api.Actions{RouteAction: api.RouteAction_ACCEPT},
	}}}
	if err := srv.AddPolicy(ctx, &api.AddPolicyRequest{Policy: policy}); err != nil {
		return fmt.Errorf("BGP import policy: %w", err)
	}
	if err := srv.AddPolicyAssignment(ctx, &api.AddPolicyAssignmentRequest{Assignment: &api.PolicyAssignment{
		Name: "global", Direction: api.PolicyDirection_IMPORT,
		Policies: []*api.Policy{{Name: importPolicy}}, DefaultAction: api.RouteAction_REJECT,
	}}); err != nil {
		return fmt.Errorf("BGP import policy: %w", err)
	}
	return nil
}

func (c Config) validate() error {
	switch {
	case c.ASN == 0:
		return errors.New("BGP: the local ASN is required (--bgp-asn)")
	case !c.RouterID.Is4():
		return fmt.Errorf("BGP: router id %s must be an IPv4 address (--bgp-router-id)", c.RouterID)
	case len(c.Peers) == 0:
		return errors.New("BGP: at least one peer is required (--bgp-peer)")
	}
	for _, p := range c.Peers {
		if !p.Address.IsValid() || p.ASN == 0 {
			return fmt.Errorf("BGP: peer %s needs an address and an ASN", p.Address)
		}
		if err := p.Password.validate(); err != nil {
			return fmt.Errorf("BGP: peer %s: %w", p.Address, err)
		}
	}
	return nil
}

// Advertise makes the advertised routes exactly routes: new ones are
// added, changed ones (active ↔ standby) replaced, missing ones withdrawn.
func (s *Speaker) Advertise(ctx context.Context, routes []Route) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	want := make(map[netip.Addr]bool, len(routes))
	for _, r := range routes {
		a := r.Addr.Unmap()
		if a.Is6() && !s.cfg.NextHop6.IsValid() {
			continue
		}
		want[a] = r.Active
	}
	var errs []error
	for addr := range s.routes {
		if _, ok := want[addr]; !ok {
			if err := s.srv.DeletePath(ctx, &api.DeletePathRequest{TableType: api.TableType_GLOBAL, Path: s.path(addr, s.routes[addr])}); err != nil {
				errs = append(errs, fmt.Errorf("withdraw %s: %w", addr, err))
				continue
			}
			delete(s.routes, addr)
		}
	}
	for _, addr := range sortedKeys(want) {
		active := want[addr]
		if was, ok := s.routes[addr]; ok && was == active {
			continue
		}
		// A path from the same source replaces the previous one.
		if _, err := s.srv.AddPath(ctx, &api.AddPathRequest{TableType: api.TableType_GLOBAL, Path: s.path(addr, active)}); err != nil {
			errs = append(errs, fmt.Errorf("advertise %s: %w", addr, err))
			continue
		}
		s.routes[addr] = active
	}
	return errors.Join(errs...)
}

// path is the host route for addr with the attributes of its role.
func (s *Speaker) path(addr netip.Addr, active bool) *api.Path {
	nlri, _ := anypb.New(&api.IPAddressPrefix{Prefix: addr.String(), PrefixLen: uint32(addr.BitLen())})
	attrs := []proto.Message{&api.OriginAttribute{Origin: 0}}
	pref, med := uint32(LocalPrefActive), uint32(0)
	if !active {
		pref, med = LocalPrefStandby, s.cfg.StandbyMED
	}
	attrs = append(attrs, &api.LocalPrefAttribute{LocalPref: pref}, &api.MultiExitDiscAttribute{Med: med})
	if !active && !s.ibgp && s.cfg.StandbyPrepend > 0 {
		asns := make([]uint32, s.cfg.StandbyPrepend)
		for i := range asns {
			asns[i] = s.cfg.ASN
		}
		attrs = append(attrs, &api.AsPathAttribute{Segments: []*api.AsSegment{{Type: api.AsSegment_AS_SEQUENCE, Numbers: asns}}})
	}
	var family = familyOf(addr)
	if addr.Is4() {
		attrs = append(attrs, &api.NextHopAttribute{NextHop: s.cfg.NextHop.String()})
	} else {
		// IPv6 routes carry their next hop in MP_REACH_NLRI.
		attrs = append(attrs, &api.MpReachNLRIAttribute{Family: family, NextHops: []string{s.cfg.NextHop6.String()}, Nlris: []*anypb.Any{nlri}})
	}
	pattrs := make([]*anypb.Any, 0, len(attrs))
	for _, a := range attrs {
		m, _ := anypb.New(a)
		pattrs = append(pattrs, m)
	}
	return &api.Path{Family: family, Nlri: nlri, Pattrs: pattrs}
}

func familyOf(a netip.Addr) *api.Family {
	if a.Is4() {
		return &api.Family{Afi: api.Family_AFI_IP, Safi: api.Family_SAFI_UNICAST}
	}
	return &api.Family{Afi: api.Family_AFI_IP6, Safi: api.Family_SAFI_UNICAST}
}

// Advertised returns the advertised routes, by address → active.
func (s *Speaker) Advertised() map[netip.Addr]bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[netip.Addr]bool, len(s.routes))
	for a, active := range s.routes {
		out[a] = active
	}
	return out
}

// Stop withdraws everything by closing the sessions.
func (s *Speaker) Stop(ctx context.Context) {
	s.stopWatch()
	s.StopBFD()
	_ = s.srv.StopBgp(ctx, &api.StopBgpRequest{})
	s.srv.Stop()
}

func sortedKeys(m map[netip.Addr]bool) []netip.Addr {
	out := make([]netip.Addr, 0, len(m))
	for a := range m {
		out = append(out, a)
	}
	slices.SortFunc(out, func(a, b netip.Addr) int { return a.Compare(b) })
	return out
}

// serve runs srv's loop, in network namespace netns when set: its
// goroutine keeps the thread it moved there (locked, never moved back), so
// the listeners GoBGP opens on it are the namespace's; the thread ends
// with the loop, when the server stops.
func serve(srv *server.BgpServer, netns string) error {
	if netns == "" {
		go srv.Serve()
		return nil
	}
	entered := make(chan error, 1)
	go func() {
		err := netnsdo.Enter(netns) // the thread goes with the goroutine
		entered <- err
		if err != nil {
			return
		}
		srv.Serve()
	}()
	if err := <-entered; err != nil {
		return fmt.Errorf("BGP speaker: enter network namespace %s: %w", netns, err)
	}
	return nil
}
