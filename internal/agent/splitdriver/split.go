// Package splitdriver runs a load balancer whose listeners need two data
// planes. A Gateway is one load balancer of the haproxy provider: one VIP,
// one FIP, one pair of nodes, one status. HAProxy has no UDP, so the UDP
// listeners of a Gateway (its UDPRoutes) are served by the native
// provider's nftables table, and the others by HAProxy, on the same
// addresses: the address movers (VRRP, BGP) hold a load balancer's
// addresses whatever serves them, and the native table DNATs only the
// (address, UDP, port) keys of its services, so HAProxy keeps every TCP
// port of the address.
//
// The HAProxy side of this package is the agent's driver of the haproxy
// provider: it hands the UDP part of each load balancer (Parts) to the
// native driver under a UUID of its own (PartUUID) and the rest to
// HAProxy, and reports both as one apply, one health and one hash. The
// native side is the agent's driver of the native provider, the native
// driver itself but for Recover: the native driver keeps one table for
// the Services and the parts, so it recovers once, with the UUIDs of both
// kinds placed here, after the agent has told both sides what it placed.
package splitdriver

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"sync"

	"pier.dev/pier/internal/agent/driver"
	"pier.dev/pier/internal/agent/haproxydriver"
	"pier.dev/pier/internal/model"
)

// PartUUID is the UUID the native driver knows the UDP part of load
// balancer uuid by. Its "udp-" prefix holds letters no Kubernetes UID or
// pier UUID has (they are hex), so it never names another load balancer.
func PartUUID(uuid string) string { return "udp-" + model.ID("udp-part", uuid) }

// Parts splits lb: its UDP listeners and their pools as a native load
// balancer on the same addresses and placement, and the rest for
// HAProxy. native is nil when lb has no UDP listener; haproxy is then lb
// itself.
func Parts(lb *model.LoadBalancer) (haproxy, native *model.LoadBalancer) {
	udpPools := map[string]bool{}
	hasUDP := false
	for _, l := range lb.Listeners {
		if l.Protocol == model.ProtocolUDP {
			hasUDP = true
			if l.DefaultPoolID != "" {
				udpPools[l.DefaultPoolID] = true
			}
		}
	}
	if !hasUDP {
		return lb, nil
	}
	h, n := *lb, *lb
	h.Listeners, h.Pools, n.Listeners, n.Pools = nil, nil, nil, nil
	for _, l := range lb.Listeners {
		if l.Protocol == model.ProtocolUDP {
			n.Listeners = append(n.Listeners, l)
		} else {
			h.Listeners = append(h.Listeners, l)
		}
	}
	for _, p := range lb.Pools {
		if udpPools[p.ID] {
			n.Pools = append(n.Pools, p)
		} else {
			h.Pools = append(h.Pools, p)
		}
	}
	n.UUID, n.Name, n.Provider, n.AccessLog = PartUUID(lb.UUID), lb.Name+" (UDP)", model.ProviderNative, ""
	return &h, &n
}

// Split holds the two sides.
type Split struct {
	haproxy *haproxydriver.Driver
	native  driver.Driver

	mu sync.Mutex
	// served records, per load balancer applied through the HAProxy
	// side, which data planes run a part of it.
	served map[string]sides
	// placedHAProxy and placedNative are what the agent's Recover calls
	// gave each side (nil until then); the native driver recovers once
	// both are in.
	placedHAProxy, placedNative map[string]bool
}

type sides struct{ haproxy, native bool }

// New returns the drivers of the haproxy and the native providers, for
// agent.Config.Drivers in place of hd and nd.
func New(hd *haproxydriver.Driver, nd driver.Driver) (haproxy driver.Driver, native driver.Driver) {
	s := &Split{haproxy: hd, native: nd, served: map[string]sides{}}
	return &HAProxySide{Driver: hd, s: s}, &NativeSide{Driver: nd, s: s}
}

// recoverNative runs the native driver's Recover once both sides have
// been told what is placed here: the native load balancers and the UDP
// parts of the haproxy ones.
func (s *Split) recoverNative(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.placedHAProxy == nil || s.placedNative == nil {
		return nil
	}
	placed := make(map[string]bool, len(s.placedNative)+len(s.placedHAProxy))
	for uuid, ok := range s.placedNative {
		placed[uuid] = ok
	}
	for uuid, ok := range s.placedHAProxy {
		placed[PartUUID(uuid)] = ok
	}
	if err := s.native.Recover(ctx, placed); err != nil {
		return fmt.Errorf("native driver: %w", err)
	}
	return nil
}

// HAProxySide is the driver of the haproxy provider: HAProxy, with the
// UDP listeners of each load balancer given to the native driver.
type HAProxySide struct {
	*haproxydriver.Driver
	s *Split
}

var (
	_ driver.Driver         = (*HAProxySide)(nil)
	_ driver.HealthChecker  = (*HAProxySide)(nil)
	_ driver.Reporter       = (*HAProxySide)(nil)
	_ driver.Batcher        = (*HAProxySide)(nil)
	_ driver.Drainer        = (*HAProxySide)(nil)
	_ driver.HealthNotifier = (*HAProxySide)(nil)
)

