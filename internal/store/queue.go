package store

import "sync"

// Queue buffers the changes of one watcher between writers, who must never
// block, and a reader of any speed. Memory is bounded by the number of
// UUIDs, not of writes: a UUID has at most [PUT], [DELETE] or [DELETE, PUT]
// pending. A DELETE is never folded into a later PUT, so a reader that
// keeps per-object state (an agent's HAProxy folder, IPAM) always learns
// that the old object went away. Both Store implementations use it; T is
// whatever a store keeps per change (encoded bytes, a decoded object).
type Queue[T any] struct {
	mu      sync.Mutex
	order   []string // UUIDs in the order their oldest pending change arrived
	pending map[string][]queued[T]
	wake    chan struct{} // 1 slot: "something is pending"
}

type queued[T any] struct {
	typ EventType
	v   T
}

// NewQueue returns an empty Queue.
func NewQueue[T any]() *Queue[T] {
	return &Queue[T]{pending: map[string][]queued[T]{}, wake: make(chan struct{}, 1)}
}

// Push queues a change of uuid, coalescing with what is pending. It never
// blocks.
func (q *Queue[T]) Push(uuid string, typ EventType, v T) {
	c := queued[T]{typ: typ, v: v}
	q.mu.Lock()
	cs, ok := q.pending[uuid]
	switch {
	case !ok:
		q.order = append(q.order, uuid)
		cs = []queued[T]{c}
	case typ == EventPut && cs[len(cs)-1].typ == EventDelete:
		cs = append(cs, c)
	default:
		// PUT after PUT, or DELETE after PUT: the newer state replaces it.
		cs[len(cs)-1] = c
		if len(cs) == 2 && cs[0].typ == EventDelete && cs[1].typ == EventDelete {
			cs = cs[1:] // recreated and deleted again unseen: one DELETE says it all
		}
	}
	q.pending[uuid] = cs
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// Pop takes the oldest pending change. A UUID with [DELETE, PUT] stays at
// the head so that its PUT follows its DELETE.
func (q *Queue[T]) Pop() (EventType, T, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.order) == 0 {
		var zero T
		return "", zero, false
	}
	uuid := q.order[0]
	cs := q.pending[uuid]
	c := cs[0]
	if len(cs) > 1 {
		q.pending[uuid] = cs[1:]
		return c.typ, c.v, true
	}
	delete(q.pending, uuid)
	q.order[0] = ""
	q.order = q.order[1:]
	return c.typ, c.v, true
}

// Wake receives when something may be pending: a reader that found the
// queue empty waits on it before popping again.
func (q *Queue[T]) Wake() <-chan struct{} { return q.wake }
