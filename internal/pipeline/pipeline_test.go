package pipeline

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"pier.dev/pier/internal/ipam"
	"pier.dev/pier/internal/metrics"
	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/source"
	"pier.dev/pier/internal/status"
	"pier.dev/pier/internal/store"
	"pier.dev/pier/internal/store/bolt"
	"pier.dev/pier/internal/translate"
)

// countingStore counts the reads the loop makes of its store. Its watch
// also delivers events the test injects: an agent's report is one more
// payload on the watch, whatever store method the agent writes it with.
type countingStore struct {
	store.Store
	lists, gets atomic.Int64
	inject      chan store.Event
}

func (c *countingStore) Watch(ctx context.Context) (<-chan store.Event, error) {
	events, err := c.Store.Watch(ctx)
	if err != nil {
		return nil, err
	}
	out := make(chan store.Event)
	go func() {
		defer close(out)
		for {
			var ev store.Event
			select {
			case <-ctx.Done():
				return
			case ev = <-c.inject:
			case e, ok := <-events:
				if !ok {
					return
				}
				ev = e
			}
			select {
			case out <- ev:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, nil
}

func (c *countingStore) List(ctx context.Context) ([]*model.LoadBalancer, error) {
	c.lists.Add(1)
	return c.Store.List(ctx)
}

func (c *countingStore) Get(ctx context.Context, uuid string) (*model.LoadBalancer, error) {
	c.gets.Add(1)
	return c.Store.Get(ctx, uuid)
}

// memorySink keeps what the pipeline publishes.
type memorySink struct {
	mu        sync.Mutex
	published status.Published
}

func (s *memorySink) Current(*source.Snapshot) status.Published {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := status.Published{}
	for k, v := range s.published {
		out[k] = v
	}
	return out
}

func (s *memorySink) Publish(_ context.Context, _ *source.Snapshot, _ map[model.ObjectRef]bool, next status.Published) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.published = next
	return nil
}

func (s *memorySink) of(ref model.ObjectRef) []networkingv1.IngressLoadBalancerIngress {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.published[ref]
}

type harness struct {
	t     *testing.T
	p     *Pipeline
	st    *countingStore
	raw   store.Store
	m     *metrics.Metrics
	sink  *memorySink
	snaps int // snapshots offered
	logs  *lockedBuffer
}

// lockedBuffer is the pipeline's log, read by tests while it runs.
type lockedBuffer struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	raw, err := bolt.Open(filepath.Join(t.TempDir(), "pier.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { raw.Close() })
	alloc, err := ipam.FromCIDRs("10.0.0.0/24", "")
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, st: &countingStore{Store: raw, inject: make(chan store.Event)}, raw: raw, m: metrics.New(),
		sink: &memorySink{}, logs: &lockedBuffer{}}
	h.p = &Pipeline{Store: h.st, IPAM: alloc, Translate: translate.DefaultOptions(), Status: h.sink,
		Metrics: h.m, Logger: slog.New(slog.NewTextHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.p.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	})
	return h
}

// offer hands a snapshot over and waits until the pipeline has classified it.
func (h *harness) offer(snap *source.Snapshot) {
	h.t.Helper()
	h.snaps++
	h.p.Offer(snap)
	h.wait("snapshot taken", func() bool { return h.snapshots() >= float64(h.snaps) })
}

func (h *harness) snapshots() float64 {
	return testutil.ToFloat64(h.m.Snapshots.WithLabelValues("rebuild")) +
		testutil.ToFloat64(h.m.Snapshots.WithLabelValues("status")) +
		testutil.ToFloat64(h.m.Snapshots.WithLabelValues("none"))
}

func (h *harness) rebuilds(reason string) float64 {
	return testutil.ToFloat64(h.m.Rebuilds.WithLabelValues(reason))
}

func (h *harness) totalRebuilds() float64 {
	n := 0.0
	for _, r := range []string{ReasonInitial, ReasonClass, ReasonIngress, ReasonGateway, ReasonService, ReasonEndpoints, ReasonSecret, ReasonConfigMap, ReasonNode, ReasonLoadBalancer} {
		n += h.rebuilds(r)
	}
	return n
}

func (h *harness) wait(what string, ok func() bool) {
	h.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			h.t.Fatalf("%s: not within 5s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// world is a snapshot with Ingress ns/web → Service ns/web, an
// unreferenced Service ns/other, a TLS-less setup and one node.
func world() *source.Snapshot {
	ready := true
	ing := &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "11111111-1111-1111-1111-111111111111",
			ResourceVersion: "1", Generation: 1, CreationTimestamp: metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))},
		Spec: networkingv1.IngressSpec{
			IngressClassName: ptr("pier"),
			Rules: []networkingv1.IngressRule{{Host: "web.example.com", IngressRuleValue: networkingv1.IngressRuleValue{
				HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{{
					Path: "/", PathType: ptr(networkingv1.PathTypePrefix),
					Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{
						Name: "web", Port: networkingv1.ServiceBackendPort{Number: 80}}},
				}}}}}},
		},
	}
	svc := func(name string) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, ResourceVersion: "1"},
			Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.10", Ports: []corev1.ServicePort{{Port: 80, Protocol: corev1.ProtocolTCP}}}}
	}
	port, proto := int32(80), corev1.ProtocolTCP
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "ns", Name: "web-1", ResourceVersion: "1", Labels: map[string]string{discoveryv1.LabelServiceName: "web"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.244.0.1"}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}},
		Ports:       []discoveryv1.EndpointPort{{Port: &port, Protocol: &proto}},
	}
	return &source.Snapshot{
		Ingresses:      []*networkingv1.Ingress{ing},
		IngressClasses: []*networkingv1.IngressClass{{ObjectMeta: metav1.ObjectMeta{Name: "pier"}, Spec: networkingv1.IngressClassSpec{Controller: translate.DefaultControllerName}}},
		Services:       []*corev1.Service{svc("other"), svc("web")},
		EndpointSlices: []*discoveryv1.EndpointSlice{slice},
		Nodes:          []source.Node{{Name: "n1", Ready: true}},
	}
}

