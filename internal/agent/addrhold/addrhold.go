// Package addrhold is the agent's VRRP mover (mover.Mover): it decides
// which node holds the VIP and floating IP of each load balancer placed
// here, with VRRP (package vrrp runs keepalived). The Holder is the
// mechanism (this file, lone.go, linger.go, handoff.go); the Mover its
// policy (mover.go, arbitrate.go): the API server's arbitration of a split
// brain, the fences and their healing, planned handovers.
//
// Load balancers placed on the same ordered pair of nodes (active,
// standby) share one VRRP instance: its router id is the placement's
// RouterID, its name "vr<id>". The active node of the pair has priority
// 250, the standby 240, both start as BACKUP with nopreempt, so the first
// election goes to the active node and a node that comes back never takes
// the addresses back (no second move).
//
// Each instance has a gate, written to its keepalived track file: open
// while this node may hold the instance's addresses. It closes (FAULT:
// keepalived sends priority 0 and the peer takes over within one advert)
// when
//   - a load balancer of the instance that has served here stops being
//     healthy (its HAProxy died),
//   - the node drains (a planned handover), or
//   - the API server fenced this node in a split brain (Fence).
//
// The holder reads the interface's addresses to learn its role: MASTER
// holds them, BACKUP is ready to, FAULT may not.
package addrhold

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"pier.dev/pier/internal/metrics"
	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/netnsdo"
	"pier.dev/pier/internal/vrrp"
)

// standbyHold is how long the standby node keeps a new instance's gate
// closed: the active node's HAProxy comes up within it in practice, and
// the election goes to the priority it was given.
const standbyHold = time.Second

// Config configures a Holder.
type Config struct {
	Node      string
	Interface string
	// Dir is keepalived's folder (package vrrp's layout).
	Dir string
	// Netns is the network namespace of the data plane (pier run
	// --nodes, tests); "" for the agent's own.
	Netns            string
	Advert           time.Duration
	KeepalivedBinary string
	// Metrics, when set, counts the orphan sweep's removals.
	Metrics *metrics.Metrics
	Logger  *slog.Logger
}

// Instance is one VRRP instance as the holder sees it.
type Instance struct {
	Name string
	// Peer is the other node of the pair.
	Peer string
	// Active is whether this node is the pair's active node (priority
	// 200): the standby is the one that steps down in a split brain.
	Active bool
	// UUIDs are the load balancers it carries, sorted.
	UUIDs     []string
	Addresses []netip.Addr
	// PeerAddress is the peer's address on the segment, and RouterID the
	// instance's virtual router id: the peer's adverts come from the one
	// and carry the other.
	PeerAddress netip.Addr
	RouterID    int
}

// Holder holds the addresses of the load balancers placed on one node.
// Its methods are called from the agent's goroutine.
type Holder struct {
	cfg Config
	ka  *vrrp.Keepalived

	synced    bool
	instances map[string]*Instance // by name
	instOf    map[string]string    // load balancer UUID → instance name
	skipped   map[string]string    // UUID → why its addresses are not held (logged once)
	gates     map[string]bool      // last gate written per instance (absent: not yet written)
	roles     map[string]model.VRRPState
	since     map[string]time.Time // when each instance took its role
	fenced    map[string]bool
	draining  bool
	// openAfter holds the gate of a new instance on the standby node
	// closed until then (Sync).
	openAfter map[string]time.Time
	// lone and its state: see lone.go.
	lone      map[string][]netip.Addr
	loneAdded map[netip.Addr]time.Time // added by the holder, when
	released  map[netip.Addr]time.Time // left for keepalived, until
	// lingerUntil is when a planned handover's linger ends (linger.go).
	lingerUntil time.Time
	// handoff is, per instance, its handoff table (handoff.go).
	handoff map[string]handoffState
	warned  map[string]bool
	// orphans is the record of held addresses and its sweep (orphans.go).
	orphans *orphanSweep
}

