// Package lab builds a small network of Linux network namespaces on one
// machine: a switch namespace holding a bridge, and hosts (nodes, a client,
// a namespace where backends run), each with eth0 on that bridge and an
// address in one subnet. `pier run --nodes N` and the demo use it to run
// several nodes on a laptop; the tests under test/ use it through
// test/topo.
//
//	Prefix+"sw"  br0 ── n0   eth0 10.99.0.11   (nodes: .11, .12, …)
//	                 ── n1   eth0 10.99.0.12
//	                 ── pods eth0 10.99.0.50   (backends)
//	                 ── c    eth0 10.99.0.100  (the client)
//	                 ── Prefix+"host" 10.99.0.1 (with HostLink: the
//	                    builder's own namespace, e.g. a test's API server)
//
// No namespace has a default route or any link outside the bridge, so
// nothing sent inside the lab can leave the machine, and nothing in it
// disturbs the host's own network. HostLink adds one link to the namespace
// that builds the lab, with forwarding off on it: the lab's hosts reach
// that namespace's own addresses on the segment, and nothing beyond.
//
// Everything runs the iproute2 `ip` command as root: it is what an operator
// would type to inspect or repair the lab by hand, and it keeps this
// package free of netlink code.
package lab

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"

	"pier.dev/pier/internal/netnsdo"
)

// DefaultSubnet is the segment of a lab built with a zero Options.Subnet.
var DefaultSubnet = netip.MustParsePrefix("10.99.0.0/24")

// Host numbers: the last byte of each host's address. Nodes stop below
// the pods host so that the two never collide.
const (
	hostLinkNum = 1
	firstNode   = 11
	podsHost    = 50
	clientHost  = 100
	maxNodes    = podsHost - firstNode
)

// runDir is where iproute2 keeps named namespaces.
const runDir = "/run/netns"

