//go:build linux

package ecmplab

import "fmt"

// BirdPeer is one node as the router's bird sees it: the protocol's name,
// the router's address on the node's link and the node's.
type BirdPeer struct{ Name, Local, Neighbor string }

// BirdConfig is the router's bird configuration: an iBGP session with
// each node (hold time 3 s, the least BGP allows; passive: the nodes
// dial), and a kernel protocol that merges the equal best routes into one
// multipath route (merge paths on) when install is true; with install
// false bird installs nothing (a test programs the kernel itself). With
// bfd, every session has `bfd on` and a bfd protocol runs at the nodes'
// 100 ms × 3.
func BirdConfig(routerID string, peers []BirdPeer, install, bfd bool) string {
	export := "none"
	if install {
		export = "all"
	}
	conf := "router id " + routerID + ";\nprotocol device {}\n" +
		"protocol kernel {\n  ipv4 { import none; export " + export + "; };\n  merge paths on;\n}\n"
	bfdOn := ""
	if bfd {
		conf += "protocol bfd {\n  interface \"*\" { interval 100 ms; multiplier 3; };\n}\n"
		bfdOn = "  bfd on;\n"
	}
	for _, p := range peers {
		conf += fmt.Sprintf("protocol bgp %s {\n  local %s as 65000;\n  neighbor %s as 65000;\n  direct;\n  passive on;\n"+
			"  hold time 3;\n  error wait time 1, 2;\n%s  ipv4 { import all; export none; gateway direct; };\n}\n",
			p.Name, p.Local, p.Neighbor, bfdOn)
	}
	return conf
}
