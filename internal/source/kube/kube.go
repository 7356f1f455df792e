// Package kube fills source.Snapshot from Kubernetes informers (Ingress,
// IngressClass, Service, EndpointSlice, TLS Secret, the Secrets Ingresses
// name in auth-secret, Node, the agents' heartbeat Leases, and the Gateway
// API's GatewayClass, Gateway, HTTPRoute, GRPCRoute, TCPRoute, TLSRoute, UDPRoute
// and ReferenceGrant when their CRDs are installed) for the controller. The first event after a quiet spell
// is taken at once (an endpoint change is served without waiting); the
// events that follow it within the quiet time are a burst, coalesced
// (Contour's rule: wait 100 ms for quiet, at most 500 ms) into one more
// snapshot, so a rolling update does not cause one rebuild per endpoint.
package kube

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"sort"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	"pier.dev/pier/internal/source"
)

// Options select what is watched.
type Options struct {
	// Namespace limits Ingresses, Services, EndpointSlices and Secrets to
	// one namespace (--watch-namespace); empty watches all.
	Namespace string
	// NodeSelector selects the nodes that may run HAProxy
	// (--node-selector); nil selects every node.
	NodeSelector labels.Selector
	// LeaseNamespace holds the agents' heartbeat Leases (the
	// controller's --lease-namespace); a node is placed on only while its
	// agent's Lease is fresh.
	LeaseNamespace string
	// Quiet and MaxDelay bound the debounce (defaults 100 ms and 500 ms).
	Quiet, MaxDelay time.Duration
	// Gateway, when set, watches the Gateway API (GatewayClass, Gateway,
	// HTTPRoute, ReferenceGrant, and Namespaces for their labels) if the
	// API server serves its CRDs; nil leaves it out.
	Gateway gwclient.Interface
	// Dynamic, with Gateway, reads TCPRoutes at v1 (the standard channel
	// since Gateway API v1.6), UDPRoutes at v1 (since v1.7) and TLSRoutes
	// (at v1, v1alpha3 or v1alpha2, the newest served), which Gateway's
	// typed client does not know; nil: v1alpha2 TCPRoutes and UDPRoutes
	// only and no TLSRoutes.
	Dynamic dynamic.Interface
	// GatewayRecheck is how often discovery is asked again while the
	// Gateway API CRDs are not installed (default 30 s).
	GatewayRecheck time.Duration
}

// Source watches the API server.
type Source struct {
	client kubernetes.Interface
	opts   Options
	logger *slog.Logger
}

// New returns a Source; Run starts it.
func New(client kubernetes.Interface, opts Options, logger *slog.Logger) *Source {
	if opts.Quiet == 0 {
		opts.Quiet = 100 * time.Millisecond
	}
	if opts.MaxDelay == 0 {
		opts.MaxDelay = 500 * time.Millisecond
	}
	if opts.NodeSelector == nil {
		opts.NodeSelector = labels.Everything()
	}
	if opts.GatewayRecheck == 0 {
		opts.GatewayRecheck = 30 * time.Second
	}
	return &Source{client: client, opts: opts, logger: logger}
}

// listers are the caches a snapshot is read from.
type listers struct {
	ingresses      func() ([]*networkingv1.Ingress, error)
	classes        func() ([]*networkingv1.IngressClass, error)
	services       func() ([]*corev1.Service, error)
	endpointSlices func() ([]*discoveryv1.EndpointSlice, error)
	secrets        func() ([]*corev1.Secret, error)
	// authSecrets are the Secrets the Ingresses name in auth-secret.
	authSecrets func([]*networkingv1.Ingress) []*corev1.Secret
	// configMaps are the ConfigMaps the Ingresses name in custom-headers.
	configMaps func([]*networkingv1.Ingress) []*corev1.ConfigMap
	// frontendCAs are the ConfigMaps the Gateways name as client
	// certificate CAs.
	frontendCAs func([]*gwv1.Gateway) []*corev1.ConfigMap
	// policyConfigMaps are those BackendTLSPolicies name as CAs.
	policyConfigMaps func([]*gwv1.BackendTLSPolicy) []*corev1.ConfigMap
	nodes            func() ([]*corev1.Node, error)
	leases           func() ([]*coordinationv1.Lease, error)
	// badNodeAddress reports a Node whose pier.dev/vrrp-address is not
	// an IP address.
	badNodeAddress func(node, value string)
	// gateway fills the Gateway API objects while support is on.
	gateway *gatewayWatch
}