// Recover implements driver.Driver.
func (h *HAProxySide) Recover(ctx context.Context, placed map[string]bool) error {
	if err := h.Driver.Recover(ctx, placed); err != nil {
		return err
	}
	h.s.mu.Lock()
	h.s.placedHAProxy = clonePlaced(placed)
	h.s.mu.Unlock()
	return h.s.recoverNative(ctx)
}

// Apply implements driver.Driver: HAProxy first, then the UDP part. A
// load balancer without UDP listeners is HAProxy's alone, its hash
// HAProxy's; one of UDP listeners only runs no HAProxy. When the UDP part
// fails (no nftables here), the apply fails with the native driver's
// reason, while HAProxy serves the rest.
func (h *HAProxySide) Apply(ctx context.Context, lb *model.LoadBalancer) (driver.Applied, error) {
	hp, np := Parts(lb)
	was := h.s.sides(lb.UUID)
	now := sides{haproxy: np == nil || len(hp.Listeners) > 0, native: np != nil}
	var applied driver.Applied
	if now.haproxy {
		a, err := h.Driver.Apply(ctx, hp)
		if err != nil {
			return a, err
		}
		applied = a
	} else if was.haproxy {
		h.Driver.Remove(lb.UUID)
	}
	h.s.setSides(lb.UUID, sides{haproxy: now.haproxy, native: was.native})
	if !now.native {
		if was.native {
			h.s.native.Remove(PartUUID(lb.UUID))
			h.s.setSides(lb.UUID, now)
		}
		return applied, nil
	}
	a, err := h.s.native.Apply(ctx, np)
	if err != nil {
		return driver.Applied{}, fmt.Errorf("the UDP listeners of %s need the native provider: %w", lb.Name, err)
	}
	h.s.setSides(lb.UUID, now)
	sum := sha256.Sum256([]byte(applied.ConfigHash + "\x00" + a.ConfigHash))
	return driver.Applied{ConfigHash: hex.EncodeToString(sum[:8])}, nil
}

// Remove implements driver.Driver.
func (h *HAProxySide) Remove(uuid string) {
	h.Driver.Remove(uuid)
	h.s.native.Remove(PartUUID(uuid)) // a part it does not know costs nothing
	h.s.mu.Lock()
	delete(h.s.served, uuid)
	h.s.mu.Unlock()
}

// Close implements driver.Driver: HAProxy's, and with stop the load
// balancers of UDP listeners only, which the native side's Close stops.
func (h *HAProxySide) Close(stop bool) []string {
	stopped := h.Driver.Close(stop)
	if !stop {
		return stopped
	}
	h.s.mu.Lock()
	defer h.s.mu.Unlock()
	for uuid, on := range h.s.served {
		if on.native && !on.haproxy {
			stopped = append(stopped, uuid)
		}
	}
	slices.Sort(stopped)
	return stopped
}

// Healthy implements driver.HealthChecker: every part serves.
func (h *HAProxySide) Healthy(uuid string) bool {
	on := h.s.sides(uuid)
	if !on.native {
		return h.Driver.Healthy(uuid)
	}
	if on.haproxy && !h.Driver.Healthy(uuid) {
		return false
	}
	if hc, ok := h.s.native.(driver.HealthChecker); ok {
		return hc.Healthy(PartUUID(uuid))
	}
	return true
}

// Stats implements driver.Reporter: HAProxy's, with the members of the
// UDP part counted in.
func (h *HAProxySide) Stats(uuid string) driver.Stats {
	st := h.Driver.Stats(uuid)
	if !h.s.sides(uuid).native {
		return st
	}
	if rep, ok := h.s.native.(driver.Reporter); ok {
		n := rep.Stats(PartUUID(uuid))
		st.Members += n.Members
		st.MembersUp += n.MembersUp
		st.RuntimeUpdates += n.RuntimeUpdates
	}
	return st
}

func (s *Split) sides(uuid string) sides {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.served[uuid]
}

func (s *Split) setSides(uuid string, on sides) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.served[uuid] = on
}

// NativeSide is the driver of the native provider: the native driver,
// whose Recover waits for the HAProxy side's.
type NativeSide struct {
	driver.Driver
	s *Split
}

var (
	_ driver.HealthChecker = (*NativeSide)(nil)
	_ driver.Reporter      = (*NativeSide)(nil)
)

// Recover implements driver.Driver.
func (n *NativeSide) Recover(ctx context.Context, placed map[string]bool) error {
	n.s.mu.Lock()
	n.s.placedNative = clonePlaced(placed)
	n.s.mu.Unlock()
	return n.s.recoverNative(ctx)
}

// Healthy implements driver.HealthChecker when the native driver does.
func (n *NativeSide) Healthy(uuid string) bool {
	if hc, ok := n.Driver.(driver.HealthChecker); ok {
		return hc.Healthy(uuid)
	}
	return true
}

// Stats implements driver.Reporter when the native driver does.
func (n *NativeSide) Stats(uuid string) driver.Stats {
	if rep, ok := n.Driver.(driver.Reporter); ok {
		return rep.Stats(uuid)
	}
	return driver.Stats{}
}

// RefreshMembers implements driver.Reporter when the native driver does.
func (n *NativeSide) RefreshMembers(ctx context.Context, uuids []string) error {
	if rep, ok := n.Driver.(driver.Reporter); ok {
		return rep.RefreshMembers(ctx, uuids)
	}
	return nil
}

func clonePlaced(m map[string]bool) map[string]bool {
	out := make(map[string]bool, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
