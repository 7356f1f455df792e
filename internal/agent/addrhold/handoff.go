package addrhold

import (
	"fmt"
	"net"
	"os/exec"
	"regexp"
	"strings"
	"time"

	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/netnsdo"
)

// A move splits the connections that straddle it. A client's connection
// opened through the old holder an instant before the new holder's
// gratuitous ARP sends its next packets to the new holder, which has no
// socket for it and resets it: about one request per planned handover
// with a connection opened every 5 ms.
//
// So the new holder hands such packets back. While an instance is BACKUP,
// and for handoffFor after it becomes MASTER, its node has an nftables
// table (family netdev, ingress of the VRRP interface) that
//   - records every connection that begins here (a SYN to one of the
//     instance's addresses) in a set, and
//   - forwards every other TCP packet to one of those addresses to the
//     peer, unchanged (a new Ethernet header only).
//
// The peer, the old holder, still accepts the addresses during its linger
// (linger.go), so its sockets finish what they began. While BACKUP, no
// packet for the addresses arrives here: the table costs nothing until the
// move. The window ends before the peer's linger does (lingerFor), and a
// node never has the table while it lingers itself.
//
// A packet the peer forwarded arrives from the peer's MAC address, and the
// rule never forwards those: a packet cannot be handed back and forth,
// even if both nodes had the table at once. (Marking forwarded packets by
// rewriting a header field instead, the TTL, made the kernel drop them.)
const handoffFor = 700 * time.Millisecond

// handoffSetSize bounds the connections a node records during one window:
// 256k connections in 0.7 s is far above what one node accepts; an
// overflowing set would send this node's own connections to the peer.
const handoffSetSize = 262144

// handoffPrefix starts the name of every handoff table, so that a new
// agent finds and removes what a previous one left.
const handoffPrefix = "pier_handoff_"

// ifaceName is what an interface name may look like in an nftables
// script: the kernel's own limit (15 bytes) in a conservative alphabet.
// handedBack reads the forwarding rule's counter.
var handedBack = regexp.MustCompile(`counter packets (\d+)`)

var ifaceName = regexp.MustCompile(`^[A-Za-z0-9_.:-]{1,15}$`)

// tickHandoff installs, updates or removes each instance's handoff table.
func (h *Holder) tickHandoff(now time.Time) {
	if _, err := exec.LookPath("nft"); err != nil {
		h.warnOnce("handoff", "nft not found: a move resets the connections that straddle it (install nftables)")
		return
	}
	for name, in := range h.instances {
		key := handoffKey(h.cfg.Interface, in)
		want := key != "" && h.lingerUntil.IsZero() && !h.fenced[name]
		installed := h.handoff[name]
		switch h.roles[name] {
		case model.VRRPBackup:
		case model.VRRPMaster:
			// Only a table that was there before the move: a first
			// election has no connections to hand back.
			want = want && installed.key != "" && now.Sub(h.since[name]) < handoffFor
		default:
			want = false
		}
		switch {
		case want && installed.key != key && now.After(installed.retryAt):
			h.installHandoff(name, in, key, now)
		case !want && installed.key != "":
			h.dropHandoff(name)
		}
	}
	for name := range h.handoff {
		if h.instances[name] == nil {
			h.dropHandoff(name)
		}
	}
}

// installHandoff creates or updates an instance's table. It needs the
// peer's MAC address, which the node knows once keepalived's unicast
// adverts have gone to the peer; until then it tries again every second.
func (h *Holder) installHandoff(name string, in *Instance, key string, now time.Time) {
	mac, err := netnsdo.Neighbour(h.cfg.Netns, h.cfg.Interface, in.PeerAddress)
	if err == nil {
		err = h.nft(handoffScript(h.cfg.Interface, name, mac, in), "-f", "-")
	}
	if err != nil {
		if h.handoff[name].retryAt.IsZero() {
			h.cfg.Logger.Warn("handoff table not in place yet; a move would reset the connections that straddle it",
				"instance", name, "error", err)
		}
		h.handoff[name] = handoffState{retryAt: now.Add(time.Second)}
		return
	}
	h.handoff[name] = handoffState{key: key}
}

func (h *Holder) dropHandoff(name string) {
	if out, err := h.nftOutput("list", "table", "netdev", handoffPrefix+name); err == nil {
		if m := handedBack.FindStringSubmatch(out); m != nil && m[1] != "0" {
			h.cfg.Logger.Info("handed the packets of connections that straddled the move back to the peer",
				"instance", name, "packets", m[1])
		}
	}
	if err := h.nft("", "delete", "table", "netdev", handoffPrefix+name); err != nil {
		h.cfg.Logger.Warn("remove handoff table", "instance", name, "error", err)
	}
	delete(h.handoff, name)
}

// endHandoffs removes every handoff table, ours and a previous agent's.
func (h *Holder) endHandoffs() {
	h.handoff = map[string]handoffState{}
	if _, err := exec.LookPath("nft"); err != nil {
		return
	}
	out, err := h.nftOutput("list", "tables", "netdev")
	if err != nil {
		return
	}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) == 3 && f[0] == "table" && strings.HasPrefix(f[2], handoffPrefix) {
			_ = h.nft("", "delete", "table", "netdev", f[2])
		}
	}
}

// handoffState is an instance's table: what it forwards (key, "" when
// there is no table) or when to try again after a failure.
type handoffState struct {
	key     string
	retryAt time.Time
}

// handoffKey identifies what a table forwards; "" when the instance has
// nothing to hand back (no IPv4 address, no peer) or the interface name
// cannot be written safely.
func handoffKey(iface string, in *Instance) string {
	if !ifaceName.MatchString(iface) || !in.PeerAddress.Is4() {
		return ""
	}
	v4 := handoffAddrs(in)
	if len(v4) == 0 {
		return ""
	}
	return iface + " " + in.PeerAddress.String() + " " + strings.Join(v4, ",")
}

func handoffAddrs(in *Instance) []string {
	var v4 []string
	for _, a := range in.Addresses {
		if a.Is4() {
			v4 = append(v4, a.String())
		}
	}
	return v4
}

// handoffScript is one nftables transaction that creates the table or
// replaces its rules; the set of connections that began here survives it.
// Every value in it is pier's: an instance name from a router id, parsed
// addresses, a checked interface name.
func handoffScript(iface, name string, peerMAC net.HardwareAddr, in *Instance) string {
	table := "netdev " + handoffPrefix + name
	addrs := "{ " + strings.Join(handoffAddrs(in), ", ") + " }"
	conn := "ip saddr . tcp sport . ip daddr . tcp dport"
	var b strings.Builder
	fmt.Fprintf(&b, "add table %s\n", table)
	fmt.Fprintf(&b, "add set %s mine { type ipv4_addr . inet_service . ipv4_addr . inet_service; size %d; flags timeout; timeout %ds; }\n",
		table, handoffSetSize, 3)
	fmt.Fprintf(&b, "add chain %s in { type filter hook ingress device %q priority 0; policy accept; }\n", table, iface)
	fmt.Fprintf(&b, "flush chain %s in\n", table)
	fmt.Fprintf(&b, "add rule %s in ip daddr %s tcp flags & (syn | ack) == syn add @mine { %s }\n", table, addrs, conn)
	fmt.Fprintf(&b, "add rule %s in ip daddr %s ether saddr != %s %s != @mine counter fwd ip to %s device %q\n",
		table, addrs, peerMAC, conn, in.PeerAddress, iface)
	return b.String()
}