// Run starts the informers, waits for their caches, then calls onChange
// with a fresh snapshot after every burst of changes (and once at the
// start), until ctx ends. onChange runs on Run's goroutine.
func (s *Source) Run(ctx context.Context, onChange func(*source.Snapshot)) error {
	if s.opts.LeaseNamespace == "" {
		return fmt.Errorf("kube source: no namespace for the agents' heartbeat Leases")
	}
	changed := make(chan struct{}, 1)
	handler := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { notify(changed) },
		UpdateFunc: func(old, cur any) { notifyIfChanged(changed, old, cur) },
		DeleteFunc: func(any) { notify(changed) },
	}
	leaseChanged := make(chan struct{}, 1)
	core, err := s.coreInformers(handler, leaseChanged)
	if err != nil {
		return err
	}
	gw := &gatewayWatch{client: s.opts.Gateway, dynamic: s.opts.Dynamic, discovery: s.client.Discovery(), core: s.client, namespace: s.opts.Namespace,
		recheck: s.opts.GatewayRecheck, logger: s.logger, handler: handler}
	gwSynced, err := gw.start(ctx, changed)
	if err != nil {
		return err
	}
	for _, f := range core.factories {
		f.Start(ctx.Done())
		defer f.Shutdown()
	}
	if !cache.WaitForCacheSync(ctx.Done(), append(core.synced, gwSynced...)...) {
		return ctx.Err()
	}
	s.logger.Info("informer caches synced", "namespace", s.opts.Namespace)
	auth := newAuthSecrets(s.client, changed, s.logger)
	defer auth.stop()
	maps := newNamedConfigMaps(s.client, changed, s.logger)
	defer maps.stop()
	cas := frontendCAs{watches: newNamedConfigMaps(s.client, changed, s.logger)}
	defer cas.watches.stop()
	policyMaps := newPolicyConfigMaps(s.client, changed, s.logger)
	defer policyMaps.stop()
	l := core.listers
	l.authSecrets = func(ings []*networkingv1.Ingress) []*corev1.Secret {
		return auth.objects(ctx, ings)
	}
	l.configMaps = func(ings []*networkingv1.Ingress) []*corev1.ConfigMap {
		return maps.objects(ctx, ings)
	}
	l.frontendCAs = func(gws []*gwv1.Gateway) []*corev1.ConfigMap {
		return cas.objects(ctx, gws)
	}
	l.policyConfigMaps = func(policies []*gwv1.BackendTLSPolicy) []*corev1.ConfigMap {
		return policyMaps.objectsNamed(ctx, source.BackendTLSCAConfigMaps(policies))
	}
	l.badNodeAddress = s.warnOnce()
	l.gateway = gw
	return s.loop(ctx, changed, leaseChanged, l, onChange)
}

// informerSet is what coreInformers makes: the factories to start, the
// syncs to wait for, and the listers their caches serve.
type informerSet struct {
	factories []informers.SharedInformerFactory
	synced    []cache.InformerSynced
	listers   listers
}

