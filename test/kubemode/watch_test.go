package kubemode

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
)

// write is one change of an Ingress the test saw through a watch.
type write struct {
	at     time.Time
	rv     string
	status string
}

// writeLog records every update of the namespace's Ingresses after it
// started: the test itself only creates and deletes them, so each update
// is pier's (status is all pier writes). The watch survives an API server
// restart (RetryWatcher resumes from the last resourceVersion).
type writeLog struct {
	mu      sync.Mutex
	last    map[string]write
	updates map[string][]write
}

func (e *env) recordWrites() *writeLog {
	e.t.Helper()
	ingresses := e.cs.NetworkingV1().Ingresses(e.ns)
	list, err := ingresses.List(e.t.Context(), metav1.ListOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	l := &writeLog{last: map[string]write{}, updates: map[string][]write{}}
	for _, ing := range list.Items {
		l.last[ing.Name] = write{rv: ing.ResourceVersion, status: published(&ing)}
	}
	lw := &cache.ListWatch{WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
		return ingresses.Watch(ctx, o)
	}}
	ctx, cancel := context.WithCancel(context.Background())
	w, err := watchtools.NewRetryWatcherWithContext(ctx, list.ResourceVersion, lw)
	if err != nil {
		cancel()
		e.t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			if ing, ok := ev.Object.(*networkingv1.Ingress); ok {
				l.observe(ev.Type, ing)
			}
		}
	}()
	e.t.Cleanup(func() { cancel(); w.Stop(); <-done })
	return l
}

func (l *writeLog) observe(typ watch.EventType, ing *networkingv1.Ingress) {
	l.mu.Lock()
	defer l.mu.Unlock()
	w := write{at: time.Now(), rv: ing.ResourceVersion, status: published(ing)}
	if prev, ok := l.last[ing.Name]; typ == watch.Modified && ok && prev.rv != w.rv {
		l.updates[ing.Name] = append(l.updates[ing.Name], w)
	}
	l.last[ing.Name] = w
}

// of returns the updates of Ingress name seen so far.
func (l *writeLog) of(name string) []write {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]write(nil), l.updates[name]...)
}

// waitSeen waits until the watch delivered Ingress name with status
// want: a GET can see a write before the watch does, and counting
// updates before then misses it.
func (l *writeLog) waitSeen(t testing.TB, name, want string, d time.Duration) {
	t.Helper()
	eventually(t, d, "the watch sees Ingress "+name+" publish "+want, func() error {
		l.mu.Lock()
		defer l.mu.Unlock()
		if got := l.last[name].status; got != want {
			return fmt.Errorf("last seen %q", got)
		}
		return nil
	})
}

// total counts the updates of every Ingress.
func (l *writeLog) total() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, u := range l.updates {
		n += len(u)
	}
	return n
}

// poller reads Ingresses every 100 ms and remembers every value each one
// published, and how many reads found none: flapping shows as a second
// value or an empty read.
type poller struct {
	mu     sync.Mutex
	reads  int
	errs   int
	empty  map[string]int
	values map[string]map[string]bool
	stop   func()
}

func (e *env) pollStatus(names ...string) *poller {
	p := &poller{empty: map[string]int{}, values: map[string]map[string]bool{}}
	for _, n := range names {
		p.values[n] = map[string]bool{}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			for _, n := range names {
				rctx, rcancel := context.WithTimeout(ctx, time.Second)
				ing, err := e.cs.NetworkingV1().Ingresses(e.ns).Get(rctx, n, metav1.GetOptions{})
				rcancel()
				p.record(n, ing, err)
			}
		}
	}()
	p.stop = func() { cancel(); <-done }
	e.t.Cleanup(p.stop)
	return p
}

func (p *poller) record(name string, ing *networkingv1.Ingress, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil {
		p.errs++ // the API server is down: nothing to read
		return
	}
	p.reads++
	if s := published(ing); s == "" {
		p.empty[name]++
	} else {
		p.values[name][s] = true
	}
}

// check reports, per Ingress, the values seen when more than one or any
// empty read.
func (p *poller) check() (reads int, bad map[string]string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	bad = map[string]string{}
	for name, vals := range p.values {
		if len(vals) != 1 || p.empty[name] > 0 {
			keys := make([]string, 0, len(vals))
			for v := range vals {
				keys = append(keys, v)
			}
			bad[name] = fmt.Sprintf("values %v, %d empty reads", keys, p.empty[name])
		}
	}
	return p.reads, bad
}
