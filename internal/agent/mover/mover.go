// Package mover is the seam between the agent's core and what moves the
// addresses (VIP, floating IP) of the load balancers placed on a node to
// the node that serves them, as package driver is the seam to what serves
// them. The core (package agent) tells a Mover what is placed here, how
// each load balancer's data plane fares (Node) and when to drain; the
// Mover moves the addresses and says, per load balancer, what this node
// does for them (Role), which the core reports in the load balancer's
// status. The movers:
//
//   - VRRP (internal/agent/addrhold over internal/vrrp): keepalived holds
//     the addresses on the node's interface, one instance per ordered pair
//     of nodes; the API server arbitrates a split brain.
//   - BGP (internal/agent/bgp): every node a load balancer is placed on
//     advertises host routes for its addresses, the active node's
//     preferred, while its data plane serves.
//
// Without a mover (pier run on loopback, a cloud, MetalLB) the addresses
// are someone else's business. movertest is the contract every mover
// passes, against its real mechanism.
package mover

import (
	"context"
	"time"

	"pier.dev/pier/internal/model"
)

// TickEvery is how often the agent calls Tick: a dead HAProxy must stop
// attracting its traffic within one tick for the failover target.
const TickEvery = 50 * time.Millisecond

// Mover moves the addresses of the load balancers placed on this node.
//
// The agent calls its methods from its loop, one at a time, and none may
// block for long: the loop also watches health. Start comes first and
// Close last.
type Mover interface {
	// Start runs once, when the agent has listed the store and before any
	// other call. node is the agent's side, valid until Close.
	Start(ctx context.Context, node Node) error

	// Sync gives the mover the newest store view, status included, of
	// every load balancer placed on this node (active or standby), sorted
	// by UUID: after every turn of the agent's loop that may have changed
	// it, so cheaply when nothing did. A load balancer missing from it is
	// no longer the mover's business.
	Sync(ctx context.Context, placed []*model.LoadBalancer)

	// Tick does the periodic work (every TickEvery, and when the mover
	// asked for it with Node.Wake): it looks at the data plane's health,
	// moves addresses and returns the UUIDs whose Role changed, for the
	// agent to report again.
	Tick(ctx context.Context) []string

	// Role is what this node does for the addresses of load balancer uuid
	// now; the zero Role when they are not moved here.
	Role(uuid string) Role

	// Reported tells the mover that r, this node's report for uuid, is in
	// the store now: what the other nodes can read of this node's role.
	Reported(uuid string, r model.NodeStatus)

	// Drain starts (on) or ends a planned handover of every address this
	// node attracts to the other nodes. It returns at once; the ticks
	// carry it out.
	Drain(ctx context.Context, on bool)

	// Holding reports whether this node still attracts the traffic of an
	// address, or a handover of one is under way. An agent that hands
	// over on exit ticks until it does not.
	Holding() bool

	// Ready returns why the mover cannot move addresses now, nil when it
	// can (the node's readiness probe).
	Ready() error

	// Close ends the mover. With stop the node gives up every address, so
	// that the other nodes take over at once; without, what attracts the
	// traffic keeps doing so, for the next agent to adopt (keepalived runs
	// on; BGP sessions end with the process, and the routers keep the
	// routes for the graceful restart time).
	Close(ctx context.Context, stop bool)
}

// Node is the agent's core as a mover sees it: what it knows of the data
// plane here. Its methods are called from the mover's methods (the
// agent's loop), except Wake.
type Node interface {
	// Healthy reports whether uuid's data plane serves on this node now.
	Healthy(uuid string) bool
	// Served reports whether it has served here since it was given to
	// its driver: a load balancer that never came up here is no reason to
	// move the addresses it shares with others.
	Served(uuid string) bool
	// Reconnect asks every client of this node's data plane to open a new
	// connection (on: each response says "Connection: close"), or stops
	// asking: before a handover moves the addresses, so that clients
	// follow them rather than keep a connection the move would cut.
	Reconnect(ctx context.Context, on bool)
	// Wake asks for a Tick soon. Safe from any goroutine.
	Wake()
}

// Role is what this node does for one load balancer's addresses, in the
// words of its status report (model.NodeStatus): its VRRP role where a
// VRRP mover holds them, what it advertises where a BGP mover routes them.
type Role struct {
	VRRP model.VRRPState
	BGP  model.BGPState
}
