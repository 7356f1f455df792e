package addrhold

import (
	"errors"
	"net/netip"
	"time"

	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/netnsdo"
	"pier.dev/pier/internal/vrrp"
)

// A load balancer whose pair lost a node, with no other node to take the
// standby role, is placed on one node alone: there is no peer for VRRP, so
// the holder adds its addresses to the interface itself (and announces
// them with a gratuitous ARP when it adds one). They are already there
// when the node held them as MASTER of the pair's instance: keepalived
// drops them when that instance goes, and the next tick (50 ms) puts them
// back.
//
// When a standby is placed again, the addresses join a VRRP instance that
// starts as BACKUP and is elected MASTER a master-down time later: the
// holder leaves them on the interface meanwhile (releaseWait), so the move
// back to a pair has no gap, and removes them only if another node won.
const releaseWait = 3 * time.Second

// setLone records the lone load balancers of a Sync.
func (h *Holder) setLone(lone map[string][]netip.Addr) {
	want := map[netip.Addr]bool{}
	for _, addrs := range lone {
		for _, a := range addrs {
			want[a] = true
		}
	}
	for a := range h.loneAdded {
		if want[a] {
			continue
		}
		delete(h.loneAdded, a)
		if h.instanceOfAddr(a) != "" {
			h.released[a] = time.Now().Add(releaseWait)
			continue
		}
		if err := netnsdo.DeleteAddress(h.cfg.Netns, h.cfg.Interface, a); err != nil {
			h.cfg.Logger.Warn("release address", "address", a, "error", err)
		}
	}
	h.lone = lone
}

// tickLone holds the lone addresses and settles released ones.
func (h *Holder) tickLone(held map[netip.Addr]bool, now time.Time) error {
	var errs []error
	for _, addrs := range h.lone {
		for _, a := range addrs {
			if held[a] {
				if _, ok := h.loneAdded[a]; !ok {
					h.loneAdded[a] = now
				}
				continue
			}
			if err := netnsdo.AddAddress(h.cfg.Netns, h.cfg.Interface, a); err != nil {
				errs = append(errs, err)
				continue
			}
			h.loneAdded[a] = now
			h.cfg.Logger.Info("holding an address without VRRP: its load balancer has no standby node", "address", a)
			if err := vrrp.Announce(h.cfg.Netns, h.cfg.Interface, a); err != nil {
				errs = append(errs, err)
			}
		}
	}
	for a, until := range h.released {
		name := h.instanceOfAddr(a)
		switch {
		case name != "" && h.roles[name] == model.VRRPMaster:
			delete(h.released, a) // keepalived holds it now
		case now.After(until):
			delete(h.released, a)
			if held[a] {
				if err := netnsdo.DeleteAddress(h.cfg.Netns, h.cfg.Interface, a); err != nil {
					errs = append(errs, err)
				}
			}
		}
	}
	return errors.Join(errs...)
}

// loneRole is a lone load balancer's role: MASTER once its addresses are
// held.
func (h *Holder) loneRole(uuid string, held map[netip.Addr]bool) model.VRRPState {
	for _, a := range h.lone[uuid] {
		if !held[a] {
			return model.VRRPBackup
		}
	}
	return model.VRRPMaster
}

func (h *Holder) instanceOfAddr(a netip.Addr) string {
	for name, in := range h.instances {
		for _, b := range in.Addresses {
			if a == b {
				return name
			}
		}
	}
	return ""
}