// coreInformers makes the informers of the objects that are always
// watched (the Gateway API's come and go with their CRDs): handler hears
// every change but the Leases', which go to leaseChanged. Nothing runs
// until the factories start.
func (s *Source) coreInformers(handler cache.ResourceEventHandler, leaseChanged chan struct{}) (informerSet, error) {
	nsFactory := informers.NewSharedInformerFactoryWithOptions(s.client, 0, informers.WithNamespace(s.opts.Namespace))
	// Only TLS Secrets: pier has no business caching every token in the
	// cluster (the field selector is served by the API server).
	secretFactory := informers.NewSharedInformerFactoryWithOptions(s.client, 0, informers.WithNamespace(s.opts.Namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.FieldSelector = "type=" + string(corev1.SecretTypeTLS) }))
	clusterFactory := informers.NewSharedInformerFactory(s.client, 0)
	leaseFactory := informers.NewSharedInformerFactoryWithOptions(s.client, 0, informers.WithNamespace(s.opts.LeaseNamespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = AgentLeaseSelector() }))

	ing := nsFactory.Networking().V1().Ingresses()
	svc := nsFactory.Core().V1().Services()
	eps := nsFactory.Discovery().V1().EndpointSlices()
	sec := secretFactory.Core().V1().Secrets()
	cls := clusterFactory.Networking().V1().IngressClasses()
	nodes := clusterFactory.Core().V1().Nodes()
	leases := leaseFactory.Coordination().V1().Leases()

	for _, inf := range []cache.SharedIndexInformer{ing.Informer(), svc.Informer(), eps.Informer(), sec.Informer(), cls.Informer(), nodes.Informer()} {
		if _, err := inf.AddEventHandler(handler); err != nil {
			return informerSet{}, fmt.Errorf("add event handler: %w", err)
		}
	}
	// Every renewal is an event (one per agent per --heartbeat-interval):
	// the loop only checks whether an agent came or went.
	if _, err := leases.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { notify(leaseChanged) },
		UpdateFunc: func(any, any) { notify(leaseChanged) },
		DeleteFunc: func(any) { notify(leaseChanged) },
	}); err != nil {
		return informerSet{}, fmt.Errorf("add lease event handler: %w", err)
	}
	return informerSet{
		factories: []informers.SharedInformerFactory{nsFactory, secretFactory, clusterFactory, leaseFactory},
		synced: []cache.InformerSynced{ing.Informer().HasSynced, svc.Informer().HasSynced, eps.Informer().HasSynced,
			sec.Informer().HasSynced, cls.Informer().HasSynced, nodes.Informer().HasSynced, leases.Informer().HasSynced},
		listers: listers{
			ingresses:      func() ([]*networkingv1.Ingress, error) { return ing.Lister().List(labels.Everything()) },
			classes:        func() ([]*networkingv1.IngressClass, error) { return cls.Lister().List(labels.Everything()) },
			services:       func() ([]*corev1.Service, error) { return svc.Lister().List(labels.Everything()) },
			endpointSlices: func() ([]*discoveryv1.EndpointSlice, error) { return eps.Lister().List(labels.Everything()) },
			secrets:        func() ([]*corev1.Secret, error) { return sec.Lister().List(labels.Everything()) },
			nodes:          func() ([]*corev1.Node, error) { return nodes.Lister().List(s.opts.NodeSelector) },
			leases:         func() ([]*coordinationv1.Lease, error) { return leases.Lister().List(labels.Everything()) },
		},
	}, nil
}

// loop debounces change notifications into snapshots. A Lease that
// expires sends no event, so a timer is armed for the earliest expiry
// among the fresh ones; a Lease event or that timer leads to a snapshot
// only when an agent came or went (as the outage rule judges it), not on
// a mere renewal.
func (s *Source) loop(ctx context.Context, changed, leaseChanged <-chan struct{}, l listers, onChange func(*source.Snapshot)) error {
	expiry := time.NewTimer(time.Hour)
	expiry.Stop()
	defer expiry.Stop()
	var last liveness
	o := &outage{logger: s.logger}
	judge := func() (liveness, error) {
		leases, err := l.leases()
		if err != nil {
			return liveness{}, fmt.Errorf("list leases: %w", err)
		}
		return o.judge(leases, time.Now()), nil
	}
	var emitted time.Time // when the last snapshot was handed over
	emit := func() error {
		defer func() { emitted = time.Now() }()
		lv, err := judge()
		if err != nil {
			return err
		}
		snap, err := l.snapshot(lv.alive)
		if err != nil {
			return err
		}
		s.logLiveness(last, lv)
		last = lv
		rearm(expiry, lv.next)
		onChange(snap)
		return nil
	}
	if err := emit(); err != nil {
		return err
	}
	for {
		objects := false
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
			objects = true
		case <-leaseChanged:
		case <-expiry.C:
		}
		if !objects {
			lv, err := judge()
			if err == nil && lv.sameAlive(last) {
				rearm(expiry, lv.next)
				continue
			}
		}
		if !leadingEdge(emitted, time.Now(), s.opts.Quiet) && !debounce(ctx, changed, s.opts.Quiet, s.opts.MaxDelay) {
			return nil
		}
		if err := emit(); err != nil {
			return err
		}
	}
}

// rearm sets t to fire just after next (a Lease is fresh strictly before
// its expiry), or stops it when no Lease is fresh.
func rearm(t *time.Timer, next time.Time) {
	if next.IsZero() {
		t.Stop()
		return
	}
	t.Reset(time.Until(next) + 10*time.Millisecond)
}

