package standalone

import (
	"fmt"
	"log/slog"
	"net/netip"
	"path/filepath"
	"sync"
	"time"

	"pier.dev/pier/internal/agent"
	"pier.dev/pier/internal/agent/addrhold"
	"pier.dev/pier/internal/agent/bgp"
	"pier.dev/pier/internal/agent/driver"
	"pier.dev/pier/internal/agent/haproxydriver"
	"pier.dev/pier/internal/agent/mover"
	"pier.dev/pier/internal/agent/nativedriver"
	"pier.dev/pier/internal/agent/splitdriver"
	"pier.dev/pier/internal/lab"
	"pier.dev/pier/internal/metrics"
	"pier.dev/pier/internal/source"
	"pier.dev/pier/internal/store"
)

// LabPools are the pools `pier run --nodes` uses unless told otherwise:
// VIPs and floating IPs on the lab's segment, so that they move between
// the node namespaces with VRRP and the client host reaches them.
const (
	LabInternalPool = "10.99.0.128/26"
	LabPublicPool   = "10.99.0.192/26"
)

// node is one node of pier run: its agent and where it runs.
type node struct {
	source source.Node
	agent  *agent.Agent
	// draining is the last drain state given to the agent.
	draining bool
}

// localHeartbeats tells the agents of pier run that their peers are
// alive: they all run in this process, so a peer is alive while pier run
// is, and how current its reports are is asked of the peer agent itself.
// It is filled before any agent runs.
type localHeartbeats map[string]*agent.Agent

func (localHeartbeats) Alive(string) bool { return true }

func (h localHeartbeats) ReportsWrittenAt(node string) time.Time {
	if a := h[node]; a != nil {
		return a.ReportsWrittenAt()
	}
	return time.Time{}
}

func (localHeartbeats) String() string { return "in-process" }

var _ addrhold.Heartbeats = localHeartbeats{}

// buildLab creates the network of `pier run --nodes N`: a namespace per
// node on a bridge, a client host and a pods host (see package lab), and
// one agent per node that runs HAProxy and keepalived in its namespace.
//
// With --ecmp the addresses move with BGP instead: a router host runs
// bird (ecmp.go), every node's agent advertises to it, the native load
// balancers from every node at once.
func buildLab(cfg Config, stateDir string, newAgent func(nodeAgent) (*agent.Agent, error), m *metrics.Metrics, logger *slog.Logger) (*lab.Lab, []*node, func(), error) {
	var nodes []*node
	fail := func(err error) (*lab.Lab, []*node, func(), error) {
		return nil, nil, nil, fmt.Errorf("--nodes %d: %w", cfg.Nodes, err)
	}
	if err := lab.Available(); err != nil {
		return fail(err)
	}
	l, err := lab.Build(lab.Options{Prefix: cfg.LabPrefix, Nodes: cfg.Nodes, Client: true, Pods: true})
	if err != nil {
		return fail(err)
	}
	var router *labRouter
	if cfg.ECMP {
		var pools []netip.Prefix
		for _, s := range []string{cfg.InternalPool, cfg.PublicPool} {
			if p, err := netip.ParsePrefix(s); err == nil {
				pools = append(pools, p)
			}
		}
		if router, err = startLabRouter(l, stateDir, pools, cfg.BFD, logger); err != nil {
			l.Remove()
			return fail(err)
		}
	}
	remove := func() {
		router.stop()
		l.Remove()
	}
	peers := localHeartbeats{}
	for _, h := range l.Nodes {
		n := &node{source: source.Node{Name: h.Name, Ready: true, Address: h.Addr}}
		nodeDir := nodeStateDir(stateDir, h.Name)
		nodeLog := logger.With("component", "agent", "node", h.Name)
		var mv mover.Mover
		var err error
		if router != nil {
			mv = bgp.NewMover(bgp.MoverConfig{Speaker: ecmpSpeaker(h, router.host.Addr, cfg.BFD), Node: h.Name, Netns: h.NS, ECMP: true,
				Logger: nodeLog.With("component", "bgp")})
		} else {
			mv, err = addrhold.NewMover(addrhold.Config{Node: h.Name, Interface: "eth0", Dir: addrhold.DefaultDir(nodeDir), Netns: h.NS,
				Advert: cfg.VRRPAdvert, KeepalivedBinary: cfg.KeepalivedBinary, Metrics: m, Logger: nodeLog.With("component", "vrrp")}, peers)
		}
		if err == nil {
			n.agent, err = newAgent(nodeAgent{name: h.Name, stateDir: nodeDir, netns: h.NS, mover: mv, logger: nodeLog})
		} else {
			err = fmt.Errorf("vrrp: %w", err)
		}
		if err != nil {
			remove()
			return fail(err)
		}
		peers[h.Name] = n.agent
		nodes = append(nodes, n)
	}
	logger.Info("lab network built: each node is a network namespace on one bridge, with no route out",
		"nodes", hostList(l.Nodes), "client", l.Client.NS+" "+l.Client.Addr.String(), "pods", l.Pods.NS+" "+l.Pods.Addr.String(),
		"try", "ip netns exec "+l.Client.NS+" curl http://<VIP>:<port>/")
	return l, nodes, remove, nil
}

