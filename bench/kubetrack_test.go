package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/netnsdo"
	"pier.dev/pier/internal/store"
	kubestore "pier.dev/pier/internal/store/kube"
)

// kubeTracker follows, from the benchmark's side, what pier wrote: every
// Ingress's status (an informer) and every LoadBalancer (a watch through
// pier's own kube store, so each event is the model an agent reads). It
// is one more watcher of each, beside the agents' and the controllers'.
type kubeTracker struct {
	mu       sync.Mutex
	statusAt map[string]time.Time // Ingress namespace/name → when status.loadBalancer first held an address
	lbs      map[string]*model.LoadBalancer
	lbAt     map[string]time.Time // uuid → when its newest event arrived
	bySource map[string]string    // Ingress namespace/name → uuid
	lastLB   time.Time            // the newest LoadBalancer event of all
}

func (w *kubeWorld) track(t *testing.T) *kubeTracker {
	t.Helper()
	k := &kubeTracker{statusAt: map[string]time.Time{}, lbs: map[string]*model.LoadBalancer{},
		lbAt: map[string]time.Time{}, bySource: map[string]string{}}
	ctx, cancel := context.WithCancel(context.Background())
	factory := informers.NewSharedInformerFactory(w.cs, 0)
	inf := factory.Networking().V1().Ingresses().Informer()
	seen := func(obj any) {
		ing, ok := obj.(*networkingv1.Ingress)
		if !ok || len(ing.Status.LoadBalancer.Ingress) == 0 {
			return
		}
		at := time.Now()
		k.mu.Lock()
		if _, done := k.statusAt[ing.Namespace+"/"+ing.Name]; !done {
			k.statusAt[ing.Namespace+"/"+ing.Name] = at
		}
		k.mu.Unlock()
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: seen, UpdateFunc: func(_, o any) { seen(o) }}); err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	// Shutdown waits for the informer, which ends with ctx.
	t.Cleanup(func() { cancel(); factory.Shutdown() })
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("ingress informer did not sync")
	}
	st, err := kubestore.New(w.cfg, kubestore.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	w.must(err)
	t.Cleanup(func() { st.Close() })
	events, err := st.Watch(ctx)
	w.must(err)
	go func() {
		for ev := range events {
			k.apply(ev, time.Now())
		}
	}()
	return k
}

func (k *kubeTracker) apply(ev store.Event, at time.Time) {
	lb := ev.LoadBalancer
	k.mu.Lock()
	defer k.mu.Unlock()
	k.lastLB, k.lbAt[lb.UUID] = at, at
	if ev.Type == store.EventDelete {
		delete(k.lbs, lb.UUID)
		return
	}
	k.lbs[lb.UUID] = lb
	for _, s := range lb.Sources {
		k.bySource[s.Key()] = lb.UUID
	}
}

// statuses counts the names whose Ingress has its status.
func (k *kubeTracker) statuses(names []string) (n int, last time.Time) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, name := range names {
		if at, ok := k.statusAt[name]; ok {
			n++
			if at.After(last) {
				last = at
			}
		}
	}
	return n, last
}

// progress counts the LoadBalancers stored and those that both their
// nodes serve, at their current spec.
func (k *kubeTracker) progress() (stored, servedBoth int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, lb := range k.lbs {
		stored++
		if servedEverywhere(lb) {
			servedBoth++
		}
	}
	return stored, servedBoth
}

// notServed names up to n LoadBalancers that are not yet served
// everywhere, each with its placement and every node's report (state and
// whether it is at the current spec): what a cold start that ran out of
// time was still waiting for.
func (k *kubeTracker) notServed(n int) string {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []string
	for _, lb := range k.lbs {
		if servedEverywhere(lb) {
			continue
		}
		if len(out) == n {
			out = append(out, "…")
			break
		}
		want := lb.SpecHash()
		var reports []string
		for _, r := range lb.Status.Nodes {
			reports = append(reports, fmt.Sprintf("%s %s current=%v", r.Node, r.State, r.SpecHash == want))
		}
		out = append(out, fmt.Sprintf("%s (%s, active %s, standby %s, reports [%s])", lb.Name, lb.UUID,
			lb.Placement.Active, lb.Placement.Standby, strings.Join(reports, ", ")))
	}
	sort.Strings(out)
	return strings.Join(out, "; ")
}

// servedEverywhere: every node the LoadBalancer is placed on reports it
// ACTIVE at its current spec.
func servedEverywhere(lb *model.LoadBalancer) bool {
	want := lb.SpecHash()
	for _, node := range []string{lb.Placement.Active, lb.Placement.Standby} {
		if node == "" {
			continue
		}
		r, ok := lb.Status.Report(node)
		if !ok || r.State != model.StateActive || r.SpecHash != want {
			return false
		}
	}
	return lb.Placement.Active != ""
}

func (k *kubeTracker) lastEvent() time.Time {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.lastLB
}

// lbOf is the LoadBalancer serving Ingress namespace/name, or nil.
func (k *kubeTracker) lbOf(ingress string) *model.LoadBalancer {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.lbs[k.bySource[ingress]]
}

// waitLB waits until the LoadBalancer serving ingress satisfies cond and
// returns it with the time the event that satisfied it arrived.
func (k *kubeTracker) waitLB(t *testing.T, ingress string, limit time.Duration, cond func(*model.LoadBalancer) bool) (*model.LoadBalancer, time.Time) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		k.mu.Lock()
		uuid := k.bySource[ingress]
		lb, at := k.lbs[uuid], k.lbAt[uuid]
		k.mu.Unlock()
		if lb != nil && cond(lb) {
			return lb, at
		}
		if time.Now().After(deadline) {
			t.Fatalf("load balancer of %s: not as expected within %s (now %+v)", ingress, limit, lb)
		}
		time.Sleep(time.Millisecond)
	}
}

// waitStatus waits until Ingress namespace/name has its status and
// returns when it first did.
func (k *kubeTracker) waitStatus(t *testing.T, ingress string, limit time.Duration) time.Time {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		k.mu.Lock()
		at, ok := k.statusAt[ingress]
		k.mu.Unlock()
		if ok {
			return at
		}
		if time.Now().After(deadline) {
			t.Fatalf("ingress %s: no status within %s", ingress, limit)
		}
		time.Sleep(time.Millisecond)
	}
}

// nsClient is an HTTP client whose connections are made inside network
// namespace ns (a lab node): a request to a VIP there reaches that
// node's own HAProxy.
func nsClient(ns string) *http.Client {
	return &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			var conn net.Conn
			err := netnsdo.Do(ns, func() error {
				d := net.Dialer{Timeout: time.Second}
				var err error
				conn, err = d.DialContext(ctx, network, addr)
				return err
			})
			return conn, err
		}}}
}

// withoutStatus describes up to n of the names whose Ingress has no
// status yet: their load balancer's placement and the nodes' reports.
func (k *kubeTracker) withoutStatus(names []string, n int) string {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []string
	for _, name := range names {
		if _, ok := k.statusAt[name]; ok {
			continue
		}
		if len(out) == n {
			out = append(out, "…")
			break
		}
		lb := k.lbs[k.bySource[name]]
		if lb == nil {
			out = append(out, name+" (no load balancer)")
			continue
		}
		var reports []string
		for _, r := range lb.Status.Nodes {
			reports = append(reports, fmt.Sprintf("%s %s", r.Node, r.State))
		}
		out = append(out, fmt.Sprintf("%s (%s, active %s, standby %s, reports [%s])", name, lb.UUID, lb.Placement.Active, lb.Placement.Standby, strings.Join(reports, ", ")))
	}
	return strings.Join(out, "; ")
}
