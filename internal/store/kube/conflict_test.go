package kube

import (
	"errors"
	"sync"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/store/storetest"
)

// interleave makes other's write land in s's read-write window, once.
func interleave(t *testing.T, s *Store, write func() error) {
	t.Helper()
	var once sync.Once
	s.beforeWrite = func(string) {
		once.Do(func() {
			if err := write(); err != nil {
				t.Errorf("interleaved write: %v", err)
			}
		})
	}
	t.Cleanup(func() { s.beforeWrite = nil })
}

func mustGet(t *testing.T, s *Store, uuid string) *model.LoadBalancer {
	t.Helper()
	lb, err := s.Get(t.Context(), uuid)
	if err != nil {
		t.Fatal(err)
	}
	return lb
}

// TestPutSpecConflictWithOtherLeader: two controllers write different specs
// into the same window; the second to write gets ErrConflict and the first
// one's spec stands.
func TestPutSpecConflictWithOtherLeader(t *testing.T) {
	s1 := newStore(t, nil, nil)
	s2 := newStore(t, nil, nil)
	if err := s1.PutSpec(t.Context(), storetest.Sample("lb")); err != nil {
		t.Fatal(err)
	}
	interleave(t, s1, func() error {
		other := storetest.Sample("lb")
		other.VIP = "127.10.0.2"
		return s2.PutSpec(t.Context(), other)
	})
	mine := storetest.Sample("lb")
	mine.VIP = "127.10.0.3"
	err := s1.PutSpec(t.Context(), mine)
	if !errors.Is(err, ErrConflict) || !apierrors.IsConflict(err) {
		t.Fatalf("PutSpec err = %v, want ErrConflict wrapping the API's 409", err)
	}
	if got := mustGet(t, s1, "lb").VIP; got != "127.10.0.2" {
		t.Fatalf("VIP = %s, want the other leader's 127.10.0.2", got)
	}
}

// TestPutSpecCreateRace: both controllers create the same UUID; one wins.
func TestPutSpecCreateRace(t *testing.T) {
	s1 := newStore(t, nil, nil)
	s2 := newStore(t, nil, nil)
	interleave(t, s1, func() error {
		other := storetest.Sample("new")
		other.VIP = "127.10.0.2"
		return s2.PutSpec(t.Context(), other)
	})
	if err := s1.PutSpec(t.Context(), storetest.Sample("new")); !errors.Is(err, ErrConflict) {
		t.Fatalf("PutSpec err = %v, want ErrConflict", err)
	}
	if got := mustGet(t, s1, "new").VIP; got != "127.10.0.2" {
		t.Fatalf("VIP = %s, want the first creator's 127.10.0.2", got)
	}
}

// TestPutSpecRetriesAfterStatusWrite: an agent reporting status in the
// window is not a competing spec; PutSpec retries and both writes stand.
func TestPutSpecRetriesAfterStatusWrite(t *testing.T) {
	ctl := newStore(t, nil, nil)
	agent := newStore(t, nil, nil)
	if err := ctl.PutSpec(t.Context(), storetest.Sample("lb")); err != nil {
		t.Fatal(err)
	}
	report := model.NodeStatus{Node: "node-a", State: model.StateActive, SpecHash: "h"}
	interleave(t, ctl, func() error { return agent.PutNodeStatus(t.Context(), "lb", report) })
	next := storetest.Sample("lb")
	next.VIP = "127.10.0.9"
	if err := ctl.PutSpec(t.Context(), next); err != nil {
		t.Fatalf("PutSpec after an interleaved status write: %v", err)
	}
	got := mustGet(t, ctl, "lb")
	if r, ok := got.Status.Report("node-a"); got.VIP != "127.10.0.9" || !ok || !r.Equal(report) || got.Status.State != model.StateActive {
		t.Fatalf("got VIP %s status %+v, want 127.10.0.9 and node-a's report %+v", got.VIP, got.Status, report)
	}
}