// logLiveness says which agents came or went since the last snapshot.
func (s *Source) logLiveness(before, now liveness) {
	for node := range now.alive {
		if !before.alive[node] {
			s.logger.Info("agent heartbeat fresh: node may be placed on", "node", node)
		}
	}
	for node := range before.alive {
		if !now.alive[node] {
			s.logger.Warn("agent heartbeat expired or gone: node no longer placed on", "node", node)
		}
	}
}

// leadingEdge reports whether a change at now is the first after a quiet
// spell: no snapshot for longer than quiet. It is taken at once; a change
// sooner is part of the burst the last snapshot began, and waits for it to
// settle (debounce).
func leadingEdge(emitted, now time.Time, quiet time.Duration) bool {
	return now.Sub(emitted) > quiet
}

// debounce waits until no change arrived for quiet, or maxDelay passed
// since the first one. It returns false if ctx ended.
func debounce(ctx context.Context, changed <-chan struct{}, quiet, maxDelay time.Duration) bool {
	deadline := time.NewTimer(maxDelay)
	defer deadline.Stop()
	for {
		idle := time.NewTimer(quiet)
		select {
		case <-ctx.Done():
			idle.Stop()
			return false
		case <-deadline.C:
			idle.Stop()
			return true
		case <-idle.C:
			return true
		case <-changed:
			idle.Stop()
		}
	}
}

func notify(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// notifyIfChanged ignores resyncs and Node heartbeats. An Ingress status
// change does trigger a pass, even pier's own: the writer skips what is
// already right, and a status someone else cleared must be repaired.
func notifyIfChanged(ch chan struct{}, old, cur any) {
	o, ok1 := old.(metav1.Object)
	c, ok2 := cur.(metav1.Object)
	if ok1 && ok2 && o.GetResourceVersion() == c.GetResourceVersion() {
		return
	}
	if on, ok := old.(*corev1.Node); ok {
		if cn, ok := cur.(*corev1.Node); ok && nodeReady(on) == nodeReady(cn) && maps.Equal(on.Labels, cn.Labels) &&
			sameAddress(on, cn) && on.Spec.Unschedulable == cn.Spec.Unschedulable {
			return // heartbeats
		}
	}
	notify(ch)
}

func (l listers) snapshot(agentAlive map[string]bool) (*source.Snapshot, error) {
	snap := &source.Snapshot{}
	var err error
	if snap.Ingresses, err = l.ingresses(); err != nil {
		return nil, fmt.Errorf("list ingresses: %w", err)
	}
	if snap.IngressClasses, err = l.classes(); err != nil {
		return nil, fmt.Errorf("list ingress classes: %w", err)
	}
	if snap.Services, err = l.services(); err != nil {
		return nil, fmt.Errorf("list services: %w", err)
	}
	if snap.EndpointSlices, err = l.endpointSlices(); err != nil {
		return nil, fmt.Errorf("list endpoint slices: %w", err)
	}
	if snap.Secrets, err = l.secrets(); err != nil {
		return nil, fmt.Errorf("list secrets: %w", err)
	}
	if l.authSecrets != nil {
		snap.Secrets = append(snap.Secrets, l.authSecrets(snap.Ingresses)...)
	}
	if l.configMaps != nil {
		snap.ConfigMaps = l.configMaps(snap.Ingresses)
	}
	nodes, err := l.nodes()
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	snap.Nodes = placementNodes(nodes, agentAlive, l.badNodeAddress)
	if err := l.gateway.fill(snap); err != nil {
		return nil, err
	}
	if l.frontendCAs != nil {
		snap.ConfigMaps = addConfigMaps(snap.ConfigMaps, l.frontendCAs(snap.Gateways))
	}
	if l.policyConfigMaps != nil {
		snap.ConfigMaps = addConfigMaps(snap.ConfigMaps, l.policyConfigMaps(snap.BackendTLSPolicies))
	}
	sortByName(snap.Ingresses)
	sortByName(snap.IngressClasses)
	sortByName(snap.Services)
	sortByName(snap.EndpointSlices)
	sortByName(snap.Secrets)
	sortByName(snap.ConfigMaps)
	return snap, nil
}

func sortByName[T metav1.Object](list []T) {
	sort.Slice(list, func(i, j int) bool {
		if list[i].GetNamespace() != list[j].GetNamespace() {
			return list[i].GetNamespace() < list[j].GetNamespace()
		}
		return list[i].GetName() < list[j].GetName()
	})
}
