package addrhold

import (
	"context"
	"fmt"
	"net/netip"
	"os/exec"
	"strings"
	"time"

	"pier.dev/pier/internal/netnsdo"
)

// A move has a gap: the node whose gate closes drops the addresses at once
// (keepalived's FAULT) and the peer holds them a skew time later
// (20–60 ms), then announces them (gratuitous ARP). Without care, every
// packet that reaches the old node in between is dropped — a SYN then
// costs the client a one-second retransmit. So before a gate closes on
// addresses it holds, a node keeps accepting packets for them (IPv4: a
// local route on lo) while it no longer answers ARP for them (an nftables
// arp filter), for lingerFor. Clients keep reaching it until the peer's
// announcement moves them, and nothing draws them back: in a drain their
// requests are served; with HAProxy dead they are refused at once and
// retried.
const lingerFor = time.Second

// lingerProto tags the local routes of a linger, so that a later agent
// finds and removes what one that crashed mid-linger left.
const lingerProto = 211

// lingerTable is the nftables table of the ARP filter (family arp).
const lingerTable = "pier_linger"

// linger starts accepting addrs without announcing them. It returns false
// when it could not (no nft): the handover then simply has its gap.
func (h *Holder) linger(addrs []netip.Addr) bool {
	var v4 []netip.Addr
	var words []string
	for _, a := range addrs {
		if a.Is4() {
			v4, words = append(v4, a), append(words, a.String())
		}
	}
	if len(v4) == 0 {
		return false
	}
	if _, err := exec.LookPath("nft"); err != nil {
		h.warnOnce("linger", "drain: nft not found; a planned handover drops the packets of its 20–60 ms gap (install nftables)")
		return false
	}
	script := fmt.Sprintf("table arp %s {\n  chain out {\n    type filter hook output priority 0; policy accept;\n"+
		"    arp operation reply arp saddr ip { %s } drop\n  }\n}\n", lingerTable, strings.Join(words, ", "))
	if err := h.nft(script, "-f", "-"); err != nil {
		h.cfg.Logger.Warn("drain: could not stop answering ARP for the addresses; handing over with a gap", "error", err)
		return false
	}
	for _, a := range v4 {
		if err := netnsdo.AddLocalRoute(h.cfg.Netns, a, lingerProto); err != nil {
			h.cfg.Logger.Warn("drain: could not keep accepting an address", "address", a, "error", err)
		}
	}
	h.lingerUntil = time.Now().Add(lingerFor)
	return true
}

// endLinger removes what linger added (and what a crashed agent's linger
// left): the tagged local routes and the ARP filter.
func (h *Holder) endLinger() {
	_ = netnsdo.FlushLocalRoutes(h.cfg.Netns, lingerProto)
	if _, err := exec.LookPath("nft"); err == nil {
		_ = h.nft("", "delete", "table", "arp", lingerTable)
	}
	h.lingerUntil = time.Time{}
}

// nft runs nft with args in the holder's network namespace, stdin (a
// script) on its standard input when not empty.
func (h *Holder) nft(stdin string, args ...string) error {
	cmd := netnsdo.Command(context.Background(), h.cfg.Netns, "nft", args...)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("nft %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// nftOutput runs nft with args in the holder's network namespace and
// returns its standard output.
func (h *Holder) nftOutput(args ...string) (string, error) {
	out, err := netnsdo.Command(context.Background(), h.cfg.Netns, "nft", args...).Output()
	return string(out), err
}

func (h *Holder) warnOnce(key, msg string) {
	if h.warned[key] {
		return
	}
	h.warned[key] = true
	h.cfg.Logger.Warn(msg)
}
