// Package vrrp holds the addresses of a node's load balancers with VRRP:
// it renders keepalived's configuration from pier's own values, checks it
// with `keepalived -t`, and runs keepalived (start, reload with SIGHUP,
// adopt one a previous agent left running, restart one that died).
//
// One VRRP instance serves one ordered pair of nodes (active, standby) and
// carries the VIPs and floating IPs of every load balancer placed on that
// pair: VRRP router ids are 1–255 per segment, so one instance per load
// balancer would not scale. The active node has priority 250 and the
// standby 240 (PriorityActive says why so close). Each instance tracks a file
// the agent writes: "0" while every HAProxy process serving the pair's
// load balancers on this node is healthy, anything else puts the instance
// in FAULT, which sends a priority-0 advert so that the peer takes over at
// once rather than after the master-down timer.
//
// Layout of the folder (Config.Dir):
//
//	keepalived.conf        the configuration keepalived loads (checked copy)
//	keepalived.pid         parent pid, written by keepalived
//	vrrp.pid               VRRP child pid
//	keepalived.log         stdout and stderr
//	track/<instance>       one track file per instance
package vrrp

import (
	"cmp"
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Priorities of the two nodes of a pair. A backup that hears the
// master's priority-0 advert (its gate closed: HAProxy died, a drain)
// takes over after its skew time, (256 - priority) / 256 of an advert:
// 6 ms at 240 with 0.1 s adverts, where 100 waited 61 ms. The first
// election does not rest on the gap between the two (the standby's gate
// stays closed for a while on a new instance, addrhold's standbyHold);
// the gap still decides it should both gates open at once.
const (
	PriorityActive  = 250
	PriorityStandby = 240
)

// Instance is one VRRP instance on this node.
type Instance struct {
	// Name is ours (a pair identifier), never a user string.
	Name string
	// RouterID is the VRRP virtual router id, 1–255, unique per segment.
	RouterID int
	// Interface carries the VRRP adverts and the addresses.
	Interface string
	// Priority is PriorityActive or PriorityStandby.
	Priority int
	// Source is this node's address on Interface; Peers the other node's.
	Source netip.Addr
	Peers  []netip.Addr
	// Addresses are the VIPs and floating IPs, held as /32 or /128.
	Addresses []netip.Addr
}

// Config is everything keepalived runs on one node.
type Config struct {
	// Node names this node in keepalived's router_id (ours).
	Node string
	// Dir is the folder of the package comment.
	Dir string
	// Advert is the advertisement interval (VRRPv3 allows centiseconds).
	// The master-down timer is 3 adverts plus a skew of under one: with
	// 40 ms (DefaultAdvert), a silent master is replaced within about 0.13 s.
	Advert    time.Duration
	Instances []Instance
}

// TrackFile is the file whose content decides whether the instance may
// hold its addresses on this node.
func (c *Config) TrackFile(instance string) string {
	return filepath.Join(c.Dir, "track", instance)
}

// DefaultAdvert is 100 ms: the standby declares the holder dead about
// three adverts after its last one, so a cut link moves the addresses in
// 259-296 ms (test/pair, the holder sampled every 10 ms). 40 ms moves
// them in 88-119 ms, but it leaves a scheduling delay of only about
// 130 ms before a backup takes over a master that is alive: with every
// CPU saturated (hack/cpuhog.sh, two busy loops per core beside
// test/kubepair's failovers) 40 ms gave two holders, 50-600 ms at a
// time, in 3 runs of 3 (and in 1 of 3 with keepalived's VRRP process at
// nice -15, so keepalived's own CPU share is not the whole cause), and
// 100 ms in 1 of 6 (one takeover of 150 ms, while the API server was
// unreachable). A pair's four keepalived processes use 0.20% of a core at
// 100 ms, 0.50-0.56% at 40 ms. Real-time scheduling for keepalived
// (vrrp_rt_priority) was tried and left out: with it, a reload left
// addresses unheld for 0.1-0.3 s in addrhold's tests (TestHolderLone,
// TestOrphanSweepSparesPair), at 40 ms and 100 ms alike; the cause is
// not established (keepalived limits a real-time process to 10 ms of CPU
// between blocking calls, which a reload's parsing may exceed).
const DefaultAdvert = 100 * time.Millisecond

// CheckAdvert says whether d is an advert interval VRRPv3 can carry:
// whole centiseconds, from 10 ms to 40 s.
func CheckAdvert(d time.Duration) error {
	if d < 10*time.Millisecond || d > 40*time.Second || d%(10*time.Millisecond) != 0 {
		return fmt.Errorf("advert interval %s: want whole centiseconds between 10ms and 40s", d)
	}
	return nil
}

var (
	namePattern  = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,31}$`)
	ifacePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,14}$`)
	// pathPattern keeps our folder paths to characters keepalived's
	// tokenizer treats as plain word characters (no quote, no comment).
	pathPattern = regexp.MustCompile(`^/[A-Za-z0-9_./-]+$`)
)

