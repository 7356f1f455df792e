package kube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"

	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/store"
)

// Watch timing. The server ends each watch after a random 5–10 minutes
// (like client-go's reflector) so that no connection lives forever behind a
// load balancer; bookmarks keep our resourceVersion fresh in between.
const (
	minWatchTimeout = 5 * time.Minute
	retryMin        = 100 * time.Millisecond
	retryMax        = 5 * time.Second
)

// selectorCheck is how often a node's watch looks again for load balancers
// without placement labels (written by an older controller, during an
// upgrade or a rollback): one request of at most one object a minute per
// agent. Tests shorten it.
var selectorCheck = time.Minute

// errSelectorChanged ends a watch whose label selector no longer fits:
// follow re-lists with the new one.
var errSelectorChanged = errors.New("placement labels changed how this node must watch")

// follower is one Watch's list+watch loop. known holds what the reader has
// been sent (queued) per UUID, encoded: it turns a re-list into the exact
// PUTs and DELETEs missed, and suppresses writes that change nothing the
// model shows (resourceVersion-only updates, the initial status write).
//
// selector narrows the list and the watch to the load balancers placed on
// the store's node ("" for every one; watchSelector decides). staleSeen
// keeps it "" for good once labels were found stale: only a writer that
// does not keep them leaves them so, and the node cannot see where such a
// writer moves a load balancer to.
type follower struct {
	s         *Store
	w         *watcher
	rv        string
	known     map[string]string
	selector  string
	staleSeen bool
}

