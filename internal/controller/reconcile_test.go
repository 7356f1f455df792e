package controller

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"pier.dev/pier/internal/ipam"
	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/source"
	"pier.dev/pier/internal/store"
	"pier.dev/pier/internal/store/bolt"
	"pier.dev/pier/internal/translate"
)

func newReconciler(t *testing.T, internal, public string) (*Reconciler, store.Store) {
	t.Helper()
	st, err := bolt.Open(filepath.Join(t.TempDir(), "pier.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	alloc, err := ipam.FromCIDRs(internal, public)
	if err != nil {
		t.Fatal(err)
	}
	return &Reconciler{Store: st, IPAM: alloc, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Index: NewIndex(nil)}, st
}

var nodes = []source.Node{{Name: "n1", Ready: true}}

func lbFor(uuid, ingress string, created time.Time, pin string) *model.LoadBalancer {
	return &model.LoadBalancer{UUID: uuid, Name: "ns/" + ingress, Provider: model.ProviderHAProxy,
		RequestedFIP: pin, CreatedAt: created,
		Sources: []model.Source{{Kind: "Ingress", Namespace: "ns", Name: ingress}}}
}

func result(lbs ...*model.LoadBalancer) *translate.Result {
	res := &translate.Result{LoadBalancers: lbs, Accepted: map[model.ObjectRef]string{}, Ours: map[model.ObjectRef]bool{}}
	for _, lb := range lbs {
		res.Accepted[lb.Sources[0].Ref()] = lb.UUID
		res.Ours[lb.Sources[0].Ref()] = true
	}
	return res
}

// A load balancer deleted in the same pass frees its address for the one
// created in it: with a pool of one address, the new one gets it at once.
func TestDeletionsReleaseBeforeAssignments(t *testing.T) {
	r, st := newReconciler(t, "10.0.0.1/32", "")
	ctx := context.Background()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if _, err := r.Apply(ctx, result(lbFor("b-uuid", "old", t0, "")), nodes); err != nil {
		t.Fatal(err)
	}
	applied, err := r.Apply(ctx, result(lbFor("a-uuid", "new", t0.Add(time.Hour), "")), nodes)
	problems := applied.Problems
	if err != nil || len(problems) != 0 {
		t.Fatalf("apply: %v, problems %+v", err, problems)
	}
	lb, err := st.Get(ctx, "a-uuid")
	if err != nil || lb.VIP != "10.0.0.1" {
		t.Fatalf("new load balancer: %+v, %v", lb, err)
	}
	if _, err := st.Get(ctx, "b-uuid"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("old load balancer not deleted: %v", err)
	}
}

// Two new load balancers pinning one floating IP in the same pass: the
// older Ingress gets it, although its UUID sorts last.
func TestSamePinGoesToTheOlder(t *testing.T) {
	r, st := newReconciler(t, "10.0.0.0/24", "192.0.2.0/24")
	ctx := context.Background()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	older := lbFor("ffff-older", "older", t0, "192.0.2.7")
	newer := lbFor("0000-newer", "newer", t0.Add(time.Minute), "192.0.2.7")
	res := result(newer, older)
	applied, err := r.Apply(ctx, res, nodes)
	problems := applied.Problems
	if err != nil {
		t.Fatal(err)
	}
	got, err := st.Get(ctx, "ffff-older")
	if err != nil || got.FIP != "192.0.2.7" {
		t.Fatalf("older: %+v, %v", got, err)
	}
	if len(problems) != 1 || problems[0].Name != "newer" || problems[0].Reason != "ExternalIPInUse" {
		t.Fatalf("problems = %+v", problems)
	}
	if _, ok := res.Without(applied.Refused).Accepted[model.IngressRef("ns", "newer")]; ok {
		t.Fatal("the refused Ingress is still accepted")
	}
	if _, ok := res.Accepted[model.IngressRef("ns", "newer")]; !ok {
		t.Fatal("Apply edited the result it was given: a patch of it would lose the Ingress")
	}
}

func gatewayLB(uuid, name string, created time.Time, pin string) *model.LoadBalancer {
	return &model.LoadBalancer{UUID: uuid, Name: "gateway:ns/" + name, Provider: model.ProviderHAProxy,
		RequestedFIP: pin, CreatedAt: created,
		Sources: []model.Source{{Kind: model.KindGateway, Namespace: "ns", Name: name}}}
}

// A Gateway's spec.addresses goes through the same IPAM as an Ingress's
// pier.dev/external-ip: an Ingress and a Gateway created in one pass
// asking for one address, the older (the Gateway) gets it and the newer is
// refused; an address outside the pools refuses the Gateway with the
// spec's AddressNotUsable, an exhausted pool AddressNotAssigned.
func TestGatewayAddressThroughIPAM(t *testing.T) {
	r, st := newReconciler(t, "10.0.0.0/30", "192.0.2.0/24")
	ctx := context.Background()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	gw := gatewayLB("ffff-gw", "gw", t0, "192.0.2.7")
	ing := lbFor("0000-ing", "ing", t0.Add(time.Minute), "192.0.2.7")
	outside := gatewayLB("aaaa-outside", "outside", t0, "198.51.100.1")
	res := result(gw, ing, outside)
	applied, err := r.Apply(ctx, res, nodes)
	problems := applied.Problems
	if err != nil {
		t.Fatal(err)
	}
	if got, err := st.Get(ctx, "ffff-gw"); err != nil || got.FIP != "192.0.2.7" {
		t.Fatalf("gateway: %+v, %v", got, err)
	}
	reasons := map[string]string{}
	for _, p := range problems {
		reasons[p.Kind+"/"+p.Name] = p.Reason
	}
	want := map[string]string{"Ingress/ing": "ExternalIPInUse", "Gateway/outside": "AddressNotUsable"}
	if len(reasons) != len(want) || reasons["Ingress/ing"] != want["Ingress/ing"] || reasons["Gateway/outside"] != want["Gateway/outside"] {
		t.Fatalf("problems %v, want %v", reasons, want)
	}
	// The Ingress, newer, asking for the Gateway's address.
	if _, ok := res.Without(applied.Refused).Accepted[model.IngressRef("ns", "ing")]; ok {
		t.Fatal("the newer Ingress is still accepted")
	}

	// The internal pool holds two VIPs: a third load balancer gets none.
	more := result(gw, gatewayLB("bbbb-second", "second", t0, ""), gatewayLB("cccc-third", "third", t0.Add(time.Hour), ""))
	applied, err = r.Apply(ctx, more, nodes)
	problems = applied.Problems
	if err != nil {
		t.Fatal(err)
	}
	if len(problems) != 1 || problems[0].Name != "third" || problems[0].Reason != "AddressNotAssigned" {
		t.Fatalf("problems %+v, want third AddressNotAssigned", problems)
	}
}

// A load balancer whose addresses translation refused (AddressRefused)
// is held back: a new one is not created and leaves Accepted, a stored one
// keeps its spec (and address) while the refused change waits.
func TestAddressRefusedHoldsBack(t *testing.T) {
	r, st := newReconciler(t, "10.0.0.0/24", "192.0.2.0/24")
	ctx := context.Background()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if _, err := r.Apply(ctx, result(gatewayLB("aaaa-served", "served", t0, "192.0.2.7")), nodes); err != nil {
		t.Fatal(err)
	}
	changed := gatewayLB("aaaa-served", "served", t0, "192.0.2.8")
	fresh := gatewayLB("bbbb-new", "new", t0, "")
	res := result(changed, fresh)
	res.AddressRefused = map[string]bool{"aaaa-served": true, "bbbb-new": true}
	applied, err := r.Apply(ctx, res, nodes)
	problems := applied.Problems
	if err != nil || len(problems) != 0 {
		t.Fatalf("apply: %v, problems %+v (translation reports them)", err, problems)
	}
	if got, err := st.Get(ctx, "aaaa-served"); err != nil || got.FIP != "192.0.2.7" || got.RequestedFIP != "192.0.2.7" {
		t.Fatalf("served: %+v, %v; want it unchanged", got, err)
	}
	if _, err := st.Get(ctx, "bbbb-new"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("new load balancer created: %v", err)
	}
	if _, ok := res.Without(applied.Refused).Accepted[model.ObjectRef{Kind: model.KindGateway, Namespace: "ns", Name: "new"}]; ok {
		t.Fatal("the held-back new Gateway is still accepted")
	}
	if _, ok := res.Without(applied.Refused).Accepted[model.ObjectRef{Kind: model.KindGateway, Namespace: "ns", Name: "served"}]; !ok {
		t.Fatal("the served Gateway left Accepted: its addresses would be unpublished")
	}
}

// A Gateway's pinned address goes into quarantine for its name when the
// Gateway is deleted, as an Ingress's does: another Gateway asking for
// it is refused (AddressNotUsable, "reserved"), the same Gateway
// re-created (a new UID) gets it back.
func TestGatewayAddressQuarantine(t *testing.T) {
	r, st := newReconciler(t, "10.0.0.0/24", "192.0.2.0/24")
	r.IPAM.SetQuarantine(time.Hour)
	ctx := context.Background()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if _, err := r.Apply(ctx, result(gatewayLB("aaaa-gw", "gw", t0, "192.0.2.7")), nodes); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Apply(ctx, result(), nodes); err != nil { // the Gateway is deleted
		t.Fatal(err)
	}
	other := gatewayLB("bbbb-other", "other", t0, "192.0.2.7")
	applied, err := r.Apply(ctx, result(other), nodes)
	problems := applied.Problems
	if err != nil {
		t.Fatal(err)
	}
	if len(problems) != 1 || problems[0].Reason != "AddressNotUsable" || !strings.Contains(problems[0].Message, "reserved") {
		t.Fatalf("problems %+v, want other refused: reserved for gw", problems)
	}
	again := gatewayLB("cccc-gw", "gw", t0.Add(time.Hour), "192.0.2.7")
	applied, err = r.Apply(ctx, result(again), nodes)
	problems = applied.Problems
	if err != nil || len(problems) != 0 {
		t.Fatalf("re-created: %v, problems %+v", err, problems)
	}
	if got, err := st.Get(ctx, "cccc-gw"); err != nil || got.FIP != "192.0.2.7" {
		t.Fatalf("re-created Gateway: %+v, %v", got, err)
	}
}

// A pass given the very load balancers of the last one (an endpoint
// change patches one and keeps the others' pointers) skips preparing the
// others, and still stores the patched one, puts back one changed behind
// its back, and moves them all when the nodes change.
func TestApplySkipsWhatItPlacedLastTime(t *testing.T) {
	r, st := newReconciler(t, "10.0.0.0/24", "")
	ctx := context.Background()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	a, b := lbFor("a-uuid", "a", t0, ""), lbFor("b-uuid", "b", t0, "")
	if _, err := r.Apply(ctx, result(a, b), nodes); err != nil {
		t.Fatal(err)
	}
	placed := *r.last.byUUID["a-uuid"]
	if placed.want != a || placed.stored == nil {
		t.Fatalf("last pass not recorded: %+v", placed)
	}

	patched := *b
	patched.Pools = []model.Pool{{ID: "p", Name: "ns_web_80", Members: []model.Member{{Address: "10.244.0.9", Port: 80, Weight: 1}}}}
	before := r.prepared
	if _, err := r.Apply(ctx, result(a, &patched), nodes); err != nil {
		t.Fatal(err)
	}
	if n, now := r.prepared-before, r.last.byUUID["a-uuid"]; n != 1 || now.want != placed.want || now.stored != placed.stored {
		t.Errorf("%d load balancers prepared, want 1 (the patched one)", n)
	}
	if got, err := st.Get(ctx, "b-uuid"); err != nil || len(got.Pools) != 1 {
		t.Fatalf("patched load balancer not stored: %+v, %v", got, err)
	}

	// Someone changes a behind our back, after the echo of our write:
	// the index's entry is another.
	echo, err := st.Get(ctx, "a-uuid")
	if err != nil {
		t.Fatal(err)
	}
	r.Index.Apply(store.Event{Type: store.EventPut, LoadBalancer: echo})
	behind := echo.Clone()
	behind.Pools = []model.Pool{{ID: "x", Name: "ns_evil_80"}}
	if err := st.PutSpec(ctx, behind); err != nil {
		t.Fatal(err)
	}
	r.Index.Apply(store.Event{Type: store.EventPut, LoadBalancer: behind})
	if _, err := r.Apply(ctx, result(a, &patched), nodes); err != nil {
		t.Fatal(err)
	}
	if got, err := st.Get(ctx, "a-uuid"); err != nil || len(got.Pools) != 0 {
		t.Fatalf("load balancer changed behind our back not put back: %+v, %v", got, err)
	}

	// The node goes, another comes: both move, though translation gave
	// the same pointers.
	moved := []source.Node{{Name: "n2", Ready: true}}
	if _, err := r.Apply(ctx, result(a, &patched), moved); err != nil {
		t.Fatal(err)
	}
	for _, uuid := range []string{"a-uuid", "b-uuid"} {
		if got, err := st.Get(ctx, uuid); err != nil || got.Placement.Active != "n2" {
			t.Errorf("%s after its node went: %+v, %v", uuid, got.Placement, err)
		}
	}
}

// countingStore counts the store's writes.
type countingStore struct {
	store.Store
	puts    int // PutSpec and PutMembers
	members int // PutMembers
}

func (s *countingStore) PutSpec(ctx context.Context, lb *model.LoadBalancer) error {
	s.puts++
	return s.Store.PutSpec(ctx, lb)
}

// PutMembers counts, and passes on to a store that writes members
// behind (the embedded one), else to PutSpec.
func (s *countingStore) PutMembers(ctx context.Context, lb *model.LoadBalancer) error {
	s.puts++
	s.members++
	if w, ok := s.Store.(store.MemberWriter); ok {
		return w.PutMembers(ctx, lb)
	}
	return s.Store.PutSpec(ctx, lb)
}

// TestApplyChanged: a pass given only the load balancers an endpoint
// change patched stores those alone and leaves the store, the index and
// the next pass as Apply would; what it cannot know to be the same, it
// leaves to Apply and does nothing.
func TestApplyChanged(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	withMember := func(lb *model.LoadBalancer, addr string) *model.LoadBalancer {
		c := *lb
		c.Pools = []model.Pool{{ID: "p", Name: "ns_web_80", Namespace: "ns", Service: "web", Port: "80",
			Members: []model.Member{{Address: addr, Port: 80, Weight: 1}}}}
		return &c
	}
	// setup: two reconcilers, each given a, b and c by a complete Apply.
	setup := func(t *testing.T) (r *Reconciler, st *countingStore, res *translate.Result) {
		r, inner := newReconciler(t, "10.0.0.0/24", "")
		st = &countingStore{Store: inner}
		r.Store = st
		res = result(withMember(lbFor("a-uuid", "a", t0, ""), "10.244.0.1"),
			withMember(lbFor("b-uuid", "b", t0, ""), "10.244.0.2"), lbFor("c-uuid", "c", t0, ""))
		if _, err := r.Apply(context.Background(), res, nodes); err != nil {
			t.Fatal(err)
		}
		st.puts = 0
		return r, st, res
	}
	patch := func(res *translate.Result, i int, addr string) (*translate.Result, *model.LoadBalancer) {
		next := result(res.LoadBalancers...)
		next.LoadBalancers = append([]*model.LoadBalancer(nil), res.LoadBalancers...)
		next.LoadBalancers[i] = withMember(res.LoadBalancers[i], addr)
		return next, next.LoadBalancers[i]
	}
	ctx := context.Background()

	t.Run("as Apply", func(t *testing.T) {
		changed, st, res := setup(t)
		full, fullStore, fullRes := setup(t)
		// Agents report a and b running: their index entries are others.
		for _, r := range []*Reconciler{changed, full} {
			for _, uuid := range []string{"a-uuid", "b-uuid"} {
				reported := r.Index.lbs[uuid].Clone()
				reported.Status = model.Status{State: model.StateActive, SpecHash: reported.SpecHash(), Node: "n1"}
				r.Index.Apply(store.Event{Type: store.EventPut, LoadBalancer: reported})
				if r.Index.lbs[uuid] != reported {
					t.Fatalf("the index did not take the report of %s", uuid)
				}
			}
		}
		next, b := patch(res, 1, "10.244.0.9")
		before := changed.prepared
		applied, ok, err := changed.ApplyChanged(ctx, next, nodes, []*model.LoadBalancer{b})
		problems := applied.Problems
		if err != nil || !ok || len(problems) > 0 {
			t.Fatalf("ApplyChanged: ok %v, problems %v, error %v", ok, problems, err)
		}
		if n := changed.prepared - before; n != 1 || st.puts != 1 || st.members != 1 {
			t.Errorf("prepared %d, stored %d (%d as a member change): want the patched one alone, as a member change", n, st.puts, st.members)
		}
		fullNext, _ := patch(fullRes, 1, "10.244.0.9")
		if _, err := full.Apply(ctx, fullNext, nodes); err != nil {
			t.Fatal(err)
		}
		if fullStore.puts != 1 || fullStore.members != 0 {
			t.Errorf("Apply stored %d (%d as a member change), want 1 (none)", fullStore.puts, fullStore.members)
		}
		for _, uuid := range []string{"a-uuid", "b-uuid", "c-uuid"} {
			got, err := st.Get(ctx, uuid)
			if err != nil {
				t.Fatal(err)
			}
			want, err := fullStore.Get(ctx, uuid)
			if err != nil {
				t.Fatal(err)
			}
			if got.SpecHash() != want.SpecHash() || got.VIP != want.VIP || !reflect.DeepEqual(got.Placement, want.Placement) {
				t.Errorf("%s: ApplyChanged stored %+v, Apply %+v", uuid, got, want)
			}
			if changed.Index.lbs[uuid].SpecHash() != got.SpecHash() {
				t.Errorf("%s: the index does not hold what was stored", uuid)
			}
		}
		if got, _ := st.Get(ctx, "b-uuid"); got.Pools[0].Members[0].Address != "10.244.0.9" {
			t.Errorf("b stored with members %+v", got.Pools[0].Members)
		}
		// The next complete Apply of the same result stores nothing: it
		// prepares a again (its report came after the Apply that placed
		// it) and skips b (ApplyChanged recorded what it stored) and c.
		before = changed.prepared
		if _, err := changed.Apply(ctx, next, nodes); err != nil {
			t.Fatal(err)
		}
		if n := changed.prepared - before; n != 1 || st.puts != 1 {
			t.Errorf("the Apply after ApplyChanged prepared %d and stored %d more, want 1 and none", n, st.puts-1)
		}
	})

	refused := []struct {
		name    string
		prepare func(r *Reconciler, st *countingStore, res *translate.Result) (*translate.Result, []*model.LoadBalancer, []source.Node)
	}{
		{"nodes changed", func(r *Reconciler, _ *countingStore, res *translate.Result) (*translate.Result, []*model.LoadBalancer, []source.Node) {
			next, b := patch(res, 1, "10.244.0.9")
			return next, []*model.LoadBalancer{b}, []source.Node{{Name: "n1", Ready: true}, {Name: "n2", Ready: true}}
		}},
		{"a new load balancer", func(r *Reconciler, _ *countingStore, res *translate.Result) (*translate.Result, []*model.LoadBalancer, []source.Node) {
			d := lbFor("d-uuid", "d", t0, "")
			next := result(append(append([]*model.LoadBalancer(nil), res.LoadBalancers...), d)...)
			return next, []*model.LoadBalancer{d}, nodes
		}},
		{"deleted since", func(r *Reconciler, st *countingStore, res *translate.Result) (*translate.Result, []*model.LoadBalancer, []source.Node) {
			gone, _ := st.Get(context.Background(), "b-uuid")
			r.Index.Apply(store.Event{Type: store.EventDelete, LoadBalancer: gone})
			next, b := patch(res, 1, "10.244.0.9")
			return next, []*model.LoadBalancer{b}, nodes
		}},
		{"address refused", func(r *Reconciler, _ *countingStore, res *translate.Result) (*translate.Result, []*model.LoadBalancer, []source.Node) {
			next, b := patch(res, 1, "10.244.0.9")
			next.AddressRefused = map[string]bool{"b-uuid": true}
			return next, []*model.LoadBalancer{b}, nodes
		}},
		{"the last Apply failed", func(r *Reconciler, _ *countingStore, res *translate.Result) (*translate.Result, []*model.LoadBalancer, []source.Node) {
			r.Store = failingStore{r.Store}
			if _, err := r.Apply(context.Background(), result(append(append([]*model.LoadBalancer(nil), res.LoadBalancers...),
				lbFor("e-uuid", "e", t0, ""))...), nodes); err == nil {
				panic("the failing store did not fail")
			}
			next, b := patch(res, 1, "10.244.0.9")
			return next, []*model.LoadBalancer{b}, nodes
		}},
	}
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			r, st, res := setup(t)
			next, changed, ns := tc.prepare(r, st, res)
			before, puts := r.prepared, st.puts
			applied, ok, err := r.ApplyChanged(ctx, next, ns, changed)
			problems := applied.Problems
			if ok || err != nil || problems != nil {
				t.Fatalf("ApplyChanged: ok %v, problems %v, error %v; want it refused", ok, problems, err)
			}
			if r.prepared != before || st.puts != puts {
				t.Errorf("a refused ApplyChanged prepared %d and stored %d", r.prepared-before, st.puts-puts)
			}
		})
	}
}

// failingStore refuses every write.
type failingStore struct{ store.Store }

func (failingStore) PutSpec(context.Context, *model.LoadBalancer) error {
	return errors.New("store unavailable")
}