// Validate checks every value against its allow-list. keepalived's
// configuration has no quoting that pier relies on, so a value that is
// not a plain word is refused rather than escaped.
func (c *Config) Validate() error {
	if !namePattern.MatchString(c.Node) {
		return fmt.Errorf("node name %q: want %s", c.Node, namePattern)
	}
	if !pathPattern.MatchString(c.Dir) || strings.Contains(c.Dir, "..") {
		return fmt.Errorf("folder %q: want an absolute plain path", c.Dir)
	}
	if err := CheckAdvert(c.Advert); err != nil {
		return err
	}
	names, ids := map[string]bool{}, map[int]bool{}
	for i := range c.Instances {
		in := &c.Instances[i]
		if err := in.validate(); err != nil {
			return fmt.Errorf("vrrp instance %d: %w", i, err)
		}
		if names[in.Name] || ids[in.RouterID] {
			return fmt.Errorf("vrrp instance %s: name or router id %d used twice", in.Name, in.RouterID)
		}
		names[in.Name], ids[in.RouterID] = true, true
	}
	return nil
}

func (in *Instance) validate() error {
	switch {
	case !namePattern.MatchString(in.Name):
		return fmt.Errorf("name %q: want %s", in.Name, namePattern)
	case in.RouterID < 1 || in.RouterID > 255:
		return fmt.Errorf("router id %d: want 1-255", in.RouterID)
	case !ifacePattern.MatchString(in.Interface):
		return fmt.Errorf("interface %q: want a Linux interface name", in.Interface)
	case in.Priority != PriorityActive && in.Priority != PriorityStandby:
		return fmt.Errorf("priority %d: want %d or %d", in.Priority, PriorityActive, PriorityStandby)
	case !in.Source.IsValid() || in.Source.Zone() != "":
		return errors.New("no source address")
	case len(in.Peers) == 0:
		return errors.New("no peer")
	case len(in.Addresses) == 0:
		return errors.New("no address to hold")
	}
	for _, p := range in.Peers {
		if !p.IsValid() || p.Zone() != "" || p.Is4() != in.Source.Is4() {
			return fmt.Errorf("peer %s: want an address of the source's family", p)
		}
	}
	for _, a := range in.Addresses {
		if !a.IsValid() || a.Zone() != "" || a.IsUnspecified() || a.IsMulticast() || a.IsLoopback() {
			return fmt.Errorf("address %s cannot be held", a)
		}
	}
	return nil
}

