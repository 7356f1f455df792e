// Package driver is the seam between the agent's core and what runs a
// load balancer on a node. The core (package agent) watches the store,
// queues, coalesces and retries changes and reports status; it knows no
// data plane. A Driver brings one provider's load balancers to their spec
// on this node: HAProxy for the haproxy provider
// (internal/agent/haproxydriver), nftables for the native provider
// (internal/agent/nativedriver). drivertest is the contract every driver
// passes. What moves the addresses to the node that serves them (VRRP,
// BGP) is the other seam, package mover.
package driver

import (
	"context"
	"errors"

	"pier.dev/pier/internal/model"
)

// Driver runs the load balancers of one provider on this node.
//
// The agent calls Apply and Remove of different load balancers at once,
// from several goroutines, so that one slow apply does not hold up the
// others (a 10,000-path load balancer takes about 1.5 s); it never
// overlaps two calls for the same UUID. The other methods may be called
// while applies run; Recover runs before the first Apply and Close after
// the last one returned. A Driver may do slow work (draining) in the
// background, but a later call for the same UUID must see it finished.
type Driver interface {
	// Provider is the provider whose load balancers this driver runs.
	Provider() model.Provider

	// Recover runs once, before the first Apply. placed holds the UUIDs
	// of the load balancers of this provider placed on this node; what a
	// previous agent left running for any other one is stopped and its
	// files removed. What it left for a placed one is adopted by the
	// first Apply, without disturbing it when it already matches.
	Recover(ctx context.Context, placed map[string]bool) error

	// Apply brings lb to its spec and returns what now runs. It is
	// idempotent: applying the spec that runs changes nothing. On error
	// what ran before keeps running; an error wrapping ErrRejected means
	// retrying the same spec cannot help.
	Apply(ctx context.Context, lb *model.LoadBalancer) (Applied, error)

	// Drifted lists the load balancers whose running state may no
	// longer be what their last Apply made (a process restarted by a
	// supervisor from an older file); the agent applies them again.
	Drifted() []string

	// Remove stops serving load balancer uuid and removes its files. It
	// returns at once; a following Apply of the same uuid waits for it.
	Remove(uuid string)

	// Close ends the driver: with stop, everything stops serving;
	// without, the data plane keeps serving for the next agent to
	// adopt. It waits for background work and returns the UUIDs it
	// stopped.
	Close(stop bool) []string
}

// Applied is what a successful Apply reports.
type Applied struct {
	// ConfigHash identifies the configuration that runs, files and key
	// material included; equal hashes mean nothing changed.
	ConfigHash string
}

// ErrRejected marks a spec the data plane refused (a HAProxy config that
// `haproxy -c` rejects): retrying the same spec cannot help, the next
// spec change will.
var ErrRejected = errors.New("the data plane rejected the configuration")

// HealthChecker is implemented by a driver that can tell at once whether
// a load balancer's data plane serves on this node. The agent asks it
// often (every 50 ms) to decide whether this node may hold the load
// balancer's addresses: it must not block.
type HealthChecker interface {
	Healthy(uuid string) bool
}

// HealthNotifier is implemented by a driver that can tell when a data
// plane stops serving (an HAProxy process exited): the agent gives it a
// function that asks for an immediate look at every load balancer's
// health, so that a dead process releases its addresses at once rather
// than at the next tick. The function never blocks.
type HealthNotifier interface {
	NotifyHealth(changed func())
}

// Batcher is implemented by a driver that may load the applies waiting
// for it together (HAProxy packed into a few processes: one check and one
// reload for all of them). When Batches says it does, the more applies
// wait the fewer reloads, and the agent runs PackedApplyConcurrency of
// them at once by default instead of DefaultApplyConcurrency.
type Batcher interface {
	Batches() bool
}

// Drainer is implemented by a driver that can prepare a planned handover:
// with on, every response asks the client to close its connection, so
// that clients open new connections, which follow the addresses to the
// other node, instead of reusing one that would be cut. Off undoes it.
type Drainer interface {
	Drain(ctx context.Context, on bool) error
}

// Stats is what a Reporter tells about one load balancer on this node.
type Stats struct {
	// Reloads and RuntimeUpdates count what the driver did to the data
	// plane since it was created: reloads (a start is not one) and
	// member changes sent without a reload.
	Reloads, RuntimeUpdates uint64
	// MembersUp of Members are the members the data plane sees up, as of
	// the last RefreshMembers; MembersDown are the others, each as
	// address:port, sorted, once each.
	MembersUp, Members int
	MembersDown        []string
	// Requests counts the HTTP requests the load balancer's listeners
	// took and Errors5xx its 5xx responses, from the first
	// RefreshMembers on, across reloads; a reload's old worker's last
	// requests are not counted. A rate is their change over a time.
	Requests, Errors5xx uint64
	// RecentErrors are the kinds of 5xx answer the load balancer gave
	// here most recently, newest first (model.NodeStatus.RecentErrors),
	// as of the last line the driver read; nil when it reads none.
	RecentErrors []model.RequestError
}

// Reporter is implemented by a driver that can tell an operator how a
// load balancer fares on this node. Stats does no I/O: the agent calls it
// for every report. RefreshMembers asks the data plane which members of
// the load balancers uuids are up (HAProxy: one runtime API conversation
// per process); the agent calls it after each apply, and at most every
// 2 to 10 s per load balancer outside its loop, so it must be safe beside
// Apply.
type Reporter interface {
	Stats(uuid string) Stats
	RefreshMembers(ctx context.Context, uuids []string) error
}
