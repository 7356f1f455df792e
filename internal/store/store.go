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
	// agents own) and CreatedAt (kept from the first write).
	PutSpec(ctx context.Context, lb *model.LoadBalancer) error
	// PutStatus replaces the Status of an existing LoadBalancer.
	PutStatus(ctx context.Context, uuid string, status model.Status) error
	Delete(ctx context.Context, uuid string) error
	// Watch first replays every stored LoadBalancer as an EventPut, then
	// sends each change, until ctx ends (the channel is then closed).
	// A slow reader never blocks writers: intermediate events for one
	// UUID may be coalesced, the last state always arrives.
	Watch(ctx context.Context) (<-chan Event, error)
	Close() error
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
