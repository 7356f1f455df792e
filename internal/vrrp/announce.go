package vrrp

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"

	"golang.org/x/sys/unix"

	"pier.dev/pier/internal/netnsdo"
)

// Announce sends one gratuitous ARP for addr out of iface (in network
// namespace netns, "" for the caller's): neighbours that still map addr to
// another node's MAC address learn this node's. keepalived does this for
// the addresses of its instances; pier does it for an address it holds
// without VRRP (a load balancer with no standby). IPv6 addresses are not
// announced (neighbours find them with neighbour discovery).
func Announce(netns, iface string, addr netip.Addr) error {
	if !addr.Is4() {
		return nil
	}
	return netnsdo.Do(netns, func() error {
		ifi, err := net.InterfaceByName(iface)
		if err != nil {
			return fmt.Errorf("announce %s: %w", addr, err)
		}
		if len(ifi.HardwareAddr) != 6 {
			return fmt.Errorf("announce %s: %s has no Ethernet address", addr, iface)
		}
		proto := htons(unix.ETH_P_ARP)
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_DGRAM, int(proto))
		if err != nil {
			return fmt.Errorf("announce %s: %w", addr, err)
		}
		defer unix.Close(fd)
		ip := addr.As4()
		// An ARP request whose sender and target are both addr.
		pkt := make([]byte, 0, 28)
		pkt = binary.BigEndian.AppendUint16(pkt, 1)      // Ethernet
		pkt = binary.BigEndian.AppendUint16(pkt, 0x0800) // IPv4
		pkt = append(pkt, 6, 4)
		pkt = binary.BigEndian.AppendUint16(pkt, 1) // request
		pkt = append(pkt, ifi.HardwareAddr...)
		pkt = append(pkt, ip[:]...)
		pkt = append(pkt, 0, 0, 0, 0, 0, 0)
		pkt = append(pkt, ip[:]...)
		to := &unix.SockaddrLinklayer{Protocol: proto, Ifindex: ifi.Index, Halen: 6,
			Addr: [8]uint8{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}}
		if err := unix.Sendto(fd, pkt, 0, to); err != nil {
			return fmt.Errorf("announce %s: %w", addr, err)
		}
		return nil
	})
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }
