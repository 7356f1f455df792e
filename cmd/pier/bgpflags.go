package main

import (
	"flag"
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"

	"pier.dev/pier/internal/agent/bgp"
	"pier.dev/pier/internal/bfd"
)

// bgpFlags are `pier agent`'s --bgp-* flags.
type bgpFlags struct {
	peers       []string
	asn         uint
	peerASN     uint
	routerID    string
	nextHop     string
	nextHop6    string
	standbyMED  uint
	prepend     int
	listenPort  int
	restartTime uint
	holdTime    uint
	passwords   string
	maxPrefixes uint
	ecmp        bool
	preempt     bool
	bfd         bool
	bfdInterval time.Duration
	bfdMult     uint
}

func (b *bgpFlags) register(fs *flag.FlagSet) {
	fs.Var((*commaList)(&b.peers), "bgp-peer", "advertise the VIPs and FIPs of the load balancers placed here to this BGP neighbour, ADDR or ADDR:PORT or ADDR@ASN (repeatable, comma-separated); the active node's routes preferred (docs/bgp.md). Excludes --vrrp-interface")
	fs.UintVar(&b.asn, "bgp-asn", 0, "this node's AS number (with --bgp-peer)")
	fs.UintVar(&b.peerASN, "bgp-peer-asn", 0, "the peers' AS number unless a --bgp-peer says ADDR@ASN; equal to --bgp-asn: iBGP, preference by LOCAL_PREF 200/100 (the seeds'); else eBGP, by MED and AS-path prepend")
	fs.StringVar(&b.routerID, "bgp-router-id", "", "BGP router id, an IPv4 address unique per node (default: --bgp-next-hop)")
	fs.StringVar(&b.nextHop, "bgp-next-hop", "", "the node's IPv4 address the routers send the traffic to (required with --bgp-peer)")
	fs.StringVar(&b.nextHop6, "bgp-next-hop6", "", "the node's IPv6 address for IPv6 routes; without it IPv6 addresses are not advertised")
	fs.UintVar(&b.standbyMED, "bgp-standby-med", 100, "MED of the standby's routes (the active's is 0)")
	fs.IntVar(&b.prepend, "bgp-standby-prepend", 2, "times the standby prepends its AS number towards eBGP peers; 0: none")
	fs.IntVar(&b.listenPort, "bgp-listen-port", 0, "also accept BGP sessions on this port; 0: only connect out")
	fs.UintVar(&b.restartTime, "bgp-restart-time", 5, "seconds the routers keep this node's routes while its agent restarts (graceful restart)")
	fs.UintVar(&b.holdTime, "bgp-hold-time", 9, "BGP hold time in seconds (3 or more; keepalives every third): without BFD, a dead node stays the routers' choice this long plus --bgp-restart-time")
	fs.StringVar(&b.passwords, "bgp-password-file", "", "file of TCP-MD5 passwords (a mounted Secret's key): lines `PEER-ADDRESS PASSWORD`, `* PASSWORD` for every peer not named; read at start, never logged (docs/bgp.md)")
	fs.BoolVar(&b.ecmp, "bgp-ecmp", false, "ECMP for native load balancers (Services of type LoadBalancer) the controller places on every node (its --native-ecmp): advertise their VIPs and FIPs with the same preference as every other node, while this node's nftables table for them is applied and current, for the routers' multipath to spread the flows; each node picks a flow's endpoint by the same consistent hash. Needs net.netfilter.nf_conntrack_tcp_loose=1 (the default) so that a node takes over a flow mid-way (docs/bgp.md)")
	fs.BoolVar(&b.preempt, "bgp-preempt", false, "when the active node's HAProxy serves again after a failure, prefer its routes again at once (a second move of the traffic); by default the standby that took over keeps the traffic while it serves, as VRRP's nopreempt (docs/bgp.md)")
	fs.BoolVar(&b.bfd, "bgp-bfd", false, "run a BFD session (RFC 5880, single hop: UDP 3784, TTL 255) with every --bgp-peer, so that a router sees this node gone --bgp-bfd-multiplier × --bgp-bfd-interval after its last packet (300 ms by default) instead of after the hold time; this node resets a peer's BGP session when its BFD goes down. The routers must run BFD for the session too (bird: a bfd protocol and \"bfd on\" in the bgp protocol; FRR: \"neighbor ADDR bfd\"; docs/bgp.md)")
	fs.DurationVar(&b.bfdInterval, "bgp-bfd-interval", bfd.DefaultInterval, fmt.Sprintf("with --bgp-bfd: how often BFD packets go each way once the session is up (%s to %s; until up, once a second)", bfd.MinInterval, bfd.MaxInterval))
	fs.UintVar(&b.bfdMult, "bgp-bfd-multiplier", bfd.DefaultMultiplier, "with --bgp-bfd: how many BFD packets in a row may be lost before the session is down (1-255)")
	fs.UintVar(&b.maxPrefixes, "bgp-max-prefixes", bgp.DefaultMaxPrefixes, "routes a peer may send per address family before its session is ended (pier accepts none of them); 0: no limit")
}