func ptr[T any](v T) *T { return &v }

// clone copies a snapshot so a test can change one object: the others
// keep their pointers, as an informer's cache does.
func clone(s *source.Snapshot) *source.Snapshot {
	c := *s
	c.Ingresses = append([]*networkingv1.Ingress(nil), s.Ingresses...)
	c.Services = append([]*corev1.Service(nil), s.Services...)
	c.EndpointSlices = append([]*discoveryv1.EndpointSlice(nil), s.EndpointSlices...)
	c.Nodes = append([]source.Node(nil), s.Nodes...)
	return &c
}

var webRef = model.IngressRef("ns", "web")

// The loop reads the store once, when it starts; after that, rebuilds and
// status passes read the index, and only changes that matter rebuild.
func TestOnlyChangesThatMatterRebuild(t *testing.T) {
	h := newHarness(t)
	snap := world()
	h.offer(snap)
	if h.rebuilds(ReasonInitial) != 1 {
		t.Fatalf("initial rebuilds = %v", h.rebuilds(ReasonInitial))
	}
	lbs, err := h.raw.List(context.Background())
	if err != nil || len(lbs) != 1 {
		t.Fatalf("stored: %v, %v", lbs, err)
	}

	// An agent reports: a status pass, no rebuild.
	passes := testutil.ToFloat64(h.m.StatusPasses.WithLabelValues("store"))
	lb := lbs[0]
	lb.Status.State, lb.Status.SpecHash = model.StateActive, lb.SpecHash()
	h.st.inject <- store.Event{Type: store.EventPut, LoadBalancer: lb.Clone()}
	h.wait("status pass after the agent's report", func() bool {
		return testutil.ToFloat64(h.m.StatusPasses.WithLabelValues("store")) > passes
	})
	if lb.Serving() {
		h.wait("published", func() bool { return len(h.sink.of(webRef)) > 0 })
	}

	// The Ingress's status changes (pier's own write coming back): a
	// status pass at most, no rebuild.
	next := clone(snap)
	ing := snap.Ingresses[0].DeepCopy()
	ing.ResourceVersion = "2"
	ing.Status.LoadBalancer.Ingress = []networkingv1.IngressLoadBalancerIngress{{IP: lb.VIP}}
	next.Ingresses[0] = ing
	h.offer(next)
	if got := testutil.ToFloat64(h.m.Snapshots.WithLabelValues("status")); got != 1 {
		t.Errorf("status-only Ingress update: %v status passes from the source, want 1", got)
	}

	// An unreferenced Service changes: nothing.
	snap, next = next, clone(next)
	other := snap.Services[0].DeepCopy()
	other.ResourceVersion = "2"
	other.Spec.Ports[0].Port = 8080
	next.Services[0] = other
	h.offer(next)
	if got := testutil.ToFloat64(h.m.Snapshots.WithLabelValues("none")); got != 1 {
		t.Errorf("unreferenced Service: %v ignored snapshots, want 1", got)
	}
	if got := h.totalRebuilds(); got != 1 {
		t.Fatalf("rebuilds = %v after an agent report, a status-only update and an unreferenced Service, want 1", got)
	}

	// The referenced Service changes: a rebuild, reading nothing.
	snap, next = next, clone(next)
	web := snap.Services[1].DeepCopy()
	web.ResourceVersion = "2"
	web.Spec.ClusterIP = "10.96.0.11"
	next.Services[1] = web
	h.offer(next)
	if h.rebuilds(ReasonService) != 1 {
		t.Errorf("referenced Service: service rebuilds = %v, want 1", h.rebuilds(ReasonService))
	}

	// The Ingress now points at ns/other: the Service changed while it was
	// unreferenced is used as it is now (port 8080).
	snap, next = next, clone(next)
	ing = snap.Ingresses[0].DeepCopy()
	ing.ResourceVersion, ing.Generation = "3", 2
	ing.Spec.Rules[0].HTTP.Paths[0].Backend.Service = &networkingv1.IngressServiceBackend{
		Name: "other", Port: networkingv1.ServiceBackendPort{Number: 8080}}
	next.Ingresses[0] = ing
	h.offer(next)
	if h.rebuilds(ReasonIngress) != 1 {
		t.Fatalf("ingress rebuilds = %v, want 1", h.rebuilds(ReasonIngress))
	}
	stored, err := h.raw.Get(context.Background(), lb.UUID)
	if err != nil || len(stored.Pools) != 1 || stored.Pools[0].Name != "ns_other_8080" {
		t.Fatalf("after the Ingress points at ns/other: %+v, %v", stored, err)
	}

	// A node goes: a rebuild with reason node.
	snap, next = next, clone(next)
	next.Nodes = append(next.Nodes, source.Node{Name: "n2", Ready: true})
	h.offer(next)
	if h.rebuilds(ReasonNode) != 1 {
		t.Errorf("node rebuilds = %v, want 1", h.rebuilds(ReasonNode))
	}

	// Store reads: the one List when the loop started, none per rebuild
	// or status pass.
	if lists, gets := h.st.lists.Load(), h.st.gets.Load(); lists != 1 || gets != 0 {
		t.Errorf("store reads over %v rebuilds: %d List, %d Get; want 1 List (start) and 0 Get", h.totalRebuilds(), lists, gets)
	}
}

