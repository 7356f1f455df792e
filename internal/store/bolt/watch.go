package bolt

import (
	"context"
	"errors"
	"fmt"
	"sync"

	bbolt "go.etcd.io/bbolt"

	"pier.dev/pier/internal/store"
)

// change is one pending event. It keeps the encoded object and is decoded
// by the watcher's own goroutine, so writers never pay for readers and
// every reader gets its own copy.
type change struct {
	typ store.EventType
	raw []byte
}

// watcher buffers changes for one reader. Memory is bounded by the number
// of UUIDs, not the number of writes: a UUID has at most two pending
// changes, [PUT], [DELETE] or [DELETE, PUT]. A DELETE is never folded into
// a later PUT, so a reader that keeps per-object state (an agent's HAProxy
// folder, IPAM) always learns that the old object went away.
type watcher struct {
	mu      sync.Mutex
	queue   []string // UUIDs in the order their oldest pending change arrived
	pending map[string][]change
	wake    chan struct{} // 1-slot: "something is pending"
	out     chan store.Event
}

func newWatcher() *watcher {
	return &watcher{
		pending: map[string][]change{},
		wake:    make(chan struct{}, 1),
		out:     make(chan store.Event),
	}
}

// push queues c for uuid, coalescing with what is already pending. It never
// blocks on the reader.
func (w *watcher) push(uuid string, c change) {
	w.mu.Lock()
	cs, ok := w.pending[uuid]
	switch {
	case !ok:
		w.queue = append(w.queue, uuid)
		cs = []change{c}
	case c.typ == store.EventPut && cs[len(cs)-1].typ == store.EventDelete:
		cs = append(cs, c)
	default:
		// PUT after PUT, or DELETE after PUT: the newer state replaces it.
		cs[len(cs)-1] = c
		if len(cs) == 2 && cs[0].typ == store.EventDelete && cs[1].typ == store.EventDelete {
			// Recreated and deleted again unseen: one DELETE says it all.
			cs = cs[1:]
		}
	}
	w.pending[uuid] = cs
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// pop takes the oldest pending change. A UUID with [DELETE, PUT] stays at
// the head of the queue so that its PUT follows its DELETE.
func (w *watcher) pop() (change, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.queue) == 0 {
		return change{}, false
	}
	uuid := w.queue[0]
	cs := w.pending[uuid]
	c := cs[0]
	if len(cs) > 1 {
		w.pending[uuid] = cs[1:]
		return c, true
	}
	delete(w.pending, uuid)
	w.queue[0] = ""
	w.queue = w.queue[1:]
	return c, true
}

func (w *watcher) run(ctx context.Context) {
	defer close(w.out)
	for {
		c, ok := w.pop()
		if !ok {
			select {
			case <-ctx.Done():
				return
			case <-w.wake:
				continue
			}
		}
		lb, err := decode(c.raw)
		if err != nil {
			// Bytes we marshalled ourselves; failing here is a bug.
			panic("bolt: " + err.Error())
		}
		select {
		case w.out <- store.Event{Type: c.typ, LoadBalancer: lb}:
		case <-ctx.Done():
			return
		}
	}
}

// notify hands a committed change to every watcher. Callers hold s.mu.
func (s *Store) notify(uuid string, typ store.EventType, raw []byte) {
	for w := range s.watchers {
		w.push(uuid, change{typ: typ, raw: raw})
	}
}

// Watch replays every stored LoadBalancer as a PUT, in UUID order, then
// sends each change until ctx ends or the store is closed; the channel is
// then closed.
func (s *Store) Watch(ctx context.Context) (<-chan store.Event, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, errors.New("watch: store is closed")
	}
	w := newWatcher()
	err := s.db.View(func(tx *bbolt.Tx) error {
		return tx.Bucket(bucketLBs).ForEach(func(k, raw []byte) error {
			w.push(string(k), change{typ: store.EventPut, raw: append([]byte(nil), raw...)})
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("watch: replay: %w", err)
	}
	wctx, cancel := context.WithCancel(ctx)
	s.watchers[w] = cancel
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		w.run(wctx)
		s.mu.Lock()
		delete(s.watchers, w)
		s.mu.Unlock()
		cancel()
	}()
	return w.out, nil
}