// validPrefix keeps namespace names short and free of anything a shell or
// /run/netns could misread.
var validPrefix = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,15}$`)

// Options says which hosts to build and how to name them.
type Options struct {
	// Prefix starts every namespace name: Prefix+"sw", Prefix+"n0",
	// Prefix+"n1", …, Prefix+"c", Prefix+"pods". It must match
	// ^[a-z0-9][a-z0-9-]{0,15}$.
	Prefix string
	Nodes  int          // node hosts n0, n1, … at .11, .12, … (at most 39)
	Client bool         // a client host c at .100
	Pods   bool         // a host pods at .50, where backends run
	Subnet netip.Prefix // the zero Prefix means DefaultSubnet; IPv4, /24 or wider
	// HostLink connects the namespace of the process that builds the lab
	// (the root namespace, usually) to the bridge with a veth: its side
	// is named Prefix+"host" and has address .1. Processes in the lab
	// can then reach a server of the builder listening there (a test's
	// kube-apiserver behind a relay). The prefix must then be at most 11
	// characters: interface names have 15.
	HostLink bool
}

// Lab is a built network. Remove it when done.
type Lab struct {
	Switch string // namespace holding the bridge br0
	Nodes  []*Host
	Client *Host // nil unless Options.Client
	Pods   *Host // nil unless Options.Pods
	Subnet netip.Prefix
	// HostLink is the builder's side of the host link and HostAddr its
	// address; both zero without Options.HostLink.
	HostLink string
	HostAddr netip.Addr

	// prefix starts every namespace name (Options.Prefix); extra are
	// the hosts AddHost added.
	prefix string
	extra  []*Host
	// created lists the namespaces this lab added, in order, so that
	// Remove deletes those and never one that existed before.
	created      []string
	hostLinkMade bool
	remove       sync.Once
}

// Host is one namespace on the segment.
type Host struct {
	Name string     // "n0", "c", "pods"
	NS   string     // namespace name
	Addr netip.Addr // address of eth0
	// Port is the host's end of its veth pair, in the switch namespace:
	// taking it down cuts the host off without touching the host itself.
	Port string
	sw   string // the switch namespace, where Port is
}

// Available returns nil when this machine can build a lab: Linux, root,
// and iproute2's ip. Otherwise the error says what is missing.
func Available() error {
	if runtime.GOOS != "linux" {
		return fmt.Errorf("lab: network namespaces need Linux, not %s", runtime.GOOS)
	}
	if uid := os.Geteuid(); uid != 0 {
		return fmt.Errorf("lab: network namespaces need root (running as uid %d)", uid)
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return fmt.Errorf("lab: needs the ip command of iproute2 (hack/deps.sh installs it): %w", err)
	}
	return nil
}

// Build creates the namespaces, the bridge and the links. On any error it
// removes what it created and returns an error saying what failed; it
// never touches a namespace that existed before.
func Build(opts Options) (*Lab, error) {
	l, err := plan(opts)
	if err != nil {
		return nil, err
	}
	if err := Available(); err != nil {
		return nil, err
	}
	// Checked before creating anything: a leftover or a concurrent lab
	// with the same prefix is the likely cause, and the operator needs
	// the name to act on, not an ip error halfway through.
	for _, ns := range l.namespaces() {
		if _, err := os.Stat(filepath.Join(runDir, ns)); err == nil {
			return nil, fmt.Errorf("lab: namespace %s exists: another lab with prefix %q is running "+
				"(pier run --nodes, a test), or remove it with `ip netns delete %s`", ns, opts.Prefix, ns)
		}
	}
	if l.HostLink != "" && ip("link", "show", "dev", l.HostLink) == nil {
		return nil, fmt.Errorf("lab: link %s exists: another lab with prefix %q is running, "+
			"or remove it with `ip link delete %s`", l.HostLink, opts.Prefix, l.HostLink)
	}
	if err := l.build(); err != nil {
		return nil, fmt.Errorf("lab %s: %w", opts.Prefix, err)
	}
	return l, nil
}

// Attach returns the lab that opts describe, built by another process
// (pier run --nodes): its hosts can be used, and Remove deletes whatever
// of it still exists (a crashed builder leaves it).
func Attach(opts Options) (*Lab, error) {
	l, err := plan(opts)
	if err != nil {
		return nil, err
	}
	l.created = l.namespaces()
	l.hostLinkMade = l.HostLink != ""
	return l, nil
}

// plan checks opts and lays out the lab without creating anything.
func plan(opts Options) (*Lab, error) {
	if !validPrefix.MatchString(opts.Prefix) {
		return nil, fmt.Errorf("lab: prefix %q: want ^[a-z0-9][a-z0-9-]{0,15}$", opts.Prefix)
	}
	if opts.Nodes < 0 || opts.Nodes > maxNodes {
		return nil, fmt.Errorf("lab: %d nodes: want 0 to %d", opts.Nodes, maxNodes)
	}
	subnet := opts.Subnet
	if subnet == (netip.Prefix{}) {
		subnet = DefaultSubnet
	}
	// Host addresses set the last byte, which must stay inside the subnet.
	if !subnet.IsValid() || !subnet.Addr().Is4() || subnet.Bits() > 24 {
		return nil, fmt.Errorf("lab: subnet %s: want an IPv4 prefix of /24 or wider", subnet)
	}
	subnet = subnet.Masked()
	l := &Lab{Switch: opts.Prefix + "sw", Subnet: subnet, prefix: opts.Prefix}
	host := func(name string, num int) *Host {
		a := subnet.Addr().As4()
		a[3] = byte(num)
		return &Host{Name: name, NS: opts.Prefix + name, Addr: netip.AddrFrom4(a), Port: "p-" + name, sw: l.Switch}
	}
	for i := range opts.Nodes {
		l.Nodes = append(l.Nodes, host("n"+strconv.Itoa(i), firstNode+i))
	}
	if opts.Client {
		l.Client = host("c", clientHost)
	}
	if opts.Pods {
		l.Pods = host("pods", podsHost)
	}
	if opts.HostLink {
		// IFNAMSIZ: 15 characters and a NUL.
		if len(opts.Prefix)+len("host") > 15 {
			return nil, fmt.Errorf("lab: prefix %q is too long for a host link (%shost has more than 15 characters)", opts.Prefix, opts.Prefix)
		}
		l.HostLink = opts.Prefix + "host"
		l.HostAddr = host("host", hostLinkNum).Addr
	}
	return l, nil
}

// build creates the planned lab; on error it removes what it created.
func (l *Lab) build() error {
	if err := l.addNamespace(l.Switch); err != nil {
		return err
	}
	err := ipAll(
		[]string{"-n", l.Switch, "link", "set", "lo", "up"},
		[]string{"-n", l.Switch, "link", "add", "br0", "type", "bridge"},
		[]string{"-n", l.Switch, "link", "set", "br0", "up"},
	)
	for _, h := range l.Hosts() {
		if err != nil {
			break
		}
		err = l.addHost(h)
	}
	if err == nil && l.HostLink != "" {
		err = l.addHostLink()
	}
	if err != nil {
		l.Remove()
		return err
	}
	return nil
}

// addHost creates a host's namespace and wires its eth0 to the bridge.
func (l *Lab) addHost(h *Host) error {
	if err := l.addNamespace(h.NS); err != nil {
		return err
	}
	return ipAll(
		[]string{"-n", l.Switch, "link", "add", h.Port, "type", "veth", "peer", "name", "eth0", "netns", h.NS},
		[]string{"-n", l.Switch, "link", "set", h.Port, "master", "br0", "up"},
		[]string{"-n", h.NS, "link", "set", "lo", "up"},
		[]string{"-n", h.NS, "link", "set", "eth0", "up"},
		[]string{"-n", h.NS, "addr", "add", netip.PrefixFrom(h.Addr, l.Subnet.Bits()).String(), "dev", "eth0"},
	)
}

// addHostLink wires the builder's namespace to the bridge. Forwarding is
// off on that link, so a packet from the lab reaches the builder's own
// addresses and goes no further, whatever the builder's ip_forward says.
// Its peer lives in the switch namespace: deleting that namespace deletes
// the link too (a crashed builder leaves nothing that RemoveStale misses).
func (l *Lab) addHostLink() error {
	err := ip("link", "add", l.HostLink, "type", "veth", "peer", "name", "p-host", "netns", l.Switch)
	if err != nil {
		return err
	}
	l.hostLinkMade = true
	conf := "/proc/sys/net/ipv4/conf/" + l.HostLink + "/forwarding"
	if err := os.WriteFile(conf, []byte("0"), 0o644); err != nil {
		return fmt.Errorf("forwarding off on %s: %w", l.HostLink, err)
	}
	return ipAll(
		[]string{"-n", l.Switch, "link", "set", "p-host", "master", "br0", "up"},
		[]string{"addr", "add", netip.PrefixFrom(l.HostAddr, l.Subnet.Bits()).String(), "dev", l.HostLink},
		[]string{"link", "set", l.HostLink, "up"},
	)
}

func (l *Lab) addNamespace(ns string) error {
	if err := ip("netns", "add", ns); err != nil {
		return err
	}
	l.created = append(l.created, ns)
	return nil
}

// extraName is the name of a host AddHost adds.
var extraName = regexp.MustCompile(`^[a-z][a-z0-9]{0,7}$`)

// AddHost adds one more host to a built (or attached) lab: a namespace
// Prefix+name with eth0 on the bridge at host number num (the last byte
// of its address), such as a neighbour on the node segment that is no
// node. Remove deletes it with the rest.
func (l *Lab) AddHost(name string, num int) (*Host, error) {
	if !extraName.MatchString(name) {
		return nil, fmt.Errorf("lab: host name %q: want %s", name, extraName)
	}
	if num < 2 || num > 254 {
		return nil, fmt.Errorf("lab: host number %d: want 2-254", num)
	}
	a := l.Subnet.Addr().As4()
	a[3] = byte(num)
	h := &Host{Name: name, NS: l.prefix + name, Addr: netip.AddrFrom4(a), Port: "p-" + name, sw: l.Switch}
	for _, other := range l.Hosts() {
		if other.Name == name || other.Addr == h.Addr {
			return nil, fmt.Errorf("lab: host %s (%s) is taken", name, h.Addr)
		}
	}
	if h.Addr == l.HostAddr {
		return nil, fmt.Errorf("lab: %s is the host link's address", h.Addr)
	}
	if _, err := os.Stat(filepath.Join(runDir, h.NS)); err == nil {
		return nil, fmt.Errorf("lab: namespace %s exists", h.NS)
	}
	if err := l.addHost(h); err != nil {
		return nil, fmt.Errorf("lab %s: add host %s: %w", l.Switch, name, err)
	}
	l.extra = append(l.extra, h)
	return h, nil
}

// Remove kills every process inside the lab's namespaces and deletes them,
// hosts first, the switch last. It is safe to call more than once and from
// several goroutines; only the first call acts. Stop what you started with
// Command first where you can: a process started an instant before Remove
// may not have entered its namespace yet, and then escapes the kill.
func (l *Lab) Remove() {
	l.remove.Do(func() {
		if l.hostLinkMade {
			// Gone already if the switch namespace was deleted.
			_ = ip("link", "delete", "dev", l.HostLink)
		}
		for i := len(l.created) - 1; i >= 0; i-- {
			KillIn(l.created[i])
			// Nothing useful can be done about a failed delete here; the
			// next Build with this prefix reports the namespace by name.
			_ = ip("netns", "delete", l.created[i])
		}
	})
}

// Hosts lists the nodes, then the client and the pods host when built,
// then the hosts AddHost added.
func (l *Lab) Hosts() []*Host {
	hosts := append([]*Host(nil), l.Nodes...)
	for _, h := range []*Host{l.Client, l.Pods} {
		if h != nil {
			hosts = append(hosts, h)
		}
	}
	return append(hosts, l.extra...)
}

// Holders names the hosts that have addr on eth0.
func (l *Lab) Holders(addr netip.Addr) []string {
	var out []string
	for _, h := range l.Hosts() {
		if h.Has(addr) {
			out = append(out, h.Name)
		}
	}
	return out
}

// namespaces lists every namespace of the lab, built or planned.
func (l *Lab) namespaces() []string {
	out := []string{l.Switch}
	for _, h := range l.Hosts() {
		out = append(out, h.NS)
	}
	return out
}

// Command returns name with args to run inside the host's namespace.
func (h *Host) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	return netnsdo.Command(ctx, h.NS, name, args...)
}

// Has reports whether addr is on the host's eth0, with any prefix length:
// its own address as well as one added by VRRP.
func (h *Host) Has(addr netip.Addr) bool {
	held, err := netnsdo.Addresses(h.NS, "eth0")
	return err == nil && held[addr]
}

// SetLink takes the host's switch port down or up: the host is cut off
// from every other host, as when its link fails, while its own eth0 stays
// up as a real node's would.
func (h *Host) SetLink(up bool) error {
	state := "down"
	if up {
		state = "up"
	}
	return ip("-n", h.sw, "link", "set", h.Port, state)
}

// ipAll runs ip once per argument list, stopping at the first error.
func ipAll(cmds ...[]string) error {
	for _, args := range cmds {
		if err := ip(args...); err != nil {
			return err
		}
	}
	return nil
}

// ip runs the ip command; its output is in the error, as it says why.
func ip(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err == nil {
		return nil
	}
	cmd := "ip " + strings.Join(args, " ")
	if msg := strings.TrimSpace(string(out)); msg != "" {
		return fmt.Errorf("%s: %w: %s", cmd, err, msg)
	}
	var execErr *exec.Error
	if errors.As(err, &execErr) {
		return fmt.Errorf("%s: %w (needs iproute2)", cmd, err)
	}
	return fmt.Errorf("%s: %w", cmd, err)
}
