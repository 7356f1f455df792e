package kube

import (
	"net/netip"
	"sort"

	corev1 "k8s.io/api/core/v1"

	"pier.dev/pier/internal/source"
)

// warnOnce logs each bad annotation value once per node, not on every
// snapshot.
func (s *Source) warnOnce() func(node, value string) {
	seen := map[string]string{}
	return func(node, value string) {
		if prev, ok := seen[node]; ok && prev == value {
			return
		}
		seen[node] = value
		s.logger.Warn("node annotation is not an IP address; the node's VRRP address is unknown",
			"node", node, "annotation", AnnotationVRRPAddress, "value", value)
	}
}

// sameAddress: a node whose VRRP address changed must update the
// placements that name it.
func sameAddress(a, b *corev1.Node) bool {
	x, okX := nodeAddress(a)
	y, okY := nodeAddress(b)
	return x == y && okX == okY
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// placementNodes turns the Node objects (already filtered by the
// selector) into what placement reads: a node is ready when its Ready
// condition is true, it is not being deleted and its agent is alive (its
// heartbeat Lease is fresh): a node whose agent is gone runs nothing new,
// and its load balancers must move. A cordoned node (spec.unschedulable)
// stays ready but drains. A bad pier.dev/vrrp-address is handed to bad
// and leaves the address unknown.
func placementNodes(nodes []*corev1.Node, agentAlive map[string]bool, bad func(node, value string)) []source.Node {
	out := make([]source.Node, 0, len(nodes))
	for _, n := range nodes {
		addr, ok := nodeAddress(n)
		if !ok {
			bad(n.Name, n.Annotations[AnnotationVRRPAddress])
		}
		out = append(out, source.Node{
			Name:     n.Name,
			Ready:    nodeReady(n) && n.DeletionTimestamp == nil && agentAlive[n.Name],
			Address:  addr,
			Draining: n.Spec.Unschedulable,
		})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// AnnotationVRRPAddress on a Node overrides the address its VRRP peers
// use (a node whose InternalIP is not on the segment the addresses move
// on).
const AnnotationVRRPAddress = "pier.dev/vrrp-address"

// nodeAddress is the annotation's address, else the first IPv4
// InternalIP (VRRPv3 over IPv4 is what keepalived peers usually speak),
// else the first InternalIP. ok is false for an annotation that is not an
// IP address: no address is guessed then, since the operator meant
// another one than InternalIP.
func nodeAddress(n *corev1.Node) (addr netip.Addr, ok bool) {
	if v, set := n.Annotations[AnnotationVRRPAddress]; set {
		a, err := netip.ParseAddr(v)
		if err != nil || a.Zone() != "" || a.IsUnspecified() {
			return netip.Addr{}, false
		}
		return a.Unmap(), true
	}
	var first netip.Addr
	for _, na := range n.Status.Addresses {
		a, err := netip.ParseAddr(na.Address)
		if na.Type != corev1.NodeInternalIP || err != nil {
			continue
		}
		if a = a.Unmap(); a.Is4() {
			return a, true
		}
		if !first.IsValid() {
			first = a
		}
	}
	return first, true
}