// Render returns keepalived.conf for c: deterministic for equal configs
// (instances sorted by name, addresses sorted), built from words that
// passed Validate only.
func Render(c Config) ([]byte, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	var b strings.Builder
	line := func(depth int, words ...string) {
		b.WriteString(strings.Repeat("  ", depth))
		b.WriteString(strings.Join(words, " "))
		b.WriteByte('\n')
	}
	line(0, "# pier: keepalived for node", c.Node+";", "generated, do not edit")
	line(0, "global_defs", "{")
	line(1, "router_id", c.Node)
	// The takeover is announced at once and repeated once a second
	// later; gratuitous ARP is what moves clients (without it a
	// moved VIP took 29 s to reach a client).
	line(1, "vrrp_garp_master_delay", "1")
	line(1, "vrrp_garp_master_repeat", "3")
	// An advert counts only when it comes from the instance's peer
	// (unicast_peer): a neighbour on the segment that sends adverts of
	// priority 255 for our router id would otherwise make the master step
	// down and hold every node in BACKUP for as long as it sends. Both
	// keepalived 2.2 and 2.3 take it (vrrp_strict, which would check
	// more, refuses unicast peers).
	line(1, "vrrp_check_unicast_src")
	line(0, "}")
	instances := slices.Clone(c.Instances)
	slices.SortFunc(instances, func(a, b Instance) int { return cmp.Compare(a.Name, b.Name) })
	for _, in := range instances {
		writeInstance(line, &c, &in)
	}
	return []byte(b.String()), nil
}

func writeInstance(line func(int, ...string), c *Config, in *Instance) {
	track := "track_" + in.Name
	line(0, "vrrp_track_file", track, "{")
	line(1, "file", c.TrackFile(in.Name))
	// weight 0: any non-zero content puts the instance in FAULT.
	line(1, "weight", "0")
	line(0, "}")
	line(0, "vrrp_instance", in.Name, "{")
	// Both nodes start as BACKUP and the higher priority wins the first
	// election; nopreempt keeps a recovered node from taking the
	// addresses back (no second move when a cut link heals).
	line(1, "state", "BACKUP")
	line(1, "nopreempt")
	line(1, "interface", in.Interface)
	line(1, "virtual_router_id", strconv.Itoa(in.RouterID))
	line(1, "priority", strconv.Itoa(in.Priority))
	line(1, "version", "3")
	line(1, "advert_int", centiseconds(c.Advert))
	line(1, "unicast_src_ip", in.Source.String())
	// Adverts leave with TTL (hop limit) 255 and are taken only with 255:
	// a packet that crossed a router, whatever source it claims, is not
	// the peer's on this segment (RFC 5798 §5.1.1.3). IPv4 sends 255
	// already; IPv6 would send the kernel's default of 64.
	line(1, "unicast_ttl", "255")
	line(1, "unicast_peer", "{")
	for _, p := range sortedAddrs(in.Peers) {
		line(2, p.String(), "min_ttl", "255", "max_ttl", "255")
	}
	line(1, "}")
	// Adverts carry the addresses of the source's family; the others
	// move with the instance without being advertised.
	var same, other []netip.Addr
	for _, a := range sortedAddrs(in.Addresses) {
		if a.Is4() == in.Source.Is4() {
			same = append(same, a)
		} else {
			other = append(other, a)
		}
	}
	for _, block := range []struct {
		name  string
		addrs []netip.Addr
	}{{"virtual_ipaddress", same}, {"virtual_ipaddress_excluded", other}} {
		if len(block.addrs) == 0 {
			continue
		}
		line(1, block.name, "{")
		for _, a := range block.addrs {
			line(2, netip.PrefixFrom(a, a.BitLen()).String(), "dev", in.Interface)
		}
		line(1, "}")
	}
	line(1, "track_file", "{")
	line(2, track)
	line(1, "}")
	line(0, "}")
}

func sortedAddrs(in []netip.Addr) []netip.Addr {
	out := slices.Clone(in)
	slices.SortFunc(out, func(a, b netip.Addr) int { return a.Compare(b) })
	return slices.Compact(out)
}

// centiseconds writes d in seconds with two decimals, as advert_int takes.
func centiseconds(d time.Duration) string {
	cs := d.Milliseconds() / 10
	return fmt.Sprintf("%d.%02d", cs/100, cs%100)
}
