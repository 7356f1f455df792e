package kube

import (
	"context"
	"sync"

	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/store"
)

// watcher buffers events for one reader, the same discipline as the bolt
// store's: memory is bounded by the number of UUIDs, not of changes, since a
// UUID has at most [PUT], [DELETE] or [DELETE, PUT] pending. A DELETE is
// never folded into a later PUT, so a reader that keeps per-object state
// (an agent's HAProxy folder, IPAM) always learns the old object went away.
// The pushed values belong to this watcher alone (each watch decodes its
// own), so readers get copies nobody else holds.
type watcher struct {
	mu      sync.Mutex
	queue   []string // UUIDs in the order their oldest pending event arrived
	pending map[string][]store.Event
	wake    chan struct{} // 1-slot: "something is pending"
	out     chan store.Event
}

func newWatcher() *watcher {
	return &watcher{
		pending: map[string][]store.Event{},
		wake:    make(chan struct{}, 1),
		out:     make(chan store.Event),
	}
}

// push queues an event, coalescing with what is pending. It never blocks
// on the reader.
func (w *watcher) push(typ store.EventType, lb *model.LoadBalancer) {
	ev := store.Event{Type: typ, LoadBalancer: lb}
	w.mu.Lock()
	evs, ok := w.pending[lb.UUID]
	switch {
	case !ok:
		w.queue = append(w.queue, lb.UUID)
		evs = []store.Event{ev}
	case typ == store.EventPut && evs[len(evs)-1].Type == store.EventDelete:
		evs = append(evs, ev)
	default:
		// PUT after PUT, or DELETE after PUT: the newer state replaces it.
		evs[len(evs)-1] = ev
		if len(evs) == 2 && evs[0].Type == store.EventDelete && evs[1].Type == store.EventDelete {
			evs = evs[1:] // recreated and deleted again unseen: one DELETE says it all
		}
	}
	w.pending[lb.UUID] = evs
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// pop takes the oldest pending event. A UUID with [DELETE, PUT] stays at the
// head of the queue so that its PUT follows its DELETE.
func (w *watcher) pop() (store.Event, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.queue) == 0 {
		return store.Event{}, false
	}
	uuid := w.queue[0]
	evs := w.pending[uuid]
	ev := evs[0]
	if len(evs) > 1 {
		w.pending[uuid] = evs[1:]
		return ev, true
	}
	delete(w.pending, uuid)
	w.queue[0] = ""
	w.queue = w.queue[1:]
	return ev, true
}

// deliver hands queued events to the reader until ctx ends, then closes
// the channel.
func (w *watcher) deliver(ctx context.Context) {
	defer close(w.out)
	for {
		ev, ok := w.pop()
		if !ok {
			select {
			case <-ctx.Done():
				return
			case <-w.wake:
				continue
			}
		}
		select {
		case w.out <- ev:
		case <-ctx.Done():
			return
		}
	}
}
