package cluster

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	coordinationclient "k8s.io/client-go/kubernetes/typed/coordination/v1"
	coordinationlisters "k8s.io/client-go/listers/coordination/v1"
	"k8s.io/client-go/tools/cache"

	sourcekube "pier.dev/pier/internal/source/kube"
)

// heartbeat keeps this node's agent Lease fresh: the controller places
// load balancers only on nodes whose Lease is fresh, and re-places those
// of a node whose Lease expired (its standby becomes active).
type heartbeat struct {
	leases    coordinationclient.LeaseInterface
	namespace string
	node      string
	interval  time.Duration
	timeout   time.Duration
	// reportsWritten is the agent's Agent.ReportsWrittenAt, written on
	// the Lease at each renewal.
	reportsWritten func() time.Time
	logger         *slog.Logger

	lease   *coordinationv1.Lease // as last written; nil: read or create it first
	failing bool                  // the last renewal failed (logged once per outage)
}

func newHeartbeat(client kubernetes.Interface, cfg AgentConfig, reportsWritten func() time.Time, logger *slog.Logger) *heartbeat {
	return &heartbeat{leases: client.CoordinationV1().Leases(cfg.LeaseNamespace), namespace: cfg.LeaseNamespace, node: cfg.Node,
		interval: cfg.HeartbeatInterval, timeout: cfg.HeartbeatTimeout, reportsWritten: reportsWritten,
		logger: logger.With("component", "heartbeat")}
}

// run renews the Lease every interval until ctx ends. A failed renewal is
// retried at the next tick: the API server being away is no reason to
// stop, and the Lease simply expires if it stays away.
func (h *heartbeat) run(ctx context.Context) {
	tick := time.NewTicker(h.interval)
	defer tick.Stop()
	for {
		h.renew(ctx)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func (h *heartbeat) renew(parent context.Context) {
	// A renewal slower than the interval is late anyway; the next tick
	// tries again rather than piling up behind it.
	ctx, cancel := context.WithTimeout(parent, h.interval)
	defer cancel()
	err := h.write(ctx)
	switch {
	case parent.Err() != nil:
		// Shutting down: an interrupted renewal is no failure.
	case err != nil:
		if !h.failing {
			h.logger.Warn("heartbeat Lease not renewed; retrying every interval", "lease", sourcekube.AgentLeaseName(h.node),
				"interval", h.interval, "error", err)
		}
		h.failing = true
	case h.failing:
		h.logger.Info("heartbeat Lease renewed again", "lease", sourcekube.AgentLeaseName(h.node))
		h.failing = false
	}
}

// write renews the Lease last written, reading or creating it when that
// is unknown (start, a conflict, someone deleted it).
func (h *heartbeat) write(ctx context.Context) error {
	// Read before now: the reports are written through a time no later
	// than the renewal that carries it.
	written := h.reportsWritten()
	now := time.Now()
	if h.lease == nil {
		l, err := h.leases.Get(ctx, sourcekube.AgentLeaseName(h.node), metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			fresh := sourcekube.NewAgentLease(h.namespace, h.node, h.timeout, now)
			sourcekube.SetReportsWrittenAt(fresh, written)
			created, err := h.leases.Create(ctx, fresh, metav1.CreateOptions{})
			if err != nil {
				return fmt.Errorf("create lease: %w", err)
			}
			h.lease = created
			h.logger.Info("heartbeat Lease created", "lease", created.Name, "duration", h.timeout, "interval", h.interval)
			return nil
		}
		if err != nil {
			return fmt.Errorf("get lease: %w", err)
		}
		h.lease = l
	}
	l := h.lease.DeepCopy()
	sourcekube.RenewAgentLease(l, h.node, h.timeout, now)
	sourcekube.SetReportsWrittenAt(l, written)
	updated, err := h.leases.Update(ctx, l, metav1.UpdateOptions{})
	if err != nil {
		h.lease = nil
		return fmt.Errorf("update lease: %w", err)
	}
	h.lease = updated
	return nil
}

// remove deletes the Lease, so the controller re-places this node's load
// balancers at once instead of after the timeout (--drain-on-exit).
func (h *heartbeat) remove() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := h.leases.Delete(ctx, sourcekube.AgentLeaseName(h.node), metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		h.logger.Warn("heartbeat Lease not deleted; the controller re-places this node's load balancers when it expires",
			"lease", sourcekube.AgentLeaseName(h.node), "timeout", h.timeout, "error", err)
		return
	}
	h.logger.Info("heartbeat Lease deleted: the controller re-places this node's load balancers now",
		"lease", sourcekube.AgentLeaseName(h.node))
}

// leaseHeartbeats tells the agent whether a peer node's agent is alive,
// from an informer on the agents' Leases (agent.Heartbeats).
type leaseHeartbeats struct {
	leases coordinationlisters.LeaseNamespaceLister
	// factory runs the informer; its Shutdown waits for it to stop once
	// the stop context ended (tests).
	factory informers.SharedInformerFactory
}

// Alive: the node's Lease exists and was renewed within its duration.
func (h leaseHeartbeats) Alive(node string) bool {
	l, err := h.leases.Get(sourcekube.AgentLeaseName(node))
	return err == nil && sourcekube.LeaseAlive(l, time.Now())
}

// ReportsWrittenAt is the time up to which node's agent had written its
// status reports when it last renewed its Lease (its own clock); the zero
// time when unknown.
func (h leaseHeartbeats) ReportsWrittenAt(node string) time.Time {
	l, err := h.leases.Get(sourcekube.AgentLeaseName(node))
	if err != nil {
		return time.Time{}
	}
	return sourcekube.ReportsWrittenAt(l)
}

// startLeaseHeartbeats runs the Lease informer until stop ends and waits
// for its cache (or for ready to end): an agent must not take every peer
// for dead because it has not listed them yet.
func startLeaseHeartbeats(ready, stop context.Context, client kubernetes.Interface, namespace string) (leaseHeartbeats, error) {
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = sourcekube.AgentLeaseSelector() }))
	leases := factory.Coordination().V1().Leases()
	inf := leases.Informer()
	factory.Start(stop.Done())
	go func() {
		<-stop.Done()
		factory.Shutdown()
	}()
	if !cache.WaitForCacheSync(ready.Done(), inf.HasSynced) {
		return leaseHeartbeats{}, fmt.Errorf("agent leases in %s: cache not synced: %w", namespace, ready.Err())
	}
	return leaseHeartbeats{leases: leases.Lister().Leases(namespace), factory: factory}, nil
}