// config returns the speaker's configuration, nil without --bgp-peer.
func (b *bgpFlags) config() (*bgp.Config, error) {
	if len(b.peers) == 0 {
		return nil, nil
	}
	if b.asn == 0 || b.asn > 1<<32-1 {
		return nil, fmt.Errorf("--bgp-asn: an AS number 1-4294967295 is required with --bgp-peer")
	}
	cfg := &bgp.Config{ASN: uint32(b.asn), StandbyMED: uint32(b.standbyMED), StandbyPrepend: b.prepend,
		ListenPort: b.listenPort, RestartTime: time.Duration(b.restartTime) * time.Second,
		HoldTime: time.Duration(b.holdTime) * time.Second}
	if b.holdTime < 3 {
		return nil, fmt.Errorf("--bgp-hold-time %d: 3 seconds or more", b.holdTime)
	}
	if b.prepend == 0 {
		cfg.StandbyPrepend = -1
	}
	if b.bfdInterval < bfd.MinInterval || b.bfdInterval > bfd.MaxInterval {
		return nil, fmt.Errorf("--bgp-bfd-interval %s: %s to %s", b.bfdInterval, bfd.MinInterval, bfd.MaxInterval)
	}
	if b.bfdMult < 1 || b.bfdMult > 255 {
		return nil, fmt.Errorf("--bgp-bfd-multiplier %d: 1 to 255", b.bfdMult)
	}
	cfg.BFD = bgp.BFD{Enabled: b.bfd, Interval: b.bfdInterval, Multiplier: int(b.bfdMult)}
	switch {
	case b.maxPrefixes == 0:
		cfg.MaxPrefixes = -1
	case b.maxPrefixes > 1<<32-1:
		return nil, fmt.Errorf("--bgp-max-prefixes %d: at most 4294967295", b.maxPrefixes)
	default:
		cfg.MaxPrefixes = int(b.maxPrefixes)
	}
	var err error
	if cfg.NextHop, err = parseAddr("--bgp-next-hop", b.nextHop, true); err != nil {
		return nil, err
	}
	if b.nextHop6 != "" {
		if cfg.NextHop6, err = parseAddr("--bgp-next-hop6", b.nextHop6, false); err != nil {
			return nil, err
		}
	}
	cfg.RouterID = cfg.NextHop
	if b.routerID != "" {
		if cfg.RouterID, err = parseAddr("--bgp-router-id", b.routerID, true); err != nil {
			return nil, err
		}
	}
	for _, p := range b.peers {
		peer, err := parsePeer(p, uint32(b.peerASN))
		if err != nil {
			return nil, err
		}
		cfg.Peers = append(cfg.Peers, peer)
	}
	if b.passwords != "" {
		if err := b.setPasswords(cfg); err != nil {
			return nil, err
		}
	}
	return cfg, nil
}

// setPasswords gives each peer its password from --bgp-password-file. A
// line for an address that is no peer is refused: a typo there would
// otherwise leave a session unsigned without a word.
func (b *bgpFlags) setPasswords(cfg *bgp.Config) error {
	f, err := os.Open(b.passwords)
	if err != nil {
		return fmt.Errorf("--bgp-password-file: %w", err)
	}
	defer f.Close()
	pws, err := bgp.ReadPasswords(f)
	if err != nil {
		return fmt.Errorf("--bgp-password-file %s: %w", b.passwords, err)
	}
	peers := map[netip.Addr]bool{}
	for i := range cfg.Peers {
		cfg.Peers[i].Password = pws.For(cfg.Peers[i].Address)
		peers[cfg.Peers[i].Address.Unmap()] = true
	}
	for addr := range pws.ByPeer {
		if !peers[addr] {
			return fmt.Errorf("--bgp-password-file %s: a password for %s, which is no --bgp-peer", b.passwords, addr)
		}
	}
	return nil
}

func parseAddr(flagName, s string, v4 bool) (netip.Addr, error) {
	a, err := netip.ParseAddr(s)
	if err != nil || (v4 && !a.Is4()) || (!v4 && !a.Is6()) {
		family := "IPv6"
		if v4 {
			family = "IPv4"
		}
		return netip.Addr{}, fmt.Errorf("%s: an %s address is required with --bgp-peer, got %q", flagName, family, s)
	}
	return a, nil
}

// parsePeer reads ADDR, ADDR:PORT, [V6]:PORT, each optionally @ASN.
func parsePeer(s string, defaultASN uint32) (bgp.Peer, error) {
	p := bgp.Peer{ASN: defaultASN}
	if at := strings.LastIndex(s, "@"); at >= 0 {
		asn, err := strconv.ParseUint(s[at+1:], 10, 32)
		if err != nil || asn == 0 {
			return p, fmt.Errorf("--bgp-peer %q: bad AS number after @", s)
		}
		p.ASN, s = uint32(asn), s[:at]
	}
	if ap, err := netip.ParseAddrPort(s); err == nil {
		p.Address, p.Port = ap.Addr(), ap.Port()
	} else if a, err := netip.ParseAddr(s); err == nil {
		p.Address = a
	} else {
		return p, fmt.Errorf("--bgp-peer %q: want ADDR, ADDR:PORT or [IPv6]:PORT, optionally @ASN", s)
	}
	if p.ASN == 0 {
		return p, fmt.Errorf("--bgp-peer %s: no AS number (--bgp-peer-asn or ADDR@ASN)", s)
	}
	return p, nil
}
