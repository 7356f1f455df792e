package bolt

import (
	"context"
	"errors"
	"fmt"

	bbolt "go.etcd.io/bbolt"

	"pier.dev/pier/internal/store"
)

// watcher feeds one reader. It queues the encoded object, decoded by the
// watcher's own goroutine, so writers never pay for readers and every
// reader gets its own copy.
type watcher struct {
	q   *store.Queue[[]byte]
	out chan store.Event
}

func newWatcher() *watcher {
	return &watcher{q: store.NewQueue[[]byte](), out: make(chan store.Event)}
}

func (w *watcher) run(ctx context.Context) {
	defer close(w.out)
	for {
		typ, raw, ok := w.q.Pop()
		if !ok {
			select {
			case <-ctx.Done():
				return
			case <-w.q.Wake():
				continue
			}
		}
		lb, err := decode(raw)
		if err != nil {
			// Bytes we marshalled ourselves; failing here is a bug.
			panic("bolt: " + err.Error())
		}
		select {
		case w.out <- store.Event{Type: typ, LoadBalancer: lb}:
		case <-ctx.Done():
			return
		}
	}
}

// notify hands a committed change to every watcher. Callers hold s.mu.
func (s *Store) notify(uuid string, typ store.EventType, raw []byte) {
	for w := range s.watchers {
		w.q.Push(uuid, typ, raw)
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
			if p, ok := s.pending[string(k)]; ok {
				raw = p // what the other watchers were sent
			}
			w.q.Push(string(k), store.EventPut, append([]byte(nil), raw...))
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
