// Package nodesim is a kubelet and scheduler stand-in for tests against a
// real API server: it registers Nodes and keeps them Ready, binds pending
// Pods to them round robin, and "runs" every bound Pod as an in-process
// echo backend (internal/echo) on its own pod IP, reporting the Pod
// Running and Ready once the backend answers. With kube-controller-manager
// running, Deployments, ReplicaSets and EndpointSlices then behave as in a
// cluster, and the endpoints are real sockets.
//
// Every container is taken to be the upstream conformance echo server: the
// backend listens on the first container's first containerPort (3000 when
// none) and reports NAMESPACE, INGRESS_NAME, SERVICE_NAME and POD_NAME from
// the container's environment, resolved as the kubelet would.
//
// Pod IPs must be local addresses: run the test binary in a namespace made
// by test/netns with the pod prefix (10.244.0.1/16) on lo. Start fails
// otherwise, before any traffic is sent.
package nodesim

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	listersv1 "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// Defaults for Options.
var (
	DefaultPodCIDR   = netip.MustParsePrefix("10.244.0.0/16")
	DefaultNodes     = []string{"node-a", "node-b"}
	DefaultHeartbeat = 10 * time.Second
)

// DefaultPort is the upstream echo server's container port, used when a
// container declares none.
const DefaultPort = 3000

// Options configures a Sim. The zero value is usable.
type Options struct {
	// Nodes are the Node names to register (DefaultNodes when empty).
	Nodes []string
	// PodCIDR is the pool for pod IPs (DefaultPodCIDR when invalid). Its
	// network and first address are skipped (netns puts the first on lo);
	// the next len(Nodes) addresses are the Nodes' InternalIPs.
	PodCIDR netip.Prefix
	// StopGrace is how long a Pod's backend keeps serving after the Pod is
	// marked for deletion (or vanishes), like a container that drains
	// before it exits. Zero stops it at once, as the echo image does on
	// SIGTERM.
	StopGrace time.Duration
	// Heartbeat is the Node status and Lease renewal period
	// (DefaultHeartbeat when zero).
	Heartbeat time.Duration
	// Logger receives progress lines; nil discards them.
	Logger *slog.Logger
}

// Sim is a running node simulator. Stop ends it.
type Sim struct {
	client kubernetes.Interface
	opts   Options
	log    *slog.Logger
	nodes  []simNode

	ctx     context.Context
	cancel  context.CancelFunc
	factory informers.SharedInformerFactory
	pods    listersv1.PodLister
	queue   workqueue.TypedRateLimitingInterface[string]
	wg      sync.WaitGroup
	stop    sync.Once

	// Owned by the single worker goroutine (and by Stop once it is gone).
	ipam     *allocator
	backends map[string]*backend // by namespace/name
	nextNode int
}

type simNode struct {
	name string
	ip   netip.Addr
}

// Start registers the Nodes, syncs a Pod informer and starts serving. The
// Sim runs until ctx ends or Stop is called; call Stop in either case to
// wait for everything to end.
func Start(ctx context.Context, client kubernetes.Interface, opts Options) (*Sim, error) {
	s, err := newSim(client, opts)
	if err != nil {
		return nil, err
	}
	s.ctx, s.cancel = context.WithCancel(ctx)
	if err := s.checkLocal(); err != nil {
		s.cancel()
		return nil, err
	}
	if err := s.registerNodes(s.ctx); err != nil {
		s.cancel()
		return nil, err
	}
	s.factory = informers.NewSharedInformerFactory(client, 0)
	podInformer := s.factory.Core().V1().Pods()
	s.pods = podInformer.Lister()
	if _, err := podInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    s.enqueue,
		UpdateFunc: func(_, obj any) { s.enqueue(obj) },
		DeleteFunc: s.enqueue,
	}); err != nil {
		s.cancel()
		return nil, fmt.Errorf("nodesim: %w", err)
	}
	s.factory.Start(s.ctx.Done())
	if !cache.WaitForCacheSync(s.ctx.Done(), podInformer.Informer().HasSynced) {
		s.Stop()
		return nil, fmt.Errorf("nodesim: pod informer did not sync: %w", context.Cause(s.ctx))
	}
	s.replayAddresses()
	s.wg.Add(3)
	go func() { defer s.wg.Done(); s.work() }()
	go func() { defer s.wg.Done(); s.heartbeat() }()
	go func() { defer s.wg.Done(); <-s.ctx.Done(); s.queue.ShutDown() }()
	s.log.Info("nodesim started", "nodes", s.opts.Nodes, "podCIDR", s.opts.PodCIDR)
	return s, nil
}

