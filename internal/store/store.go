// Package store keeps LoadBalancer objects: the "config DB" of the seeds.
// The embedded implementation (bbolt in the state folder) serves pier run;
// the Kubernetes mode implements the same interface with a custom resource.
package store

import (
	"context"
	"errors"

	"pier.dev/pier/internal/model"
)

// ErrNotFound is returned for a UUID the store does not hold.
var ErrNotFound = errors.New("load balancer not found")

// Store holds LoadBalancers keyed by UUID. Implementations are safe for
// concurrent use and return copies: callers may modify what they get.
type Store interface {
	Get(ctx context.Context, uuid string) (*model.LoadBalancer, error)
	// List returns every LoadBalancer, sorted by UUID.
	List(ctx context.Context) ([]*model.LoadBalancer, error)
	// PutSpec creates lb or replaces everything but its Status (which
	// agents own) and CreatedAt (kept from the first write). The status
	// read back is summarised for the new placement: when the standby
	// becomes active, its report becomes the summary.
	PutSpec(ctx context.Context, lb *model.LoadBalancer) error
	// PutNodeStatus records what one node's agent reports for an existing
	// LoadBalancer: it replaces that node's entry in Status.Nodes and
	// leaves the other nodes' entries alone, so the agents of the active
	// and the standby node can report at the same time without reading
	// first. The summary fields follow the active node's report
	// (model.Status.WithReport); a report from a node the placement does
	// not name is dropped.
	PutNodeStatus(ctx context.Context, uuid string, report model.NodeStatus) error
	Delete(ctx context.Context, uuid string) error
	// Watch first replays every stored LoadBalancer as an EventPut, then
	// sends each change, until ctx ends (the channel is then closed).
	// A slow reader never blocks writers: intermediate events for one
	// UUID may be coalesced, the last state always arrives.
	Watch(ctx context.Context) (<-chan Event, error)
	Close() error
}

// NodeStatusBatcher is implemented by a store that can record many
// reports in one write: an agent that applied hundreds of load balancers
// at once (a shard's cold start) reports them together instead of paying
// one transaction (a disk sync) each. PutNodeStatuses applies each report
// as PutNodeStatus would and returns the UUIDs it found no LoadBalancer
// for; on error nothing was recorded.
type NodeStatusBatcher interface {
	PutNodeStatuses(ctx context.Context, reports map[string]model.NodeStatus) (missing []string, err error)
}

// MemberWriter is implemented by a store that can make a change of pool
// members visible before it is durable (the embedded store). Members are
// derived from EndpointSlices, which a restart reads again, so losing
// the last few in a crash loses nothing; a disk sync on the way of every
// endpoint change was the largest part of it. PutMembers is PutSpec for
// an lb that differs from the stored one in its pools' members alone; it
// falls back to PutSpec's durable write for anything else (addresses,
// placement, listeners, a new load balancer). Every later write, read and
// Close sees the change, and writes it first if it is still pending.
type MemberWriter interface {
	PutMembers(ctx context.Context, lb *model.LoadBalancer) error
}

// ConcurrentWriter is implemented by a store whose writes are worth
// running several at once: each write over the network waits a round
// trip, so one at a time bounds a cold start of thousands of load
// balancers by the API server's latency rather than by its rate.
// WriteConcurrency is how many of its PutSpec calls may run at once.
type ConcurrentWriter interface {
	WriteConcurrency() int
}

// Creator is implemented by a store that writes a new load balancer
// cheaper when told it is new: the Kubernetes store then skips the read
// PutSpec makes of an object it has not seen (a GET answered 404 before
// every create, half of a cold start's requests). CreateSpec is PutSpec
// for an lb the caller believes is not stored; if it is, CreateSpec does
// what PutSpec would.
type Creator interface {
	CreateSpec(ctx context.Context, lb *model.LoadBalancer) error
}

// EventType says what happened to a LoadBalancer.
type EventType string

const (
	EventPut    EventType = "PUT"
	EventDelete EventType = "DELETE"
)

// Event is one change. For EventDelete, LoadBalancer holds the last
// stored value.
type Event struct {
	Type         EventType
	LoadBalancer *model.LoadBalancer
}
