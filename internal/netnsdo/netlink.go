package netnsdo

import (
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// The functions below read and change a namespace's addresses, local
// routes and neighbours over netlink, on a thread inside it (Do): no ip(8)
// process, no text to parse, and an address goes in as the typed value it
// is. Each opens its netlink socket inside the namespace and closes it
// before the thread leaves. ns "" is the caller's own namespace.

// Addresses returns the addresses configured on iface. It is cheap (one
// netlink dump, no process): the agent calls it every 50 ms to learn
// which addresses this node holds, which is what VRRP's MASTER means.
func Addresses(ns, iface string) (map[netip.Addr]bool, error) {
	var out map[netip.Addr]bool
	err := Do(ns, func() error {
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

// AddAddress adds addr to iface as a host address (/32, /128), as `ip
// addr add ADDR/32 dev IFACE` does. One already there is an error.
func AddAddress(ns, iface string, addr netip.Addr) error {
	err := withLink(ns, iface, func(link netlink.Link) error {
		return netlink.AddrAdd(link, &netlink.Addr{IPNet: hostNet(addr)})
	})
	if err != nil {
		return fmt.Errorf("add address %s to %s: %w", addr, iface, err)
	}
	return nil
}

// DeleteAddress removes host address addr from iface. One that is not
// there is no error: it is gone either way.
func DeleteAddress(ns, iface string, addr netip.Addr) error {
	err := withLink(ns, iface, func(link netlink.Link) error {
		return netlink.AddrDel(link, &netlink.Addr{IPNet: hostNet(addr)})
	})
	if err != nil && !errors.Is(err, unix.EADDRNOTAVAIL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("remove address %s from %s: %w", addr, iface, err)
	}
	return nil
}

// A local route (`ip route replace local ADDR/32 dev lo table local proto
// N`) makes a namespace accept packets for an address it does not have on
// an interface, and answer nothing for it: neither ARP nor neighbour
// discovery. The protocol number tags the routes of one owner, so that a
// later agent finds and removes what one before it left.

// localRoute is the route that accepts addr, tagged proto.
func localRoute(lo int, addr netip.Addr, proto int) *netlink.Route {
	return &netlink.Route{LinkIndex: lo, Dst: hostNet(addr), Table: unix.RT_TABLE_LOCAL, Type: unix.RTN_LOCAL,
		Scope: netlink.SCOPE_HOST, Protocol: netlink.RouteProtocol(proto)}
}

// AddLocalRoute makes the namespace accept addr (replacing a route to it
// that is there already).
func AddLocalRoute(ns string, addr netip.Addr, proto int) error {
	err := withLink(ns, "lo", func(lo netlink.Link) error {
		return netlink.RouteReplace(localRoute(lo.Attrs().Index, addr, proto))
	})
	if err != nil {
		return fmt.Errorf("add local route %s proto %d: %w", addr, proto, err)
	}
	return nil
}

// DeleteLocalRoute removes the local route of addr tagged proto.
func DeleteLocalRoute(ns string, addr netip.Addr, proto int) error {
	err := withLink(ns, "lo", func(lo netlink.Link) error {
		return netlink.RouteDel(localRoute(lo.Attrs().Index, addr, proto))
	})
	if err != nil {
		return fmt.Errorf("remove local route %s proto %d: %w", addr, proto, err)
	}
	return nil
}

// LocalRoutes lists the addresses with a local route tagged proto, IPv4
// and IPv6.
func LocalRoutes(ns string, proto int) ([]netip.Addr, error) {
	var out []netip.Addr
	err := Do(ns, func() error {
		routes, err := netlink.RouteListFiltered(netlink.FAMILY_ALL,
			&netlink.Route{Table: unix.RT_TABLE_LOCAL, Protocol: netlink.RouteProtocol(proto)},
			netlink.RT_FILTER_TABLE|netlink.RT_FILTER_PROTOCOL)
		if err != nil {
			return err
		}
		for _, r := range routes {
			if r.Dst == nil {
				continue
			}
			if a, ok := netip.AddrFromSlice(r.Dst.IP); ok {
				out = append(out, a.Unmap())
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("local routes proto %d: %w", proto, err)
	}
	return out, nil
}

// FlushLocalRoutes removes every local route tagged proto, IPv4 and IPv6.
func FlushLocalRoutes(ns string, proto int) error {
	addrs, err := LocalRoutes(ns, proto)
	if err != nil {
		return err
	}
	var errs []error
	for _, a := range addrs {
		errs = append(errs, DeleteLocalRoute(ns, a, proto))
	}
	return errors.Join(errs...)
}

// Neighbour returns the MAC address iface's neighbour table holds for
// addr, as `ip neigh show to ADDR dev IFACE` prints it; an error when it
// holds none (yet).
func Neighbour(ns, iface string, addr netip.Addr) (net.HardwareAddr, error) {
	var mac net.HardwareAddr
	err := withLink(ns, iface, func(link netlink.Link) error {
		family := netlink.FAMILY_V4
		if addr.Is6() && !addr.Is4In6() {
			family = netlink.FAMILY_V6
		}
		neighs, err := netlink.NeighList(link.Attrs().Index, family)
		if err != nil {
			return err
		}
		for _, n := range neighs {
			if a, ok := netip.AddrFromSlice(n.IP); ok && a.Unmap() == addr && len(n.HardwareAddr) == 6 {
				mac = n.HardwareAddr
				return nil
			}
		}
		return errors.New("no MAC address known yet")
	})
	if err != nil {
		return nil, fmt.Errorf("neighbour %s on %s: %w", addr, iface, err)
	}
	return mac, nil
}

// withLink runs f inside ns with the link named iface.
func withLink(ns, iface string, f func(netlink.Link) error) error {
	return Do(ns, func() error {
		link, err := netlink.LinkByName(iface)
		if err != nil {
			return err
		}
		return f(link)
	})
}

// hostNet is addr as a host prefix, /32 or /128.
func hostNet(addr netip.Addr) *net.IPNet {
	addr = addr.Unmap()
	return &net.IPNet{IP: addr.AsSlice(), Mask: net.CIDRMask(addr.BitLen(), addr.BitLen())}
}
