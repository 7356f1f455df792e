package addrhold

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"time"

	"pier.dev/pier/internal/fsutil"
	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/netnsdo"
)

// An address can outlive its load balancer on a node. keepalived killed
// (SIGKILL, a crash, the whole agent container killed) leaves the
// addresses it held on the interface; while the agent lives its
// supervisor removes them (vrrp.Keepalived), but when the agent is dead
// too, and the load balancer is deleted or moved before the next agent
// starts, no keepalived instance names the address any more and nothing
// would ever remove it: the node answers ARP for an address that another
// load balancer may get next, for ever. A lone address (lone.go) is the
// same when the agent dies holding it.
//
// So the holder keeps a record on disk (heldFile, in keepalived's folder)
// of every address it may hold for a load balancer placed here, with that
// load balancer, and sweeps: a recorded address that no load balancer
// placed here wants any more is removed from the interface once it has
// been unwanted for orphanGrace. After a start that is what the previous
// agent recorded, measured from the first Sync. The rules, which the
// tests hold:
//   - wanted is every address of every load balancer placed on this node,
//     active or standby, in a VRRP instance or lone: an address two load
//     balancers share stays while either is placed here;
//   - only recorded addresses are ever removed: the node's own, an
//     operator's and another keepalived's are never on the record;
//   - an address already on the interface when a load balancer first
//     wants it, and not on the record, is not pier's (a manual address, or
//     one a previous agent held without a record): it is not recorded
//     until the holder sees it leave the interface, so it is never swept;
//   - an unwanted address no longer on the interface leaves the record.
//
// A crash of the agent does not lose the record (the page cache survives
// the process); a crash of the node loses the interface's addresses too,
// so WriteAtomic's lack of fsync costs nothing here.
const heldFile = "held-addresses"

// orphanGrace is how long an address stays unwanted before it is swept:
// past keepalived's reload (which drops a removed instance's addresses
// itself) and past releaseWait, the lone holder's own wait.
const orphanGrace = 5 * time.Second

// heldEntry is one recorded address and the load balancer that last
// wanted it here (for the log of its removal).
type heldEntry struct {
	Address netip.Addr `json:"address"`
	UUID    string     `json:"uuid"`
	Name    string     `json:"lb,omitempty"`
}

// heldRecord is heldFile's content.
type heldRecord struct {
	Addresses []heldEntry `json:"addresses"`
}

// orphanSweep is the sweep's state; its methods are pure, the Holder does
// the I/O.
type orphanSweep struct {
	recorded map[netip.Addr]heldEntry
	// unwanted: recorded addresses no load balancer here wants, since when.
	unwanted map[netip.Addr]time.Time
	// foreign: wanted addresses that were on the interface before pier
	// held them; recorded once seen off it.
	foreign map[netip.Addr]heldEntry
	written []byte // the record's last content on disk
	dirty   bool   // changed since written
	removed int
}

func newOrphanSweep(recorded map[netip.Addr]heldEntry) *orphanSweep {
	return &orphanSweep{recorded: recorded, unwanted: map[netip.Addr]time.Time{}, foreign: map[netip.Addr]heldEntry{}}
}

// wantedBy returns, per address, the load balancer placed here that wants
// it (the lowest UUID when several share it): those of the instances of
// view and of the lone ones.
func wantedBy(lbs []*model.LoadBalancer, view map[string]*Instance, lone map[string][]netip.Addr) map[netip.Addr]heldEntry {
	here := map[string]bool{}
	for _, in := range view {
		for _, uuid := range in.UUIDs {
			here[uuid] = true
		}
	}
	for uuid := range lone {
		here[uuid] = true
	}
	want := map[netip.Addr]heldEntry{}
	for _, lb := range lbs {
		if !here[lb.UUID] {
			continue
		}
		for _, a := range lbAddrs(lb) {
			if e, ok := want[a]; !ok || lb.UUID < e.UUID {
				want[a] = heldEntry{Address: a, UUID: lb.UUID, Name: lb.Name}
			}
		}
	}
	return want
}

// note takes the addresses wanted at a Sync; present is what the interface
// had just before (nil when it could not be read: then no address not on
// record is recorded before a Tick sees it off the interface). It returns
// the addresses newly found foreign.
func (s *orphanSweep) note(want map[netip.Addr]heldEntry, present map[netip.Addr]bool, now time.Time) (foreign []heldEntry) {
	s.dirty = true
	for a, e := range want {
		_, known := s.recorded[a]
		switch {
		case known:
			s.recorded[a] = e
			delete(s.unwanted, a)
		case present == nil || present[a]:
			if _, ok := s.foreign[a]; !ok {
				foreign = append(foreign, e)
			}
			s.foreign[a] = e
		default:
			s.recorded[a] = e
		}
	}
	for a := range s.foreign {
		if _, ok := want[a]; !ok {
			delete(s.foreign, a)
		}
	}
	for a := range s.recorded {
		if _, ok := want[a]; ok {
			continue
		}
		if _, ok := s.unwanted[a]; !ok {
			s.unwanted[a] = now
		}
	}
	slices.SortFunc(foreign, func(a, b heldEntry) int { return a.Address.Compare(b.Address) })
	return foreign
}