// New returns a Holder; Sync starts keepalived.
func New(cfg Config) (*Holder, error) {
	if cfg.Advert == 0 {
		cfg.Advert = vrrp.DefaultAdvert
	}
	ka, err := vrrp.NewKeepalived(cfg.KeepalivedBinary, cfg.Netns, cfg.Logger)
	if err != nil {
		return nil, err
	}
	h := &Holder{cfg: cfg, ka: ka, instances: map[string]*Instance{}, instOf: map[string]string{},
		skipped: map[string]string{}, gates: map[string]bool{}, roles: map[string]model.VRRPState{},
		since: map[string]time.Time{}, fenced: map[string]bool{}, warned: map[string]bool{},
		openAfter: map[string]time.Time{}, lone: map[string][]netip.Addr{}, loneAdded: map[netip.Addr]time.Time{}, released: map[netip.Addr]time.Time{}}
	// A previous agent may have died in the middle of a handover, or
	// holding addresses whose load balancers are gone.
	h.endLinger()
	h.endHandoffs()
	h.orphans = newOrphanSweep(h.readRecord())
	return h, nil
}

// InstanceName names the VRRP instance of a router id.
func InstanceName(routerID int) string { return "vr" + strconv.Itoa(routerID) }

// Plan groups the load balancers placed on node into VRRP instances.
// lone holds, per UUID, the addresses of a load balancer placed here with
// no standby (its pair lost a node and no other can take the role): this
// node holds them without VRRP. skipped tells, per UUID, why a placed load
// balancer's addresses are not held (no node address, a loopback VIP).
func Plan(node, iface string, lbs []*model.LoadBalancer) (instances []vrrp.Instance, view map[string]*Instance, lone map[string][]netip.Addr, skipped map[string]string) {
	view, lone, skipped = map[string]*Instance{}, map[string][]netip.Addr{}, map[string]string{}
	byName := map[string]*vrrp.Instance{}
	for _, lb := range lbs {
		p := lb.Placement
		if p.Active != node && p.Standby != node {
			continue
		}
		self, peer, peerName := p.ActiveAddress, p.StandbyAddress, p.Standby
		if p.Standby == node {
			self, peer, peerName = p.StandbyAddress, p.ActiveAddress, p.Active
		}
		src, srcErr := netip.ParseAddr(self)
		dst, dstErr := netip.ParseAddr(peer)
		addrs := lbAddrs(lb)
		switch {
		case len(addrs) == 0:
			skipped[lb.UUID] = "its addresses are loopback: every node has them"
			continue
		case p.Standby == "" || p.RouterID == 0:
			if p.Active == node {
				lone[lb.UUID] = addrs
			}
			continue
		case srcErr != nil || dstErr != nil:
			skipped[lb.UUID] = "a node of the pair has no known address (pier.dev/vrrp-address or an InternalIP)"
			continue
		}
		name := InstanceName(p.RouterID)
		in := byName[name]
		if in == nil {
			prio := vrrp.PriorityStandby
			if p.Active == node {
				prio = vrrp.PriorityActive
			}
			in = &vrrp.Instance{Name: name, RouterID: p.RouterID, Interface: iface, Priority: prio,
				Source: src.Unmap(), Peers: []netip.Addr{dst.Unmap()}}
			byName[name] = in
			view[name] = &Instance{Name: name, Peer: peerName, Active: p.Active == node, PeerAddress: dst.Unmap(), RouterID: p.RouterID}
		}
		in.Addresses = append(in.Addresses, addrs...)
		view[name].UUIDs = append(view[name].UUIDs, lb.UUID)
		view[name].Addresses = append(view[name].Addresses, addrs...)
	}
	for _, in := range byName {
		in.Addresses = sortedAddrs(in.Addresses)
		instances = append(instances, *in)
	}
	slices.SortFunc(instances, func(a, b vrrp.Instance) int { return a.RouterID - b.RouterID })
	for _, v := range view {
		slices.Sort(v.UUIDs)
		v.Addresses = sortedAddrs(v.Addresses)
	}
	return instances, view, lone, skipped
}

// lbAddrs is what a node holds for lb: its VIP and FIP, unless loopback.
func lbAddrs(lb *model.LoadBalancer) []netip.Addr {
	var addrs []netip.Addr
	for _, s := range []string{lb.VIP, lb.FIP} {
		if a, err := netip.ParseAddr(s); err == nil && !a.IsLoopback() {
			addrs = append(addrs, a.Unmap())
		}
	}
	return addrs
}

