package controller

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
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
	problems, err := r.Apply(ctx, result(lbFor("a-uuid", "new", t0.Add(time.Hour), "")), nodes)
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
	problems, err := r.Apply(ctx, res, nodes)
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
	if _, ok := res.Accepted[model.IngressRef("ns", "newer")]; ok {
		t.Fatal("the refused Ingress is still accepted")
	}
}