// nodeStateDir is the state folder of node's agent with --nodes: short,
// as HAProxy socket paths live below it.
func nodeStateDir(stateDir, node string) string { return filepath.Join(stateDir, node) }

// agentDirs are the folders the agents keep their load balancers in:
// stateDir itself for pier run's one node, each node's own in the lab.
func (s *nodeSet) agentDirs(stateDir string, lab bool) []string {
	if !lab {
		return []string{stateDir}
	}
	var dirs []string
	for _, n := range s.nodes {
		dirs = append(dirs, nodeStateDir(stateDir, n.source.Name))
	}
	return dirs
}

// agentMaker builds the agents of pier run's nodes. They share the store,
// the Secrets and the data plane options; each has its node, folder,
// namespace and mover (with --nodes).
type agentMaker struct {
	cfg     Config
	store   store.Store
	secrets haproxydriver.Secrets
	// configMaps gives the client CA bundles (the view, as secrets).
	configMaps haproxydriver.ConfigMaps
	metrics    *metrics.Metrics
}

// nodeAgent is what one node's agent has of its own.
type nodeAgent struct {
	name, stateDir string
	netns          string      // "" without --nodes
	mover          mover.Mover // nil without --nodes: the addresses are loopback
	logger         *slog.Logger
}

// make returns the agent of node n, running HAProxy and nftables in its
// namespace. It stops them when it exits: nothing outlives pier run.
func (m agentMaker) make(n nodeAgent) (*agent.Agent, error) {
	hd, err := haproxydriver.New(haproxydriver.Config{StateDir: n.stateDir, Binary: m.cfg.HAProxyBinary, Netns: n.netns,
		Processes: m.cfg.HAProxyProcesses, Landing: m.cfg.HAProxyLanding, Render: m.cfg.Render, Secrets: m.secrets, ConfigMaps: m.configMaps,
		AccessLog: m.cfg.AccessLog, Metrics: m.metrics, Logger: n.logger})
	if err != nil {
		return nil, fmt.Errorf("haproxy driver: %w", err)
	}
	// A Gateway's UDP listeners are served by nftables beside HAProxy.
	haproxy, native := splitdriver.New(hd, nativedriver.NewOrUnavailable(nativedriver.Config{StateDir: n.stateDir, Netns: n.netns, Logger: n.logger}))
	// The embedded store makes a report cost nothing: rates as fresh as
	// the members read.
	return agent.New(agent.Config{Node: n.name, Store: m.store, Drivers: []driver.Driver{haproxy, native}, Mover: n.mover,
		ApplyConcurrency: m.cfg.ApplyConcurrency, RatesEvery: agent.StatsEvery, StopOnExit: true, Metrics: m.metrics, Logger: n.logger}), nil
}

// nodes builds pier run's nodes and their agents: the lab's with
// --nodes, else one on loopback. removeLab takes the lab down.
func (m agentMaker) nodes(stateDir string, logger *slog.Logger) (nodes *nodeSet, removeLab func(), err error) {
	nodes = &nodeSet{log: logger}
	if m.cfg.Nodes >= 2 {
		_, labNodes, remove, err := buildLab(m.cfg, stateDir, m.make, m.metrics, logger)
		if err != nil {
			return nil, nil, err
		}
		nodes.nodes = labNodes
		return nodes, remove, nil
	}
	a, err := m.make(nodeAgent{name: m.cfg.Node, stateDir: stateDir, logger: logger.With("component", "agent")})
	if err != nil {
		return nil, nil, err
	}
	nodes.nodes = []*node{{source: singleNode(m.cfg.Node), agent: a}}
	return nodes, func() {}, nil
}

func hostList(hosts []*lab.Host) []string {
	var out []string
	for _, h := range hosts {
		out = append(out, h.NS+" "+h.Addr.String())
	}
	return out
}

// nodeSet is pier run's nodes and what the manifests say of them.
type nodeSet struct {
	mu    sync.Mutex
	nodes []*node
	log   *slog.Logger
}

// forSnapshot returns the nodes to put in a snapshot: pier run's own,
// with Draining taken from a Node manifest of the same name
// (spec.unschedulable, as `kubectl cordon` sets it). A change of drain
// state is handed to that node's agent.
func (s *nodeSet) forSnapshot(fromFiles []source.Node) []source.Node {
	s.mu.Lock()
	defer s.mu.Unlock()
	draining := map[string]bool{}
	for _, n := range fromFiles {
		draining[n.Name] = n.Draining
	}
	out := make([]source.Node, 0, len(s.nodes))
	for _, n := range s.nodes {
		sn := n.source
		sn.Draining = draining[sn.Name]
		if sn.Draining != n.draining && n.agent != nil {
			s.log.Info("node drain state from the manifests", "node", sn.Name, "draining", sn.Draining)
			n.agent.SetDraining(sn.Draining)
			n.draining = sn.Draining
		}
		out = append(out, sn)
	}
	return out
}

// singleNode is pier run's one node: its address is loopback, with no
// standby there is no VRRP peer to reach.
func singleNode(name string) source.Node {
	return source.Node{Name: name, Ready: true, Address: netip.AddrFrom4([4]byte{127, 0, 0, 1})}
}
