package vrrp

import (
	"fmt"
	"net"
	"net/netip"

	"pier.dev/pier/internal/netnsdo"
)

// Held returns the addresses configured on iface, read over netlink in
// network namespace netns ("" for the caller's own). It is cheap (one
// netlink dump, no process): the agent calls it every 50 ms to learn
// which addresses this node holds, which is what MASTER means.
func Held(netns, iface string) (map[netip.Addr]bool, error) {
	var out map[netip.Addr]bool
	err := netnsdo.Do(netns, func() error {
		ifi, err := net.InterfaceByName(iface)
		if err != nil {
			return err
		}
		addrs, err := ifi.Addrs()
		if err != nil {
			return err
		}
		out = make(map[netip.Addr]bool, len(addrs))
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok {
				if ip, ok := netip.AddrFromSlice(n.IP); ok {
					out[ip.Unmap()] = true
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("addresses of %s: %w", iface, err)
	}
	return out, nil
}