func newSim(client kubernetes.Interface, opts Options) (*Sim, error) {
	if len(opts.Nodes) == 0 {
		opts.Nodes = DefaultNodes
	}
	if !opts.PodCIDR.IsValid() {
		opts.PodCIDR = DefaultPodCIDR
	}
	if opts.Heartbeat <= 0 {
		opts.Heartbeat = DefaultHeartbeat
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	ipam, err := newAllocator(opts.PodCIDR)
	if err != nil {
		return nil, fmt.Errorf("nodesim: %w", err)
	}
	s := &Sim{
		client: client, opts: opts, log: opts.Logger, ipam: ipam,
		backends: map[string]*backend{},
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "nodesim"}),
	}
	seen := map[string]bool{}
	for _, name := range opts.Nodes {
		if name == "" || seen[name] {
			return nil, fmt.Errorf("nodesim: node name %q is empty or repeated", name)
		}
		seen[name] = true
		ip, err := ipam.Assign("node/" + name)
		if err != nil {
			return nil, fmt.Errorf("nodesim: node %s: %w", name, err)
		}
		s.nodes = append(s.nodes, simNode{name: name, ip: ip})
	}
	return s, nil
}

// Stop stops the worker, every backend and the informers, and returns when
// all of them have ended. Nodes and Pods stay in the API as they are, like
// after a node crash; a new Sim for the same Nodes adopts the Pods.
func (s *Sim) Stop() {
	s.stop.Do(func() {
		s.cancel()
		s.queue.ShutDown()
		s.wg.Wait()
		for key := range s.backends {
			s.drop(key)
		}
		if s.factory != nil {
			s.factory.Shutdown()
		}
		s.log.Info("nodesim stopped")
	})
}

// NodeIP is the InternalIP of a Node the Sim registered.
func (s *Sim) NodeIP(name string) (netip.Addr, bool) {
	n, ok := s.node(name)
	return n.ip, ok
}

func (s *Sim) node(name string) (simNode, bool) {
	for _, n := range s.nodes {
		if n.name == name {
			return n, true
		}
	}
	return simNode{}, false
}

// enqueue takes every Pod that is pending or on our Nodes; the worker
// decides. Tombstones carry the last known state.
func (s *Sim) enqueue(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok || (pod.Spec.NodeName != "" && !s.ours(pod.Spec.NodeName)) {
		return
	}
	key, err := cache.MetaNamespaceKeyFunc(pod)
	if err == nil {
		s.queue.Add(key)
	}
}

func (s *Sim) ours(node string) bool {
	_, ok := s.node(node)
	return ok
}

// work is the only goroutine that touches backends and the allocator, so
// a Pod's events are handled one at a time and in order.
func (s *Sim) work() {
	for {
		key, quit := s.queue.Get()
		if quit {
			return
		}
		err := s.sync(s.ctx, key)
		switch {
		case err == nil:
			s.queue.Forget(key)
		case errors.Is(err, context.Canceled):
		default:
			s.log.Warn("nodesim: sync failed; will retry", "pod", key, "err", err)
			s.queue.AddRateLimited(key)
		}
		s.queue.Done(key)
	}
}

// replayAddresses reserves the IPs of Pods already running on our Nodes
// (a Sim restarted for the same Nodes), before any new Pod gets one.
func (s *Sim) replayAddresses() {
	pods, _ := s.pods.List(everything)
	for _, pod := range pods {
		ip, err := netip.ParseAddr(pod.Status.PodIP)
		if err != nil || !s.ours(pod.Spec.NodeName) || pod.Spec.HostNetwork {
			continue
		}
		if err := s.ipam.Reserve(string(pod.UID), ip); err != nil {
			s.log.Warn("nodesim: cannot keep a pod's address", "namespace", pod.Namespace, "pod", pod.Name, "err", err)
		}
	}
}