// Sync makes keepalived carry the instances of the load balancers placed
// on this node (lbs may hold others: they are ignored). keepalived is
// reloaded only when its configuration changes.
func (h *Holder) Sync(ctx context.Context, lbs []*model.LoadBalancer) error {
	instances, view, lone, skipped := Plan(h.cfg.Node, h.cfg.Interface, lbs)
	for uuid, why := range skipped {
		if h.skipped[uuid] != why {
			h.cfg.Logger.Info("load balancer addresses not held with VRRP", "uuid", uuid, "reason", why)
		}
	}
	h.skipped = skipped
	cfg := vrrp.Config{Node: h.cfg.Node, Dir: h.cfg.Dir, Advert: h.cfg.Advert, Instances: instances}
	// keepalived creates a new instance's track file closed: it holds
	// nothing before the next Tick judged its HAProxy healthy. On the
	// standby node a new instance's gate stays closed a little longer, so
	// that the first election goes to the active node even when the
	// standby's HAProxy came up first (with nopreempt, whoever holds
	// first keeps the addresses). An instance whose track file exists ran
	// before this agent started: it may hold the addresses now, and must
	// not drop them.
	for name, in := range view {
		if h.instances[name] != nil || in.Active {
			continue
		}
		if _, err := os.Stat(cfg.TrackFile(name)); errors.Is(err, os.ErrNotExist) {
			h.openAfter[name] = time.Now().Add(standbyHold)
		}
	}
	// What the interface has before keepalived hears of a new address: the
	// orphan sweep's record takes only what pier put there (orphans.go).
	present, err := netnsdo.Addresses(h.cfg.Netns, h.cfg.Interface)
	if err != nil {
		present = nil
	}
	if err := h.ka.Apply(ctx, cfg); err != nil {
		return fmt.Errorf("keepalived: %w", err)
	}
	h.synced = true
	h.instances = view
	h.setLone(lone)
	h.recordHeld(wantedBy(lbs, view, lone), present, time.Now())
	h.instOf = map[string]string{}
	for name, in := range view {
		for _, uuid := range in.UUIDs {
			h.instOf[uuid] = name
		}
	}
	for name := range h.gates {
		if view[name] == nil {
			// A later instance of this name must start closed again.
			if err := os.Remove(cfg.TrackFile(name)); err != nil && !errors.Is(err, os.ErrNotExist) {
				h.cfg.Logger.Warn("remove track file", "instance", name, "error", err)
			}
			delete(h.openAfter, name)
			delete(h.gates, name)
			delete(h.roles, name)
			delete(h.since, name)
			delete(h.fenced, name)
		}
	}
	return nil
}

// SetDraining closes (on) or reopens every gate: a planned handover of
// everything this node holds. Tick writes the gates.
func (h *Holder) SetDraining(on bool) { h.draining = on }

// PrepareDrain starts the linger (linger.go) for what this node holds, so
// that it is in place when a drain closes the gates a moment later.
func (h *Holder) PrepareDrain() {
	if !h.lingerUntil.IsZero() {
		return
	}
	held, err := netnsdo.Addresses(h.cfg.Netns, h.cfg.Interface)
	if err != nil {
		return
	}
	var holding []netip.Addr
	for _, in := range h.instances {
		if holdsAny(held, in.Addresses) {
			holding = append(holding, in.Addresses...)
		}
	}
	if len(holding) > 0 {
		h.linger(holding)
	}
}

// Draining reports whether the node drains.
func (h *Holder) Draining() bool { return h.draining }

// Fence closes (on) or reopens the gate of one instance: the API
// server's arbitration of a split brain (the agent decides, and gives
// why as log attributes).
func (h *Holder) Fence(instance string, on bool, why ...any) {
	if h.fenced[instance] != on {
		h.cfg.Logger.Warn("vrrp instance fenced by the API server's arbitration",
			append([]any{"instance", instance, "fenced", on}, why...)...)
	}
	h.fenced[instance] = on
}

// Fenced reports whether an instance is fenced.
func (h *Holder) Fenced(instance string) bool { return h.fenced[instance] }