// due decides a Tick's sweep from held, the interface's addresses: it
// returns the recorded addresses to remove now (unwanted for orphanGrace
// and on the interface), forgets those unwanted for orphanGrace and off
// the interface, and records the foreign ones that left it.
func (s *orphanSweep) due(held map[netip.Addr]bool, now time.Time) []heldEntry {
	var out []heldEntry
	for a, since := range s.unwanted {
		if now.Sub(since) < orphanGrace {
			continue
		}
		if held[a] {
			out = append(out, s.recorded[a])
			continue
		}
		s.forget(a)
	}
	for a, e := range s.foreign {
		if !held[a] {
			delete(s.foreign, a)
			s.recorded[a] = e
			s.dirty = true
		}
	}
	slices.SortFunc(out, func(a, b heldEntry) int { return a.Address.Compare(b.Address) })
	return out
}

// forget drops an address from the record.
func (s *orphanSweep) forget(a netip.Addr) {
	delete(s.unwanted, a)
	delete(s.recorded, a)
	s.dirty = true
}

// encode is the record's file content: sorted, so that an unchanged record
// is not rewritten.
func (s *orphanSweep) encode() []byte {
	rec := heldRecord{Addresses: make([]heldEntry, 0, len(s.recorded))}
	for _, e := range s.recorded {
		rec.Addresses = append(rec.Addresses, e)
	}
	slices.SortFunc(rec.Addresses, func(a, b heldEntry) int { return a.Address.Compare(b.Address) })
	b, _ := json.MarshalIndent(rec, "", "  ") // addresses and strings: cannot fail
	return append(b, '\n')
}

// decodeRecord parses heldFile's content.
func decodeRecord(b []byte) (map[netip.Addr]heldEntry, error) {
	var rec heldRecord
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rec); err != nil {
		return nil, err
	}
	out := make(map[netip.Addr]heldEntry, len(rec.Addresses))
	for i, e := range rec.Addresses {
		if !e.Address.IsValid() {
			return nil, fmt.Errorf("entry %d: no address", i)
		}
		out[e.Address.Unmap()] = e
	}
	return out, nil
}

func (h *Holder) recordPath() string { return filepath.Join(h.cfg.Dir, heldFile) }

// readRecord reads what a previous agent recorded. A missing file is an
// empty record (a first start). An unreadable or corrupt one is set aside
// (heldFile.corrupt, for a look) and the record starts empty: the sweep
// then removes nothing a previous agent held, which errs on the side of
// leaving an address rather than removing one another holder needs.
func (h *Holder) readRecord() map[netip.Addr]heldEntry {
	path := h.recordPath()
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return map[netip.Addr]heldEntry{}
	}
	var rec map[netip.Addr]heldEntry
	if err == nil {
		rec, err = decodeRecord(b)
	}
	if err == nil {
		return rec
	}
	aside := path + ".corrupt"
	if rerr := os.Rename(path, aside); rerr != nil {
		aside = ""
	}
	h.cfg.Logger.Warn("vrrp: the record of held addresses is unreadable; starting an empty one: "+
		"addresses a previous agent left on the interface are not swept (remove any by hand)",
		"path", path, "error", err, "set_aside_as", aside)
	return map[netip.Addr]heldEntry{}
}

// writeRecord writes the record when it changed, atomically: a crash
// mid-write leaves the old record or the new, never a part.
func (h *Holder) writeRecord() {
	if !h.orphans.dirty {
		return
	}
	b := h.orphans.encode()
	if bytes.Equal(b, h.orphans.written) {
		h.orphans.dirty = false
		return
	}
	if err := fsutil.WriteAtomic(h.recordPath(), b, 0o600); err != nil {
		h.cfg.Logger.Warn("vrrp: cannot write the record of held addresses; an address left by a dying keepalived may not be swept", "error", err)
		return
	}
	h.orphans.written, h.orphans.dirty = b, false
}

// recordHeld notes the addresses a Sync wants (present: the interface just
// before keepalived was given them) and writes the record.
func (h *Holder) recordHeld(want map[netip.Addr]heldEntry, present map[netip.Addr]bool, now time.Time) {
	foreign := h.orphans.note(want, present, now)
	if present == nil {
		foreign = nil // not known to be there: recorded once a Tick sees them off it
	}
	for _, e := range foreign {
		h.cfg.Logger.Info("vrrp: address already on the interface before this agent held it and not on its record: never swept while it stays",
			"address", e.Address, "uuid", e.UUID, "lb", e.Name, "interface", h.cfg.Interface)
	}
	h.writeRecord()
}

// sweepOrphans removes the addresses due (orphanSweep.due) from the
// interface, logs and counts each removal.
func (h *Holder) sweepOrphans(held map[netip.Addr]bool, now time.Time) error {
	var errs []error
	for _, e := range h.orphans.due(held, now) {
		if err := netnsdo.DeleteAddress(h.cfg.Netns, h.cfg.Interface, e.Address); err != nil {
			errs = append(errs, fmt.Errorf("orphan sweep: %w", err))
			continue // retried at the next tick
		}
		h.cfg.Logger.Info("vrrp: removed an orphaned address from the interface",
			"address", e.Address, "uuid", e.UUID, "lb", e.Name, "interface", h.cfg.Interface,
			"reason", "no load balancer placed on this node has it any more (deleted or moved while the keepalived or agent that held it was dead)",
			"unwanted_for", now.Sub(h.orphans.unwanted[e.Address]).Round(time.Millisecond))
		h.orphans.forget(e.Address)
		h.orphans.removed++
		if h.cfg.Metrics != nil {
			h.cfg.Metrics.OrphansRemoved.Inc()
		}
	}
	h.writeRecord()
	return errors.Join(errs...)
}

// OrphansRemoved counts the addresses the sweep removed since New.
func (h *Holder) OrphansRemoved() int { return h.orphans.removed }