// A load balancer deleted behind pier's back is put back, with the same
// address, by the rebuild the next snapshot brings, though nothing that
// matters changed in it.
func TestDeletedBehindOurBackIsPutBack(t *testing.T) {
	h := newHarness(t)
	snap := world()
	h.offer(snap)
	lbs, err := h.raw.List(context.Background())
	if err != nil || len(lbs) != 1 {
		t.Fatalf("stored: %v, %v", lbs, err)
	}
	if err := h.raw.Delete(context.Background(), lbs[0].UUID); err != nil {
		t.Fatal(err)
	}
	h.wait("status pass after the delete", func() bool {
		return testutil.ToFloat64(h.m.StatusPasses.WithLabelValues("store")) > 0
	})
	if h.rebuilds(ReasonLoadBalancer) != 0 {
		t.Fatal("rebuilt from the store event, before a snapshot")
	}
	h.offer(clone(snap))
	if h.rebuilds(ReasonLoadBalancer) != 1 {
		t.Fatalf("loadbalancer rebuilds = %v after the next snapshot, want 1", h.rebuilds(ReasonLoadBalancer))
	}
	h.wait("put back", func() bool {
		lb, err := h.raw.Get(context.Background(), lbs[0].UUID)
		return err == nil && lb.VIP == lbs[0].VIP
	})
}

