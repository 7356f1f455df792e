package kube

import (
	"context"
	"log/slog"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"

	"pier.dev/pier/internal/source"
)

// TestLoopLeadingEdge: a change after a quiet spell is a snapshot at
// once; the changes that follow it within the quiet time are one more
// snapshot once they settle, not one each.
func TestLoopLeadingEdge(t *testing.T) {
	const quiet = time.Second
	s := New(nil, Options{LeaseNamespace: "pier", Quiet: quiet, MaxDelay: 5 * quiet}, slog.New(slog.DiscardHandler))
	l := listers{
		ingresses:      func() ([]*networkingv1.Ingress, error) { return nil, nil },
		classes:        func() ([]*networkingv1.IngressClass, error) { return nil, nil },
		services:       func() ([]*corev1.Service, error) { return nil, nil },
		endpointSlices: func() ([]*discoveryv1.EndpointSlice, error) { return nil, nil },
		secrets:        func() ([]*corev1.Secret, error) { return nil, nil },
		nodes:          func() ([]*corev1.Node, error) { return nil, nil },
		leases:         func() ([]*coordinationv1.Lease, error) { return nil, nil },
	}
	changed, leaseChanged := make(chan struct{}, 1), make(chan struct{}, 1)
	snaps := make(chan time.Time, 16)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- s.loop(ctx, changed, leaseChanged, l, func(*source.Snapshot) { snaps <- time.Now() })
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("loop: %v", err)
		}
	}()
	next := func(what string, within time.Duration) time.Time {
		t.Helper()
		select {
		case at := <-snaps:
			return at
		case <-time.After(within):
			t.Fatalf("no snapshot for %s within %v", what, within)
			return time.Time{}
		}
	}
	next("the start", 5*time.Second)

	time.Sleep(quiet + 100*time.Millisecond)
	sent := time.Now()
	notify(changed)
	if took := next("a change after a quiet spell", quiet).Sub(sent); took > quiet/2 {
		t.Errorf("a change after a quiet spell waited %v, as if debounced", took)
	}

	var last time.Time
	for range 3 {
		last = time.Now()
		notify(changed)
		time.Sleep(50 * time.Millisecond)
	}
	if at := next("the burst", 10*quiet); at.Sub(last) < quiet-10*time.Millisecond {
		t.Errorf("the burst's snapshot came %v after its last change, before the quiet time (%v)", at.Sub(last), quiet)
	}
	select {
	case <-snaps:
		t.Error("the burst made more than one snapshot after the leading one")
	case <-time.After(2 * quiet):
	}
}