// Watch replays every LoadBalancer as a PUT, in UUID order, then sends each
// change until ctx ends or the store is closed; the channel is then closed.
// The first List happens before Watch returns, so a missing CRD or RBAC
// rule is an error here. Afterwards the watch survives API server restarts
// and expired resourceVersions: it re-watches, or re-lists and sends the
// difference (a DELETE carrying the last value it sent for objects that went
// away unseen).
//
// With Options.Node, the watch replays and follows only the load balancers
// placed on that node, by their placement labels, while every object has
// them; a load balancer whose placement no longer names the node arrives as
// a DELETE. Until then, and again whenever an object without them appears,
// it follows every load balancer.
func (s *Store) Watch(ctx context.Context) (<-chan store.Event, error) {
	f := &follower{s: s, w: newWatcher(), known: map[string]string{}}
	selector, err := s.watchSelector(ctx)
	if err != nil {
		return nil, fmt.Errorf("watch: %w", err)
	}
	f.useSelector(selector)
	if err := f.relist(ctx); err != nil {
		return nil, fmt.Errorf("watch: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, errors.New("watch: store is closed")
	}
	wctx, cancel := context.WithCancel(ctx)
	s.watchers[f.w] = cancel
	s.wg.Add(2)
	go func() {
		defer s.wg.Done()
		f.w.deliver(wctx)
	}()
	go func() {
		defer s.wg.Done()
		f.follow(wctx)
		s.mu.Lock()
		delete(s.watchers, f.w)
		s.mu.Unlock()
		cancel()
	}()
	return f.w.out, nil
}

// follow watches from f.rv until ctx ends, re-listing when the server says
// the resourceVersion is too old and backing off while it is unreachable.
func (f *follower) follow(ctx context.Context) {
	delay := retryMin
	for ctx.Err() == nil {
		progressed, err := f.watchOnce(ctx)
		if ctx.Err() != nil {
			return
		}
		if progressed {
			delay = retryMin
		}
		if errors.Is(err, errSelectorChanged) {
			err = f.relist(ctx)
			if err == nil {
				delay = retryMin
				continue
			}
		}
		if expired(err) {
			f.s.log.Info("load balancer watch expired; re-listing", "resourceVersion", f.rv, "err", err)
			err = f.relist(ctx)
			if err == nil {
				delay = retryMin
				continue
			}
		}
		if err != nil {
			f.s.log.Warn("load balancer watch failed; retrying", "resourceVersion", f.rv, "retryIn", delay, "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay + rand.N(delay/2+1)):
		}
		delay = min(2*delay, retryMax)
	}
}

func expired(err error) bool {
	return apierrors.IsResourceExpired(err) || apierrors.IsGone(err)
}

// watchOnce runs one watch request until it ends. progressed reports
// whether it delivered anything (then the connection was healthy).
func (f *follower) watchOnce(ctx context.Context) (progressed bool, err error) {
	timeout := int64((minWatchTimeout + rand.N(minWatchTimeout)).Seconds())
	wi, err := f.s.client.Watch(ctx, metav1.ListOptions{
		ResourceVersion:     f.rv,
		AllowWatchBookmarks: true,
		TimeoutSeconds:      &timeout,
		LabelSelector:       f.selector,
	})
	if err != nil {
		return false, err
	}
	defer wi.Stop()
	var check <-chan time.Time
	if f.s.opts.Node != "" {
		t := time.NewTicker(selectorCheck)
		defer t.Stop()
		check = t.C
	}
	for {
		select {
		case <-ctx.Done():
			return progressed, nil
		case <-check:
			if f.staleSeen {
				continue
			}
			selector, err := f.s.watchSelector(ctx)
			if err != nil {
				f.s.log.Warn("cannot check the load balancers' placement labels; watching as before", "err", err)
				continue
			}
			if selector != f.selector {
				f.useSelector(selector)
				return progressed, errSelectorChanged
			}
		case ev, ok := <-wi.ResultChan():
			if !ok {
				return progressed, nil // server timeout or a broken connection: re-watch
			}
			if ev.Type == watch.Error {
				return progressed, apierrors.FromObject(ev.Object)
			}
			u, isObj := ev.Object.(*unstructured.Unstructured)
			if !isObj {
				return progressed, fmt.Errorf("unexpected %T in %s event", ev.Object, ev.Type)
			}
			progressed = true
			f.rv = u.GetResourceVersion()
			f.apply(ev.Type, u)
			if f.selector != "" && ev.Type == watch.Modified && !f.s.placedHere(u) {
				// The node's label outlived its placement: a controller
				// that does not keep the labels moved the load balancer.
				// Where it went, that node's agent does not see it.
				f.s.log.Warn("a load balancer's placement labels are stale (written by an older controller?); watching every load balancer until this agent restarts",
					"uuid", u.GetName())
				f.staleSeen = true
				f.useSelector("")
				return progressed, errSelectorChanged
			}
		}
	}
}

// useSelector sets the label selector of the next list and watch, and
// says so when it changes what the node follows.
func (f *follower) useSelector(selector string) {
	if f.s.opts.Node == "" || (selector == f.selector && f.rv != "") {
		return
	}
	f.selector = selector
	if selector == "" {
		f.s.log.Info("this node watches every load balancer: some have no placement labels, or stale ones (written by an older controller)",
			"node", f.s.opts.Node)
		return
	}
	f.s.log.Info("every load balancer has placement labels; this node watches only those placed on it",
		"node", f.s.opts.Node, "labelSelector", selector)
}

func (f *follower) apply(typ watch.EventType, u *unstructured.Unstructured) {
	switch typ {
	case watch.Added, watch.Modified:
		if f.s.placedHere(u) {
			f.s.cache.offer(u)
		} else {
			f.s.cache.refresh(u)
		}
		f.put(u)
	case watch.Deleted:
		f.s.cache.forget(u.GetName())
		f.remove(u)
	case watch.Bookmark:
		// only the resourceVersion, taken above
	}
}

// relist lists every object and queues what differs from known: PUTs for
// new or changed objects in UUID order, DELETEs for those gone.
func (f *follower) relist(ctx context.Context) error {
	items, rv, err := f.s.list(ctx, f.selector)
	if err != nil {
		return fmt.Errorf("list: %w", err)
	}
	seen := make(map[string]bool, len(items))
	for _, u := range items {
		seen[u.GetName()] = true
		if f.s.placedHere(u) {
			f.s.cache.offer(u)
		}
		f.put(u)
	}
	for uuid, last := range f.known {
		if seen[uuid] {
			continue
		}
		lb, err := decodeKnown(last)
		if err != nil {
			f.s.log.Error("cannot report deleted load balancer", "uuid", uuid, "err", err)
			continue
		}
		delete(f.known, uuid)
		f.w.push(store.EventDelete, lb)
	}
	f.rv = rv
	return nil
}

func (f *follower) put(u *unstructured.Unstructured) {
	lb, err := decode(u)
	if err != nil {
		f.s.log.Error("skipping undecodable load balancer", "uuid", u.GetName(), "err", err)
		return
	}
	key := fullKey(lb)
	if f.known[lb.UUID] == key {
		return
	}
	f.known[lb.UUID] = key
	f.w.push(store.EventPut, lb)
}

// remove queues a DELETE carrying the object's final state, as the server
// sent it with the event.
func (f *follower) remove(u *unstructured.Unstructured) {
	lb, err := decode(u)
	if err != nil {
		last, ok := f.known[u.GetName()]
		if !ok {
			return // never sent, nothing to retract
		}
		if lb, err = decodeKnown(last); err != nil {
			f.s.log.Error("cannot report deleted load balancer", "uuid", u.GetName(), "err", err)
			return
		}
	}
	delete(f.known, lb.UUID)
	f.w.push(store.EventDelete, lb)
}

func decodeKnown(key string) (*model.LoadBalancer, error) {
	var lb model.LoadBalancer
	if err := json.Unmarshal([]byte(key), &lb); err != nil {
		return nil, fmt.Errorf("decode last known value: %w", err)
	}
	return &lb, nil
}
