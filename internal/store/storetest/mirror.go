package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/store"
)

// RunMirror checks a store.Mirror of a store made by newStore: before it
// has read the store its reads are the store's; once running, every
// write, a change of sources and a delete reach Get, List and BySource;
// and BySource answers what reading everything and filtering does.
func RunMirror(t *testing.T, newStore func(t *testing.T) store.Store) {
	t.Run("reads go to the store until the mirror has read it", func(t *testing.T) {
		s := newStore(t)
		mustPut(t, s, Sample("a"))
		m := store.NewMirror(s, nil)
		got, err := m.Get(t.Context(), "a")
		if err != nil || got.UUID != "a" {
			t.Fatalf("Get before Run = %v, %v; want the stored a", got, err)
		}
		lbs, err := m.BySource(t.Context(), model.IngressRef("default", "a"))
		if err != nil || len(lbs) != 1 {
			t.Fatalf("BySource before Run = %d load balancers, %v; want 1", len(lbs), err)
		}
	})
	t.Run("writes, a change of sources and a delete reach every read", func(t *testing.T) {
		testMirrorFollows(t, newStore(t))
	})
}

func testMirrorFollows(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustPut(t, s, Sample("b"))
	counted := &readCounter{Store: s}
	m := store.NewMirror(counted, nil)
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); m.Run(runCtx) }()
	t.Cleanup(func() { cancel(); <-done })
	waitMirror(t, m, "a whole copy", func() error {
		if !m.Synced() {
			return errors.New("not synced")
		}
		return nil
	})
	readsAtSync := counted.reads.Load()
	defer func() {
		if n := counted.reads.Load() - readsAtSync; n != 0 {
			t.Errorf("the mirror read the store %d times after it was synced, want 0", n)
		}
	}()

	// Two load balancers serving one Ingress (one of them a group's),
	// one serving another.
	a := Sample("a")
	a.Sources = append(a.Sources, model.Source{Kind: model.KindIngress, Namespace: "default", Name: "shared"})
	c := Sample("c")
	c.Sources = []model.Source{{Kind: model.KindIngress, Namespace: "default", Name: "shared"}}
	mustPut(t, s, a)
	mustPut(t, s, c)
	shared := model.IngressRef("default", "shared")
	waitMirror(t, m, "both load balancers of default/shared", func() error {
		return sameUUIDs(m, s, shared, "a", "c")
	})
	lbs, err := m.List(ctx)
	if err != nil || !slices.Equal(uuids(lbs), []string{"a", "b", "c"}) {
		t.Fatalf("List = %v, %v; want a, b, c in order", uuids(lbs), err)
	}
	if got, err := m.Get(ctx, "b"); err != nil || got.Name != "default/b" {
		t.Fatalf("Get(b) = %v, %v", got, err)
	}
	if _, err := m.Get(ctx, "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Get of an unknown UUID = %v, want ErrNotFound", err)
	}

	// a leaves the group: it no longer serves default/shared, and still
	// serves default/a.
	a.Sources = a.Sources[:1]
	mustPut(t, s, a)
	waitMirror(t, m, "a out of default/shared", func() error {
		if err := sameUUIDs(m, s, shared, "c"); err != nil {
			return err
		}
		return sameUUIDs(m, s, model.IngressRef("default", "a"), "a")
	})

	testMirrorShowsReports(t, s, m)

	if err := s.Delete(ctx, "c"); err != nil {
		t.Fatal(err)
	}
	waitMirror(t, m, "c deleted", func() error {
		if _, err := m.Get(ctx, "c"); !errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("Get(c) = %v, want ErrNotFound", err)
		}
		return sameUUIDs(m, s, shared)
	})
}

// testMirrorShowsReports: an agent's report changes what the mirror
// shows.
func testMirrorShowsReports(t *testing.T, s store.Store, m *store.Mirror) {
	ctx := t.Context()
	if err := s.PutNodeStatus(ctx, "c", model.NodeStatus{Node: "node-a", State: model.StateActive, Message: "up"}); err != nil {
		t.Fatal(err)
	}
	waitMirror(t, m, "c's status", func() error {
		got, err := m.Get(ctx, "c")
		if err != nil {
			return err
		}
		if got.Status.State != model.StateActive {
			return fmt.Errorf("c's state is %q", got.Status.State)
		}
		return nil
	})
}

// sameUUIDs checks that the mirror's BySource(ref) names want, and so does
// reading the store and filtering.
func sameUUIDs(m *store.Mirror, s store.Store, ref model.ObjectRef, want ...string) error {
	ctx := context.Background()
	got, err := m.BySource(ctx, ref)
	if err != nil {
		return err
	}
	direct, err := store.ListBySource(ctx, s, ref)
	if err != nil {
		return err
	}
	if !slices.Equal(uuids(got), want) || !slices.Equal(uuids(direct), want) {
		return fmt.Errorf("%s: the mirror has %v, the store %v; want %v", ref, uuids(got), uuids(direct), want)
	}
	return nil
}

func waitMirror(t *testing.T, m *store.Mirror, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(Wait)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the mirror does not show %s within %s: %v", what, Wait, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// readCounter counts the reads a Mirror makes of its store.
type readCounter struct {
	store.Store
	reads atomic.Int64
}

func (r *readCounter) Get(ctx context.Context, uuid string) (*model.LoadBalancer, error) {
	r.reads.Add(1)
	return r.Store.Get(ctx, uuid)
}

func (r *readCounter) List(ctx context.Context) ([]*model.LoadBalancer, error) {
	r.reads.Add(1)
	return r.Store.List(ctx)
}
