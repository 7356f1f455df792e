package kube

import (
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
)

// TestOutageKeepsNodes walks an API server outage of 20 s with two agents
// (10 s Leases) and the renewals after it, one second apart.
func TestOutageKeepsNodes(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	lease := func(node string, renewed float64) *coordinationv1.Lease {
		return NewAgentLease(leaseNS, node, 10*time.Second, at(renewed))
	}
	o := &outage{logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	steps := []struct {
		name   string
		now    float64
		leases []*coordinationv1.Lease
		want   string // alive nodes
	}{
		{"both renewing", 0, []*coordinationv1.Lease{lease("a", 0), lease("b", 0)}, "[a b]"},
		{"silence: both Leases expired", 15, []*coordinationv1.Lease{lease("a", 0), lease("b", 0)}, "[a b]"},
		{"a renews first", 21, []*coordinationv1.Lease{lease("a", 21), lease("b", 0)}, "[a b]"},
		{"b renews a second later", 22, []*coordinationv1.Lease{lease("a", 21), lease("b", 22)}, "[a b]"},
		{"grace over, both fresh", 31.5, []*coordinationv1.Lease{lease("a", 31), lease("b", 31)}, "[a b]"},
		{"then b alone fails: a real failure", 45, []*coordinationv1.Lease{lease("a", 44), lease("b", 31)}, "[a]"},
	}
	for _, st := range steps {
		lv := o.judge(st.leases, at(st.now))
		if got := fmt.Sprint(slices.Sorted(maps.Keys(lv.alive))); got != st.want {
			t.Fatalf("%s (t=%vs): alive %s, want %s", st.name, st.now, got, st.want)
		}
	}
}

// After an outage, a node whose agent does not come back within one Lease
// duration of the first renewal is given up; a Lease deleted (a drained
// exit) is no silence.
func TestOutageGraceEnds(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	lease := func(node string, renewed float64) *coordinationv1.Lease {
		return NewAgentLease(leaseNS, node, 10*time.Second, at(renewed))
	}
	o := &outage{logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	o.judge([]*coordinationv1.Lease{lease("a", 0), lease("b", 0)}, at(0))
	o.judge([]*coordinationv1.Lease{lease("a", 0), lease("b", 0)}, at(15))
	lv := o.judge([]*coordinationv1.Lease{lease("a", 20), lease("b", 0)}, at(20))
	if !lv.alive["b"] || !lv.next.Equal(at(30)) {
		t.Fatalf("at the first renewal: %+v, want b kept until 30 s", lv)
	}
	if lv := o.judge([]*coordinationv1.Lease{lease("a", 29), lease("b", 0)}, at(30)); lv.alive["b"] || !lv.alive["a"] {
		t.Errorf("after the grace: alive %v, want a alone", lv.alive)
	}

	d := &outage{logger: o.logger}
	d.judge([]*coordinationv1.Lease{lease("a", 0)}, at(0))
	if lv := d.judge(nil, at(1)); len(lv.alive) != 0 {
		t.Errorf("every Lease deleted: alive %v, want none", lv.alive)
	}
}

// Leases expire one renewal interval apart when the API server goes away:
// the first to expire is held until another agent renews after its
// expiry (a node failure) or every Lease has expired (an outage).
func TestExpiryHeldUntilProven(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	lease := func(node string, renewed float64) *coordinationv1.Lease {
		return NewAgentLease(leaseNS, node, 10*time.Second, at(renewed))
	}
	alive := func(lv liveness) string { return fmt.Sprint(slices.Sorted(maps.Keys(lv.alive))) }
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))

	failure := &outage{logger: quiet}
	failure.judge([]*coordinationv1.Lease{lease("a", 0), lease("b", 0.4)}, at(0.5))
	if got := alive(failure.judge([]*coordinationv1.Lease{lease("a", 0), lease("b", 9.9)}, at(10.1))); got != "[a b]" {
		t.Errorf("a expired, b renewed before that: alive %s, want a held", got)
	}
	if got := alive(failure.judge([]*coordinationv1.Lease{lease("a", 0), lease("b", 10.4)}, at(10.5))); got != "[b]" {
		t.Errorf("b renewed after a expired: alive %s, want b alone", got)
	}

	down := &outage{logger: quiet}
	down.judge([]*coordinationv1.Lease{lease("a", 0), lease("b", 0.4)}, at(0.5))
	if got := alive(down.judge([]*coordinationv1.Lease{lease("a", 0), lease("b", 0.4)}, at(10.1))); got != "[a b]" {
		t.Errorf("a expired first in an outage: alive %s, want a held", got)
	}
	if got := alive(down.judge([]*coordinationv1.Lease{lease("a", 0), lease("b", 0.4)}, at(10.5))); got != "[a b]" {
		t.Errorf("every Lease expired: alive %s, want both kept", got)
	}
	if got := alive(down.judge([]*coordinationv1.Lease{lease("a", 0), lease("b", 30)}, at(30))); got != "[a b]" {
		t.Errorf("b back first: alive %s, want a in its grace", got)
	}
}