// Tick writes each instance's gate from the health of its load
// balancers, reads the addresses this node holds, holds the lone ones, and
// returns the role of every load balancer whose addresses it handles, by
// UUID. healthy tells whether a load balancer's data plane
// serves here; servedHere whether it ever did since the agent started (a
// load balancer that never came up here does not close the gate of the
// others sharing its instance).
func (h *Holder) Tick(healthy, servedHere func(uuid string) bool) (map[string]model.VRRPState, error) {
	if !h.synced {
		return nil, nil
	}
	held, err := netnsdo.Addresses(h.cfg.Netns, h.cfg.Interface)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	if !h.lingerUntil.IsZero() && now.After(h.lingerUntil) {
		h.endLinger()
	}
	gates, closing := h.gatesNow(now, held, healthy, servedHere)
	// The addresses are leaving this node: keep accepting them until the peer
	// has announced them (linger.go). With HAProxy dead, a client's SYN is
	// then refused at once and retried, instead of being lost for a second
	// (with HAProxy killed: 0.1 s to the first success through the peer
	// instead of 0.35 s). It costs the move a few milliseconds. A drain
	// started its linger already (PrepareDrain).
	if len(closing) > 0 && h.lingerUntil.IsZero() {
		h.linger(closing)
	}
	var errs []error
	for name, in := range h.instances {
		open := gates[name]
		if was, known := h.gates[name]; !known || was != open {
			if err := h.ka.SetHealthy(name, open); err != nil {
				errs = append(errs, err)
				continue
			}
			h.cfg.Logger.Info("vrrp gate", "instance", name, "open", open, "draining", h.draining, "fenced", h.fenced[name])
			h.gates[name] = open
		}
		role := model.VRRPBackup
		switch {
		case holdsAny(held, in.Addresses):
			role = model.VRRPMaster
		case !open:
			role = model.VRRPFault
		}
		if h.roles[name] != role {
			h.roles[name], h.since[name] = role, now
		}
	}
	// keepalived's own word on each instance must follow the gates
	// within a moment, or it is reloaded (vrrp/states.go).
	if err := h.ka.Reconcile(now); err != nil {
		errs = append(errs, err)
	}
	h.tickHandoff(now)
	if err := h.tickLone(held, now); err != nil {
		errs = append(errs, err)
	}
	if err := h.sweepOrphans(held, now); err != nil {
		errs = append(errs, err)
	}
	out := map[string]model.VRRPState{}
	for name, in := range h.instances {
		for _, uuid := range in.UUIDs {
			out[uuid] = h.roles[name]
		}
	}
	for uuid := range h.lone {
		out[uuid] = h.loneRole(uuid, held)
	}
	return out, errors.Join(errs...)
}

// gatesNow decides each instance's gate: open unless the node drains,
// the instance is fenced, a new standby instance waits (openAfter), or a
// load balancer of it that served here is unhealthy. closing holds the
// addresses this node holds behind a gate that closes now.
func (h *Holder) gatesNow(now time.Time, held map[netip.Addr]bool, healthy, servedHere func(uuid string) bool) (gates map[string]bool, closing []netip.Addr) {
	gates = make(map[string]bool, len(h.instances))
	for name, in := range h.instances {
		open := !h.draining && !h.fenced[name]
		if t, ok := h.openAfter[name]; ok {
			if now.Before(t) {
				open = false
			} else {
				delete(h.openAfter, name)
			}
		}
		for _, uuid := range in.UUIDs {
			if servedHere(uuid) && !healthy(uuid) {
				open = false
			}
		}
		gates[name] = open
		if h.gates[name] && !open && holdsAny(held, in.Addresses) {
			closing = append(closing, in.Addresses...)
		}
	}
	return gates, closing
}

func holdsAny(held map[netip.Addr]bool, addrs []netip.Addr) bool {
	for _, a := range addrs {
		if held[a] {
			return true
		}
	}
	return false
}

// Instances returns the instances by name (read-only).
func (h *Holder) Instances() map[string]*Instance { return h.instances }

// InstanceOf returns the instance carrying a load balancer, "" if none.
func (h *Holder) InstanceOf(uuid string) string { return h.instOf[uuid] }

// InstanceRole is an instance's role at the last Tick.
func (h *Holder) InstanceRole(name string) model.VRRPState { return h.roles[name] }

// Since returns when an instance took its current role.
func (h *Holder) Since(instance string) time.Time { return h.since[instance] }

// Stop stops keepalived, which releases the addresses (pier run).
func (h *Holder) Stop(ctx context.Context) error {
	h.endHandoffs()
	err := h.ka.Stop(ctx)
	// A drain's linger may still run (it ends a tick after lingerFor);
	// nothing is left to accept its addresses for once keepalived is gone.
	h.endLinger()
	return err
}

// DefaultDir is keepalived's folder below an agent's state folder.
func DefaultDir(stateDir string) string { return filepath.Join(stateDir, "vrrp") }

func sortedAddrs(in []netip.Addr) []netip.Addr {
	slices.SortFunc(in, func(a, b netip.Addr) int { return a.Compare(b) })
	return slices.Compact(in)
}
