package controller

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/store"
)

// slowStore is a store over a slow network: each write takes a while,
// one UUID's writes fail, and it counts how many ran at once and which
// went through CreateSpec.
type slowStore struct {
	store.Store
	fail string

	mu              sync.Mutex
	inFlight, most  int
	created, putted []string
}

func (s *slowStore) WriteConcurrency() int { return 4 }

func (s *slowStore) write(ctx context.Context, lb *model.LoadBalancer, created bool) error {
	s.mu.Lock()
	s.inFlight++
	s.most = max(s.most, s.inFlight)
	if created {
		s.created = append(s.created, lb.UUID)
	} else {
		s.putted = append(s.putted, lb.UUID)
	}
	s.mu.Unlock()
	defer func() { s.mu.Lock(); s.inFlight--; s.mu.Unlock() }()
	time.Sleep(20 * time.Millisecond)
	if lb.UUID == s.fail {
		return errors.New("connection reset")
	}
	return s.Store.PutSpec(ctx, lb)
}

func (s *slowStore) PutSpec(ctx context.Context, lb *model.LoadBalancer) error {
	return s.write(ctx, lb, false)
}

func (s *slowStore) CreateSpec(ctx context.Context, lb *model.LoadBalancer) error {
	return s.write(ctx, lb, true)
}

// TestApplyWritesAtOnce: with a store that takes concurrent writes, a
// pass of many new load balancers writes several at once, each through
// CreateSpec; when one write fails the pass fails, and the index holds
// exactly what the store holds, so the next pass writes only the one
// that failed (with PutSpec for none: it is still new).
func TestApplyWritesAtOnce(t *testing.T) {
	r, st := newReconciler(t, "127.10.0.0/24", "")
	slow := &slowStore{Store: st, fail: "lb-03"}
	r.Store = slow
	var lbs []*model.LoadBalancer
	base := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 12 {
		lbs = append(lbs, lbFor(fmt.Sprintf("lb-%02d", i), fmt.Sprintf("ing-%02d", i), base.Add(time.Duration(i)*time.Second), ""))
	}
	if _, err := r.Apply(t.Context(), result(lbs...), nodes); err == nil {
		t.Fatal("a pass with a failed write succeeded")
	}
	if slow.most < 2 || slow.most > 4 {
		t.Fatalf("at most %d writes ran at once, want 2 to 4 (the store's WriteConcurrency)", slow.most)
	}
	if len(slow.putted) != 0 {
		t.Fatalf("new load balancers written with PutSpec: %v", slow.putted)
	}
	stored, err := st.List(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(r.Index.ByUUID()), len(stored); got != want {
		t.Fatalf("index holds %d load balancers, the store %d", got, want)
	}
	for _, lb := range stored {
		if r.Index.ByUUID()[lb.UUID] == nil {
			t.Fatalf("%s stored but not in the index", lb.UUID)
		}
	}
	if r.Index.ByUUID()["lb-03"] != nil {
		t.Fatal("the load balancer whose write failed is in the index")
	}

	slow.fail = ""
	slow.mu.Lock()
	slow.created, slow.putted = nil, nil
	slow.mu.Unlock()
	if _, err := r.Apply(t.Context(), result(lbs...), nodes); err != nil {
		t.Fatal(err)
	}
	// The ones cancelled by the failure are written now, lb-03 among them,
	// and none that was stored.
	for _, uuid := range slow.created {
		if _, err := st.Get(t.Context(), uuid); err != nil {
			t.Fatalf("%s: %v", uuid, err)
		}
	}
	if len(slow.putted) != 0 {
		t.Fatalf("second pass rewrote %v", slow.putted)
	}
	if n := len(r.Index.ByUUID()); n != len(lbs) {
		t.Fatalf("index holds %d load balancers after the second pass, want %d", n, len(lbs))
	}
	all, _ := st.List(t.Context())
	if len(all) != len(lbs) {
		t.Fatalf("store holds %d load balancers, want %d", len(all), len(lbs))
	}
}
