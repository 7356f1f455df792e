package controller

import (
	"reflect"
	"sort"

	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/store"
)

// Index is the process's one in-memory copy of the stored load balancers.
// The store watch feeds it (Apply, with each event's payload) and the
// Reconciler records in it what it writes, so neither the reconciler nor
// the status pass reads the store again: in Kubernetes mode every List is
// an API-server LIST. It is not safe for concurrent use: the pipeline's
// goroutine owns it.
type Index struct {
	lbs map[string]*model.LoadBalancer
	// written holds the spec the reconciler last wrote, per UUID, until
	// the watch delivers it. The watch may still hold an event from
	// before that write: its spec is stale and only its status is taken,
	// so the index never goes back to a spec the store no longer has.
	written map[string]*model.LoadBalancer
	// deleted holds UUIDs the reconciler deleted until the watch confirms.
	deleted map[string]bool
}

// NewIndex returns an index holding lbs (the initial read of the store).
func NewIndex(lbs []*model.LoadBalancer) *Index {
	x := &Index{lbs: map[string]*model.LoadBalancer{}, written: map[string]*model.LoadBalancer{}, deleted: map[string]bool{}}
	for _, lb := range lbs {
		x.lbs[lb.UUID] = lb
	}
	return x
}

// Change is what a store event changed in the index.
type Change int

const (
	// Unchanged: the event told nothing new (the echo of our own write,
	// or a stale event).
	Unchanged Change = iota
	// StatusChanged: an agent's report: what Ingresses publish may
	// change, nothing needs rebuilding.
	StatusChanged
	// SpecChanged: someone else changed, created or deleted a load
	// balancer (kubectl, another leader): the next rebuild puts the store
	// back to what translation wants, as when every snapshot rebuilt.
	SpecChanged
)

// Apply takes one store event's payload into the index.
func (x *Index) Apply(ev store.Event) Change {
	lb := ev.LoadBalancer
	if lb == nil {
		return Unchanged
	}
	old := x.lbs[lb.UUID]
	if ev.Type == store.EventDelete {
		delete(x.deleted, lb.UUID)
		delete(x.written, lb.UUID)
		if old == nil {
			return Unchanged // ours: remove already took it out
		}
		delete(x.lbs, lb.UUID)
		return SpecChanged
	}
	if x.deleted[lb.UUID] {
		return Unchanged // from before our delete; its DELETE follows
	}
	next := lb
	switch w := x.written[lb.UUID]; {
	case w != nil && unchanged(w, lb):
		delete(x.written, lb.UUID) // the echo of our write
	case w != nil:
		next = w.Clone()
		next.Status = lb.Status
		if next.CreatedAt.IsZero() {
			next.CreatedAt = lb.CreatedAt
		}
	case old == nil || !unchanged(old, lb):
		x.lbs[lb.UUID] = next
		return SpecChanged
	}
	x.lbs[lb.UUID] = next
	if old == nil || !reflect.DeepEqual(old.Status, next.Status) {
		return StatusChanged
	}
	return Unchanged
}

// put records a spec the reconciler wrote. As the store does, it keeps
// the status agents reported and the creation time of the first write.
// The index keeps lb itself: the caller hands over a copy of its own
// (prepare's), which it only reads afterwards. The index never changes a
// load balancer it holds (Apply replaces them), so the written spec and
// the held one can be the same object: a copy of a group's load balancer
// of a hundred Ingresses costs milliseconds.
func (x *Index) put(lb *model.LoadBalancer) {
	next := lb
	if old := x.lbs[lb.UUID]; old != nil {
		next.Status = old.Status
		if !old.CreatedAt.IsZero() {
			next.CreatedAt = old.CreatedAt
		}
	} else if next.Status.State == "" {
		next.Status.State = model.StatePending
	}
	delete(x.deleted, lb.UUID)
	x.written[lb.UUID] = next
	x.lbs[lb.UUID] = next
}

// remove records a delete the reconciler made.
func (x *Index) remove(uuid string) {
	delete(x.lbs, uuid)
	delete(x.written, uuid)
	x.deleted[uuid] = true
}

// Len is the number of load balancers held.
func (x *Index) Len() int { return len(x.lbs) }

// ByUUID returns the load balancers by UUID. The values are the index's
// own: callers must not modify them.
func (x *Index) ByUUID() map[string]*model.LoadBalancer { return x.lbs }

// List returns the load balancers sorted by UUID, as store.List does.
// The values are the index's own: callers must not modify them.
func (x *Index) List() []*model.LoadBalancer {
	out := make([]*model.LoadBalancer, 0, len(x.lbs))
	for _, lb := range x.lbs {
		out = append(out, lb)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].UUID < out[j].UUID })
	return out
}
