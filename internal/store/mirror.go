package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"pier.dev/pier/internal/model"
)

// Reader is the read half of a Store: what the API and the web view use.
// Values a Reader returns may be shared with other callers (a Mirror's
// are): a caller must not modify them.
type Reader interface {
	Get(ctx context.Context, uuid string) (*model.LoadBalancer, error)
	// List returns every LoadBalancer, sorted by UUID.
	List(ctx context.Context) ([]*model.LoadBalancer, error)
}

// SourceIndex is implemented by a Reader that finds the load balancers
// serving one object without reading all of them: the API answers one
// Ingress or Gateway per request, and a bench or a dashboard polls each
// of thousands.
type SourceIndex interface {
	// BySource returns the load balancers one of whose sources is ref,
	// sorted by UUID.
	BySource(ctx context.Context, ref model.ObjectRef) ([]*model.LoadBalancer, error)
}

// Mirror is an in-memory copy of a Store, kept by the store's watch and
// indexed by source. It serves reads without a store round trip or a
// decode per object: reading one Ingress's load balancers from the
// embedded store decoded every stored load balancer (tens of
// milliseconds at 3,000), and from the Kubernetes store listed them all
// from the API server. What it returns is shared and read-only.
//
// Until Run has read the store once, and while its watch is lost, reads
// go to the store itself. Otherwise a Mirror lags the store by the
// delivery of its watch: a caller that must see its own write reads the
// Store.
type Mirror struct {
	store  Store
	logger *slog.Logger

	mu       sync.RWMutex
	synced   bool
	byUUID   map[string]*model.LoadBalancer
	bySource map[model.ObjectRef]map[string]*model.LoadBalancer
}

// NewMirror returns a Mirror of st; Run fills and keeps it.
func NewMirror(st Store, logger *slog.Logger) *Mirror {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Mirror{store: st, logger: logger}
}

// Run keeps the mirror until ctx ends. When the store cannot be watched
// (the API server unreachable, the watch closed) it logs why, serves reads
// from the store meanwhile, and watches again after a backoff: the mirror
// is an optimisation, never a reason to stop.
func (m *Mirror) Run(ctx context.Context) {
	delay := mirrorRetryMin
	for ctx.Err() == nil {
		synced, err := m.follow(ctx)
		if ctx.Err() != nil {
			return
		}
		m.unsync()
		if synced {
			delay = mirrorRetryMin
		}
		m.logger.Warn("load balancer mirror lost its watch; reads go to the store until it is back",
			"err", err, "retry_in", delay)
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}
		delay = min(2*delay, mirrorRetryMax)
	}
}

// Backoff between watches of a Mirror's store.
const (
	mirrorRetryMin = time.Second
	mirrorRetryMax = 30 * time.Second
)

// follow watches the store and applies every change until ctx ends or the
// watch closes; synced says whether it got as far as a whole copy.
func (m *Mirror) follow(ctx context.Context) (synced bool, err error) {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	events, err := m.store.Watch(wctx)
	if err != nil {
		return false, fmt.Errorf("watch store: %w", err)
	}
	// The watch replays every stored load balancer first; the List makes
	// the mirror whole at once instead of one replayed event at a time.
	// A replayed event older than the List only repeats what the events
	// after it bring again.
	lbs, err := m.store.List(wctx)
	if err != nil {
		return false, fmt.Errorf("list load balancers: %w", err)
	}
	m.reset(lbs)
	for {
		select {
		case <-ctx.Done():
			return true, nil
		case ev, ok := <-events:
			if !ok {
				return true, errors.New("the store's watch closed")
			}
			m.apply(ev)
		}
	}
}

func (m *Mirror) reset(lbs []*model.LoadBalancer) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.byUUID = make(map[string]*model.LoadBalancer, len(lbs))
	m.bySource = map[model.ObjectRef]map[string]*model.LoadBalancer{}
	for _, lb := range lbs {
		m.put(lb)
	}
	m.synced = true
}

func (m *Mirror) unsync() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.synced, m.byUUID, m.bySource = false, nil, nil
}

func (m *Mirror) apply(ev Event) {
	if ev.LoadBalancer == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.remove(ev.LoadBalancer.UUID)
	if ev.Type == EventPut {
		m.put(ev.LoadBalancer)
	}
}

// put adds lb under its UUID and its sources (m.mu held; the UUID not
// present).
func (m *Mirror) put(lb *model.LoadBalancer) {
	m.byUUID[lb.UUID] = lb
	for _, src := range lb.Sources {
		ref := src.Ref()
		if m.bySource[ref] == nil {
			m.bySource[ref] = map[string]*model.LoadBalancer{}
		}
		m.bySource[ref][lb.UUID] = lb
	}
}

// remove drops uuid and its index entries (m.mu held).
func (m *Mirror) remove(uuid string) {
	old, ok := m.byUUID[uuid]
	if !ok {
		return
	}
	delete(m.byUUID, uuid)
	for _, src := range old.Sources {
		ref := src.Ref()
		delete(m.bySource[ref], uuid)
		if len(m.bySource[ref]) == 0 {
			delete(m.bySource, ref)
		}
	}
}

// Synced reports whether reads come from the mirror (it holds a whole
// copy and follows the store's watch) rather than from the store.
func (m *Mirror) Synced() bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.synced
}

// Get returns the load balancer with the given UUID.
func (m *Mirror) Get(ctx context.Context, uuid string) (*model.LoadBalancer, error) {
	m.mu.RLock()
	if !m.synced {
		m.mu.RUnlock()
		return m.store.Get(ctx, uuid)
	}
	lb, ok := m.byUUID[uuid]
	m.mu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("get %s: %w", uuid, ErrNotFound)
	}
	return lb, nil
}

// List returns every load balancer, sorted by UUID.
func (m *Mirror) List(ctx context.Context) ([]*model.LoadBalancer, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.RLock()
	if !m.synced {
		m.mu.RUnlock()
		return m.store.List(ctx)
	}
	out := slices.Collect(maps.Values(m.byUUID))
	m.mu.RUnlock()
	return sortedByUUID(out), nil
}

// BySource returns the load balancers one of whose sources is ref.
func (m *Mirror) BySource(ctx context.Context, ref model.ObjectRef) ([]*model.LoadBalancer, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.RLock()
	if !m.synced {
		m.mu.RUnlock()
		return ListBySource(ctx, m.store, ref)
	}
	out := slices.Collect(maps.Values(m.bySource[ref]))
	m.mu.RUnlock()
	return sortedByUUID(out), nil
}

// ListBySource is BySource for any Reader: through its SourceIndex if it
// has one, else by reading every load balancer.
func ListBySource(ctx context.Context, r Reader, ref model.ObjectRef) ([]*model.LoadBalancer, error) {
	if idx, ok := r.(SourceIndex); ok {
		return idx.BySource(ctx, ref)
	}
	lbs, err := r.List(ctx)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(lbs, func(lb *model.LoadBalancer) bool {
		return !slices.ContainsFunc(lb.Sources, func(s model.Source) bool { return s.Ref() == ref })
	}), nil
}

func sortedByUUID(lbs []*model.LoadBalancer) []*model.LoadBalancer {
	slices.SortFunc(lbs, func(a, b *model.LoadBalancer) int { return strings.Compare(a.UUID, b.UUID) })
	return lbs
}