// TestPutNodeStatusRetriesOnConflict: the agents of both placed nodes
// report at once; both calls succeed and both reports are stored.
func TestPutNodeStatusRetriesOnConflict(t *testing.T) {
	a := newStore(t, nil, nil)
	b := newStore(t, nil, nil)
	if err := a.PutSpec(t.Context(), storetest.Sample("lb")); err != nil {
		t.Fatal(err)
	}
	theirs := model.NodeStatus{Node: "node-b", State: model.StateError, Message: "port taken"}
	interleave(t, a, func() error { return b.PutNodeStatus(t.Context(), "lb", theirs) })
	mine := model.NodeStatus{Node: "node-a", State: model.StateActive}
	if err := a.PutNodeStatus(t.Context(), "lb", mine); err != nil {
		t.Fatalf("PutNodeStatus after an interleaved status write: %v", err)
	}
	got := mustGet(t, a, "lb").Status
	ra, okA := got.Report("node-a")
	rb, okB := got.Report("node-b")
	if !okA || !okB || !ra.Equal(mine) || !rb.Equal(theirs) || got.State != model.StateActive {
		t.Fatalf("status = %+v, want both reports and the active's summary", got)
	}
}

// TestPutSpecOnStaleView: a controller whose last view of a LoadBalancer
// predates another controller's spec write gets ErrConflict, even outside
// the read-write window; calling again overwrites on purpose. A status
// write in between does not count as a competing spec.
func TestPutSpecOnStaleView(t *testing.T) {
	s1 := newStore(t, nil, nil)
	s2 := newStore(t, nil, nil)
	agent := newStore(t, nil, nil)
	if err := s1.PutSpec(t.Context(), storetest.Sample("lb")); err != nil {
		t.Fatal(err)
	}
	if err := agent.PutNodeStatus(t.Context(), "lb", model.NodeStatus{Node: "node-a", State: model.StateActive}); err != nil {
		t.Fatal(err)
	}
	mine := storetest.Sample("lb")
	mine.VIP = "127.10.0.3"
	if err := s1.PutSpec(t.Context(), mine); err != nil {
		t.Fatalf("PutSpec after another process's status write: %v", err)
	}
	other := storetest.Sample("lb")
	other.VIP = "127.10.0.2"
	if err := s2.PutSpec(t.Context(), other); err != nil {
		t.Fatal(err)
	}
	mine.VIP = "127.10.0.4"
	if err := s1.PutSpec(t.Context(), mine); !errors.Is(err, ErrConflict) {
		t.Fatalf("PutSpec on a stale view: err = %v, want ErrConflict", err)
	}
	if got := mustGet(t, s1, "lb").VIP; got != "127.10.0.2" {
		t.Fatalf("VIP = %s after the refused write, want 127.10.0.2", got)
	}
	if err := s1.PutSpec(t.Context(), mine); err != nil {
		t.Fatalf("second PutSpec (fresh read): %v", err)
	}
	if got := mustGet(t, s1, "lb").VIP; got != "127.10.0.4" {
		t.Fatalf("VIP = %s, want 127.10.0.4", got)
	}
}

// TestPutSpecAfterForeignDelete: the object this store wrote was deleted by
// another process; the next PutSpec says so, the one after recreates it.
func TestPutSpecAfterForeignDelete(t *testing.T) {
	s1 := newStore(t, nil, nil)
	s2 := newStore(t, nil, nil)
	lb := storetest.Sample("lb")
	if err := s1.PutSpec(t.Context(), lb); err != nil {
		t.Fatal(err)
	}
	if err := s2.Delete(t.Context(), "lb"); err != nil {
		t.Fatal(err)
	}
	lb.VIP = "127.10.0.5"
	if err := s1.PutSpec(t.Context(), lb); !errors.Is(err, ErrConflict) {
		t.Fatalf("PutSpec after a foreign delete: err = %v, want ErrConflict", err)
	}
	if err := s1.PutSpec(t.Context(), lb); err != nil {
		t.Fatalf("PutSpec to recreate: %v", err)
	}
	if got := mustGet(t, s1, "lb").VIP; got != "127.10.0.5" {
		t.Fatalf("VIP = %s, want 127.10.0.5", got)
	}
}
