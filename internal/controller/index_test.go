package controller

import (
	"testing"

	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/store"
)

// The watch may deliver an event from before the reconciler's own write:
// the index keeps the written spec and takes the event's status, and
// ignores a stale PUT of a load balancer it deleted.
func TestIndexNeverGoesBackToAStaleSpec(t *testing.T) {
	v1 := &model.LoadBalancer{UUID: "u1", Name: "ns/a", VIP: "10.0.0.1", Sources: []model.Source{{Kind: "Ingress", Namespace: "ns", Name: "a"}}}
	x := NewIndex([]*model.LoadBalancer{v1})
	v2 := v1.Clone()
	v2.Placement.Active = "n1"
	x.put(v2)

	stale := v1.Clone()
	stale.Status = model.Status{State: model.StateActive, SpecHash: v1.SpecHash()}
	if got := x.Apply(store.Event{Type: store.EventPut, LoadBalancer: stale}); got != StatusChanged {
		t.Errorf("stale event with a new status: %v, want StatusChanged", got)
	}
	if lb := x.ByUUID()["u1"]; lb.Placement.Active != "n1" || lb.Status.State != model.StateActive {
		t.Fatalf("after a stale event: %+v", lb)
	}
	echo := v2.Clone()
	echo.Status = stale.Status
	if got := x.Apply(store.Event{Type: store.EventPut, LoadBalancer: echo}); got != Unchanged {
		t.Errorf("echo of our write: %v, want Unchanged", got)
	}
	if len(x.written) != 0 {
		t.Errorf("written not cleared by the echo: %v", x.written)
	}

	x.remove("u1")
	if got := x.Apply(store.Event{Type: store.EventPut, LoadBalancer: echo}); got != Unchanged || x.Len() != 0 {
		t.Errorf("stale PUT after our delete: %v, %d held", got, x.Len())
	}
	x.Apply(store.Event{Type: store.EventDelete, LoadBalancer: echo})
	if got := x.Apply(store.Event{Type: store.EventPut, LoadBalancer: echo}); got != SpecChanged || x.Len() != 1 {
		t.Errorf("someone else creates it after the confirmed delete: %v, %d held", got, x.Len())
	}
}

// A load balancer changed or deleted by someone else asks for a rebuild;
// a status change alone does not.
func TestIndexTellsSpecFromStatus(t *testing.T) {
	lb := &model.LoadBalancer{UUID: "u1", Name: "ns/a", VIP: "10.0.0.1", Sources: []model.Source{{Kind: "Ingress", Namespace: "ns", Name: "a"}}}
	x := NewIndex([]*model.LoadBalancer{lb})
	if got := x.Apply(store.Event{Type: store.EventPut, LoadBalancer: lb.Clone()}); got != Unchanged {
		t.Errorf("replay of what the index holds: %v", got)
	}
	reported := lb.Clone()
	reported.Status.State = model.StateActive
	if got := x.Apply(store.Event{Type: store.EventPut, LoadBalancer: reported}); got != StatusChanged {
		t.Errorf("agent report: %v, want StatusChanged", got)
	}
	edited := reported.Clone()
	edited.VIP = "10.0.0.9"
	if got := x.Apply(store.Event{Type: store.EventPut, LoadBalancer: edited}); got != SpecChanged {
		t.Errorf("spec edited by someone else: %v, want SpecChanged", got)
	}
	if got := x.Apply(store.Event{Type: store.EventDelete, LoadBalancer: edited}); got != SpecChanged || x.Len() != 0 {
		t.Errorf("deleted by someone else: %v, %d held", got, x.Len())
	}
}
