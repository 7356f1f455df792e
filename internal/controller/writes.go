package controller

import (
	"context"
	"fmt"
	"sync"

	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/store"
)

// write is one load balancer keepAll stores: lb, prepared from want,
// over old (the index's entry; nil for a new one).
type write struct{ want, old, lb *model.LoadBalancer }

// keepAll is keep for many load balancers, unchanged ones skipped, with
// as many writes at once as the store takes (store.ConcurrentWriter):
// over the network each write waits a round trip, and one at a time held
// a cold start of thousands to a few a second. The index then records
// the ones stored, in order, also when another failed: it must say what
// the store holds. The first failure is returned.
func (r *Reconciler) keepAll(ctx context.Context, writes []write) error {
	var todo []write
	for _, w := range writes {
		if w.old != nil && unchanged(w.old, w.lb) {
			r.last.remember(w.want, w.old)
			continue
		}
		todo = append(todo, w)
	}
	parallel := 1
	if c, ok := r.Store.(store.ConcurrentWriter); ok {
		parallel = max(1, c.WriteConcurrency())
	}
	if parallel == 1 || len(todo) < 2 {
		for _, w := range todo {
			if err := r.keep(ctx, w.want, w.old, w.lb, false); err != nil {
				return err
			}
		}
		return nil
	}
	errs := make([]error, len(todo))
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	slots := make(chan struct{}, parallel)
	var wg sync.WaitGroup
	for i, w := range todo {
		slots <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-slots; wg.Done() }()
			if errs[i] = r.put(ctx, w.old, w.lb); errs[i] != nil {
				cancel() // the pass fails: the ones not begun need not be
			}
		}()
	}
	wg.Wait()
	var first error
	for i, w := range todo {
		if errs[i] != nil {
			if first == nil {
				first = fmt.Errorf("store load balancer %s: %w", w.lb.Name, errs[i])
			}
			continue
		}
		r.stored(w.want, w.old, w.lb)
	}
	return first
}

// put writes lb: CreateSpec when the index has no old one and the store
// has it (a new load balancer then costs one request, not a read and a
// create), otherwise PutSpec.
func (r *Reconciler) put(ctx context.Context, old, lb *model.LoadBalancer) error {
	if c, ok := r.Store.(store.Creator); ok && old == nil {
		return c.CreateSpec(ctx, lb)
	}
	return r.Store.PutSpec(ctx, lb)
}

// keep stores lb, prepared from want, unless old (the index's entry)
// already holds it, and records what this Apply made of want. members
// says that lb may differ from old in pool members alone (ApplyChanged):
// a store that can (store.MemberWriter) hands it on before it is durable.
func (r *Reconciler) keep(ctx context.Context, want, old, lb *model.LoadBalancer, members bool) error {
	if old != nil && unchanged(old, lb) {
		r.last.remember(want, old)
		return nil
	}
	put := func(ctx context.Context, lb *model.LoadBalancer) error { return r.put(ctx, old, lb) }
	if w, ok := r.Store.(store.MemberWriter); ok && members {
		put = w.PutMembers
	}
	if err := put(ctx, lb); err != nil {
		return fmt.Errorf("store load balancer %s: %w", lb.Name, err)
	}
	r.stored(want, old, lb)
	return nil
}

// stored records in the index and in last that lb, prepared from want
// over old, is stored.
func (r *Reconciler) stored(want, old, lb *model.LoadBalancer) {
	r.Index.put(lb)
	r.last.remember(want, r.Index.lbs[want.UUID])
	r.Logger.Info("load balancer stored", "lb", lb.Name, "uuid", lb.UUID, "vip", lb.VIP, "fip", lb.FIP,
		"active", lb.Placement.Active, "standby", lb.Placement.Standby, "router_id", lb.Placement.RouterID,
		"created", old == nil)
}
