package kube

import (
	"context"

	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/store"
)

// watcher feeds one reader through a store.Queue. The pushed values
// belong to this watcher alone (each watch decodes its own), so readers
// get copies nobody else holds.
type watcher struct {
	q   *store.Queue[*model.LoadBalancer]
	out chan store.Event
}

func newWatcher() *watcher {
	return &watcher{q: store.NewQueue[*model.LoadBalancer](), out: make(chan store.Event)}
}

// push queues an event; it never blocks on the reader.
func (w *watcher) push(typ store.EventType, lb *model.LoadBalancer) { w.q.Push(lb.UUID, typ, lb) }

// deliver hands queued events to the reader until ctx ends, then closes
// the channel.
func (w *watcher) deliver(ctx context.Context) {
	defer close(w.out)
	for {
		typ, lb, ok := w.q.Pop()
		if !ok {
			select {
			case <-ctx.Done():
				return
			case <-w.q.Wake():
				continue
			}
		}
		select {
		case w.out <- store.Event{Type: typ, LoadBalancer: lb}:
		case <-ctx.Done():
			return
		}
	}
}
