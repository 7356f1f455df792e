package addrhold

import (
	"bytes"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"pier.dev/pier/internal/fsutil"
	"pier.dev/pier/internal/netnsdo"
)

// An address can outlive its load balancer on a node: keepalived killed
// (SIGKILL, a crash) leaves the addresses it held on the interface, and if
// the load balancer is deleted or moved before the next keepalived takes
// over, no keepalived instance names that address any more, so nothing
// would ever remove it. The node would answer ARP for an address another
// load balancer may get next, for ever. Lone addresses (lone.go) are the
// same when the agent dies holding them.
//
// So the holder records on disk every address it may hold (heldFile: the
// addresses of its instances and lone load balancers, one per line), and
// sweeps: an address the record names that no load balancer placed here
// has any more is removed from the interface once it has been unwanted for
// orphanGrace, at the first Sync after a start (what a previous agent
// recorded) as at any later one. Only recorded addresses are touched: the
// node's own addresses and any an operator added are never in the record.
const heldFile = "held-addresses"

// orphanGrace is how long an address stays unwanted before it is swept:
// past keepalived's reload (which drops a removed instance's addresses
// itself) and past releaseWait, the lone holder's own wait.
const orphanGrace = 5 * time.Second

// recordHeld adds want to the addresses on record and marks the recorded
// ones no longer wanted. The first call also reads what a previous agent
// recorded.
func (h *Holder) recordHeld(want map[netip.Addr]bool, now time.Time) {
	if h.recorded == nil {
		h.recorded = h.readRecord()
		h.unwanted = map[netip.Addr]time.Time{}
	}
	for a := range want {
		h.recorded[a] = true
		delete(h.unwanted, a)
	}
	for a := range h.recorded {
		if _, ok := h.unwanted[a]; !ok && !want[a] {
			h.unwanted[a] = now
		}
	}
	h.writeRecord()
}

// sweepOrphans removes from the interface the recorded addresses that
// have been unwanted for orphanGrace; an unwanted address not on the
// interface is dropped from the record.
func (h *Holder) sweepOrphans(held map[netip.Addr]bool, now time.Time) error {
	var errs []error
	changed := false
	for a, since := range h.unwanted {
		if now.Sub(since) < orphanGrace {
			continue
		}
		if held[a] {
			if err := netnsdo.DeleteAddress(h.cfg.Netns, h.cfg.Interface, a); err != nil {
				errs = append(errs, err)
				continue
			}
			h.cfg.Logger.Warn("vrrp: removed an address no load balancer placed here has (left by a keepalived or an agent that died meanwhile)",
				"address", a, "interface", h.cfg.Interface, "unwanted_for", now.Sub(since).Round(time.Millisecond))
			h.orphansRemoved++
			if h.cfg.Metrics != nil {
				h.cfg.Metrics.OrphansRemoved.Inc()
			}
		}
		delete(h.unwanted, a)
		delete(h.recorded, a)
		changed = true
	}
	if changed {
		h.writeRecord()
	}
	return errors.Join(errs...)
}

// OrphansRemoved counts the addresses sweepOrphans removed.
func (h *Holder) OrphansRemoved() int { return h.orphansRemoved }

func (h *Holder) recordPath() string { return filepath.Join(h.cfg.Dir, heldFile) }

// readRecord reads heldFile; a missing or unreadable one is an empty
// record (a line that is not an address is skipped: the file is ours).
func (h *Holder) readRecord() map[netip.Addr]bool {
	out := map[netip.Addr]bool{}
	b, err := os.ReadFile(h.recordPath())
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			h.cfg.Logger.Warn("vrrp: cannot read the record of held addresses; no orphan sweep of a previous agent's", "error", err)
		}
		return out
	}
	for _, line := range strings.Split(string(b), "\n") {
		if a, err := netip.ParseAddr(strings.TrimSpace(line)); err == nil {
			out[a] = true
		}
	}
	return out
}

// writeRecord writes the record when it changed, atomically.
func (h *Holder) writeRecord() {
	addrs := make([]netip.Addr, 0, len(h.recorded))
	for a := range h.recorded {
		addrs = append(addrs, a)
	}
	slices.SortFunc(addrs, netip.Addr.Compare)
	var buf bytes.Buffer
	for _, a := range addrs {
		buf.WriteString(a.String())
		buf.WriteByte('\n')
	}
	if bytes.Equal(buf.Bytes(), h.lastRecord) {
		return
	}
	if err := fsutil.WriteAtomic(h.recordPath(), buf.Bytes(), 0o600); err != nil {
		h.cfg.Logger.Warn("vrrp: cannot write the record of held addresses", "error", err)
		return
	}
	h.lastRecord = buf.Bytes()
}