// A restart finds what the store holds: the initial read replays the
// addresses before anything new is allocated, so nothing moves.
func TestRestartKeepsAddresses(t *testing.T) {
	dir := t.TempDir()
	run := func(withOlder bool) string {
		raw, err := bolt.Open(filepath.Join(dir, "pier.db"))
		if err != nil {
			t.Fatal(err)
		}
		defer raw.Close()
		alloc, _ := ipam.FromCIDRs("10.0.0.0/24", "")
		m := metrics.New()
		p := &Pipeline{Store: raw, IPAM: alloc, Translate: translate.DefaultOptions(), Status: &memorySink{},
			Metrics: m, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- p.Run(ctx) }()
		snap := world()
		if withOlder {
			// An older Ingress, new in the second run, would take the
			// first address if the stored one were not replayed.
			extra := snap.Ingresses[0].DeepCopy()
			extra.Name, extra.UID = "aaa", "22222222-2222-2222-2222-222222222222"
			extra.CreationTimestamp = metav1.NewTime(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
			extra.Spec.Rules[0].Host = "aaa.example.com"
			snap.Ingresses = append([]*networkingv1.Ingress{extra}, snap.Ingresses...)
		}
		p.Offer(snap)
		for p.Ready() != nil {
			time.Sleep(5 * time.Millisecond)
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		lbs, _ := raw.List(context.Background())
		for _, lb := range lbs {
			if lb.Name == "ns/web" {
				return lb.VIP
			}
		}
		return ""
	}
	first := run(false)
	if second := run(true); first == "" || second != first {
		t.Fatalf("VIP of ns/web: %q then %q", first, second)
	}
}

// An endpoint change, and nothing else, patches the members of the last
// translation instead of translating everything: the store ends as a
// full rebuild of the same snapshot leaves it. With anything else
// changed too, the rebuild is a full one.
func TestEndpointChangeIsIncremental(t *testing.T) {
	h := newHarness(t)
	snap := world()
	h.offer(snap)

	next := clone(snap)
	es := snap.EndpointSlices[0].DeepCopy()
	es.ResourceVersion = "2"
	es.Endpoints[0].Addresses = []string{"10.244.0.2"}
	next.EndpointSlices[0] = es
	passes := func(trigger string) float64 { return testutil.ToFloat64(h.m.StatusPasses.WithLabelValues(trigger)) }
	rebuildPasses, storePasses := passes("rebuild"), passes("store")
	h.offer(next)
	if h.rebuilds(ReasonEndpoints) != 1 {
		t.Fatalf("endpoint rebuilds = %v, want 1", h.rebuilds(ReasonEndpoints))
	}
	// Its status pass is not run with the rebuild, beside the agents
	// applying it, but paced: it comes all the same.
	if got := passes("rebuild") - rebuildPasses; got != 0 {
		t.Errorf("the endpoint change ran %v status passes with its rebuild, want 0", got)
	}
	h.wait("the paced status pass after the endpoint change", func() bool { return passes("store") > storePasses })
	if !strings.Contains(h.logs.String(), `reason=endpoints incremental=true`) {
		t.Errorf("the endpoint change was translated in full:\n%s", h.logs.String())
	}
	patched, err := h.raw.List(context.Background())
	if err != nil || len(patched) != 1 {
		t.Fatalf("stored: %v, %v", patched, err)
	}
	if m := patched[0].Pools[0].Members; len(m) != 1 || m[0].Address != "10.244.0.2" {
		t.Fatalf("members after the endpoint change: %+v", m)
	}
	full := newHarness(t)
	full.offer(next)
	fresh, err := full.raw.List(context.Background())
	if err != nil || len(fresh) != 1 {
		t.Fatalf("stored by a full rebuild: %v, %v", fresh, err)
	}
	if !reflect.DeepEqual(patched[0].Pools, fresh[0].Pools) || !reflect.DeepEqual(patched[0].Listeners, fresh[0].Listeners) ||
		!reflect.DeepEqual(patched[0].Sources, fresh[0].Sources) {
		t.Errorf("incremental and full rebuilds differ:\n%+v\n%+v", patched[0], fresh[0])
	}

	// The endpoints and a node change together: a full rebuild.
	snap, next = next, clone(next)
	es = snap.EndpointSlices[0].DeepCopy()
	es.ResourceVersion = "3"
	es.Endpoints[0].Addresses = []string{"10.244.0.3"}
	next.EndpointSlices[0] = es
	next.Nodes = append(next.Nodes, source.Node{Name: "n2", Ready: true})
	h.offer(next)
	if got := strings.Count(h.logs.String(), `reason=endpoints incremental=false`); got != 1 {
		t.Errorf("endpoints and a node changed: %d full endpoint rebuilds, want 1", got)
	}
}
