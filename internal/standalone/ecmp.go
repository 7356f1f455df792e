package standalone

import (
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"pier.dev/pier/internal/agent/bgp"
	pierbfd "pier.dev/pier/internal/bfd"
	"pier.dev/pier/internal/lab"
	"pier.dev/pier/internal/netnsdo"
)

// ECMP in the lab (`pier run --nodes N --ecmp`): a router host r on the
// bridge runs bird2, peering over iBGP with every node's speaker, and
// installs the routes the nodes advertise with all of them as next hops
// (merge paths), flows hashed by their addresses and ports. The client
// host reaches the pools through r; the nodes answer it directly.
const (
	labASN        = 65000
	labRouterNum  = 2 // r's host number: 10.99.0.2
	labBGPPort    = 179
	labHoldTime   = 3 * time.Second // BGP's least: without BFD a cut node is out after 3 s
	labRouterName = "r"
)

// labRouter is the router of an ECMP lab.
type labRouter struct {
	host *lab.Host
	bird *exec.Cmd
}

// birdConfig is bird's configuration for the lab router: only typed
// values (addresses, numbers) go into it. With bfd enabled, bird runs BFD
// with every node at the nodes' interval and multiplier, and ends a
// node's BGP session (its routes with it) when BFD goes down.
func birdConfig(routerID netip.Addr, asn uint32, nodes []netip.Addr, port uint16, hold time.Duration, bfd bgp.BFD) string {
	var b strings.Builder
	fmt.Fprintf(&b, "log stderr { warning, error, fatal };\nrouter id %s;\nprotocol device {}\n", routerID)
	b.WriteString("protocol kernel { merge paths on; ipv4 { import none; export all; }; }\n")
	bfdOn := ""
	if bfd.Enabled {
		interval, mult := bfd.Interval, bfd.Multiplier
		if interval == 0 {
			interval = pierbfd.DefaultInterval
		}
		if mult == 0 {
			mult = pierbfd.DefaultMultiplier
		}
		fmt.Fprintf(&b, "protocol bfd {\n  interface \"*\" { interval %d ms; multiplier %d; };\n}\n", interval.Milliseconds(), mult)
		bfdOn = "  bfd on;\n"
	}
	for i, n := range nodes {
		fmt.Fprintf(&b, "protocol bgp node%d {\n  local %s as %d;\n  neighbor %s port %d as %d;\n  direct;\n"+
			"  hold time %d;\n  connect retry time 1;\n  error wait time 1, 2;\n%s  ipv4 { import all; export none; gateway direct; };\n}\n",
			i, routerID, asn, n, port, asn, int(hold.Seconds()), bfdOn)
	}
	return b.String()
}

// startLabRouter adds the router host, starts bird in it and routes the
// client's traffic for the pools through it.
func startLabRouter(l *lab.Lab, dir string, pools []netip.Prefix, bfd bgp.BFD, logger *slog.Logger) (*labRouter, error) {
	if _, err := exec.LookPath("bird"); err != nil {
		return nil, fmt.Errorf("--ecmp needs bird2 as the lab's router (apt-get install bird2; hack/deps.sh): %w", err)
	}
	r, err := l.AddHost(labRouterName, labRouterNum)
	if err != nil {
		return nil, err
	}
	// The router forwards out the interface it received on: no
	// redirects, or the client would learn to bypass it.
	if err := writeSysctls(r.NS, map[string]string{"net/ipv4/ip_forward": "1", "net/ipv4/fib_multipath_hash_policy": "1",
		"net/ipv4/conf/all/send_redirects": "0", "net/ipv4/conf/eth0/send_redirects": "0"}); err != nil {
		return nil, err
	}
	for _, h := range l.Nodes {
		// Each node DNATs to endpoints on the pods host: it forwards.
		if err := writeSysctls(h.NS, map[string]string{"net/ipv4/ip_forward": "1",
			"net/ipv4/conf/all/send_redirects": "0", "net/ipv4/conf/eth0/send_redirects": "0"}); err != nil {
			return nil, err
		}
	}
	for _, p := range pools {
		if out, err := exec.Command("ip", "-n", l.Client.NS, "route", "replace", p.Masked().String(), "via", r.Addr.String()).CombinedOutput(); err != nil {
			return nil, fmt.Errorf("client route to %s via the router: %w: %s", p, err, strings.TrimSpace(string(out)))
		}
	}
	var nodes []netip.Addr
	for _, h := range l.Nodes {
		nodes = append(nodes, h.Addr)
	}
	birdDir := filepath.Join(dir, "bird")
	if err := os.MkdirAll(birdDir, 0o700); err != nil {
		return nil, err
	}
	conf := filepath.Join(birdDir, "bird.conf")
	if err := os.WriteFile(conf, []byte(birdConfig(r.Addr, labASN, nodes, labBGPPort, labHoldTime, bfd)), 0o600); err != nil {
		return nil, err
	}
	cmd := exec.Command("ip", "netns", "exec", r.NS, "bird", "-f", "-c", conf, "-s", filepath.Join(birdDir, "bird.ctl"),
		"-P", filepath.Join(birdDir, "bird.pid"))
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("bird: %w", err)
	}
	logger.Info("lab router: bird peers with every node over iBGP and spreads the flows over them (ECMP)",
		"router", r.NS+" "+r.Addr.String(), "asn", labASN, "bfd", bfd.Enabled, "show", "birdc -s "+filepath.Join(birdDir, "bird.ctl")+" show route all; ip -n "+r.NS+" route")
	return &labRouter{host: r, bird: cmd}, nil
}

func (r *labRouter) stop() {
	if r != nil && r.bird != nil && r.bird.Process != nil {
		_ = r.bird.Process.Kill()
		_ = r.bird.Wait()
	}
}

// ecmpSpeaker is the BGP configuration of node h's speaker in the lab:
// it listens in h's namespace, the router connects.
func ecmpSpeaker(h *lab.Host, router netip.Addr, bfd bgp.BFD) bgp.Config {
	return bgp.Config{ASN: labASN, RouterID: h.Addr, NextHop: h.Addr, ListenPort: labBGPPort, Netns: h.NS,
		HoldTime: labHoldTime, BFD: bfd, Peers: []bgp.Peer{{Address: router, ASN: labASN}}}
}

// writeSysctls sets /proc/sys values inside netns.
func writeSysctls(netns string, kv map[string]string) error {
	return netnsdo.Do(netns, func() error {
		for k, v := range kv {
			if err := os.WriteFile(filepath.Join("/proc/sys", k), []byte(v), 0o644); err != nil {
				return fmt.Errorf("sysctl %s in %s: %w", strings.ReplaceAll(k, "/", "."), netns, err)
			}
		}
		return nil
	})
}
