package kube

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwv1alpha2 "sigs.k8s.io/gateway-api/apis/v1alpha2"
	gwv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"
	gwclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"
	gwinformers "sigs.k8s.io/gateway-api/pkg/client/informers/externalversions"

	"pier.dev/pier/internal/source"
)

// gatewayResources are the Gateway API resources pier watches, by group
// version: the standard channel of v1.4 (ReferenceGrant is v1beta1
// there).
var gatewayResources = []struct {
	groupVersion string
	resources    []string
}{
	{gwv1.GroupVersion.String(), []string{"gatewayclasses", "gateways", "httproutes"}},
	{gwv1beta1.GroupVersion.String(), []string{"referencegrants"}},
}

// gatewayAPIServed asks discovery whether the API server serves every
// Gateway API resource pier watches. A group or resource that is not
// served is a reason (the CRDs are not installed, or too old); an error
// is a failure to ask, worth a retry.
func gatewayAPIServed(dc discovery.DiscoveryInterface) (served bool, reason string, err error) {
	for _, gv := range gatewayResources {
		list, err := dc.ServerResourcesForGroupVersion(gv.groupVersion)
		if apierrors.IsNotFound(err) {
			return false, gv.groupVersion + " is not served: the Gateway API CRDs are not installed", nil
		}
		if err != nil {
			return false, "", fmt.Errorf("discovery of %s: %w", gv.groupVersion, err)
		}
		have := map[string]bool{}
		for _, r := range list.APIResources {
			have[r.Name] = true
		}
		for _, r := range gv.resources {
			if !have[r] {
				return false, fmt.Sprintf("%s does not serve %s: install the Gateway API standard channel CRDs (v1.4 or later)", gv.groupVersion, r), nil
			}
		}
	}
	return true, "", nil
}

// gatewayListers read the Gateway API caches (and Namespaces, whose
// labels allowedRoutes selectors test). Set once the caches synced.
type gatewayListers struct {
	classes      func() ([]*gwv1.GatewayClass, error)
	gateways     func() ([]*gwv1.Gateway, error)
	routes       func() ([]*gwv1.HTTPRoute, error)
	grpcRoutes   func() ([]*gwv1.GRPCRoute, error)        // nil: GRPCRoutes not watched
	udpRoutes    func() ([]*gwv1alpha2.UDPRoute, error)   // nil: UDPRoutes not watched
	tcpRoutes    func() ([]*gwv1alpha2.TCPRoute, error)   // nil: TCPRoutes not watched
	tlsRoutes    func() ([]*gwv1alpha2.TLSRoute, error)   // nil: TLSRoutes not watched
	listenerSets func() ([]*source.ListenerSet, error)    // nil: ListenerSets not watched
	policies     func() ([]*gwv1.BackendTLSPolicy, error) // nil: BackendTLSPolicies not watched
	grants       func() ([]*gwv1beta1.ReferenceGrant, error)
	namespaces   func() ([]*corev1.Namespace, error)
}

// gatewayWatch runs the Gateway API informers when the API server serves
// the CRDs and RBAC lets pier list them. Otherwise pier serves Ingresses
// as before and says once why Gateway API support is off; it looks again
// every recheck, and starts the informers (and a new snapshot) when the
// CRDs appear or the permission is granted.
type gatewayWatch struct {
	client    gwclient.Interface // nil: Gateway API support not wanted
	dynamic   dynamic.Interface  // v1 TCPRoutes (tcproutes.go) and UDPRoutes (udproutes.go), TLSRoutes (tlsroutes.go); nil: v1alpha2 TCPRoutes and UDPRoutes only
	discovery discovery.DiscoveryInterface
	core      kubernetes.Interface
	namespace string
	recheck   time.Duration
	logger    *slog.Logger
	handler   cache.ResourceEventHandler

	listers atomic.Pointer[gatewayListers]
}

// start decides at once whether the Gateway API is served: if it is, its
// caches must sync before the first snapshot, or a restart would
// translate no Gateway and delete their load balancers. The returned
// functions are the extra HasSynced checks.
func (w *gatewayWatch) start(ctx context.Context, changed chan struct{}) ([]cache.InformerSynced, error) {
	if w.client == nil {
		return nil, nil
	}
	served, reason, err := w.served(ctx)
	if err != nil {
		return nil, err
	}
	if served {
		synced, l := w.run(ctx)
		w.listers.Store(l) // Run waits for synced before any snapshot
		return synced, nil
	}
	w.logger.Warn("Gateway API support is off; Ingresses are served as usual", "reason", reason,
		"recheck", w.recheck)
	go w.wait(ctx, changed)
	return nil, nil
}

// served retries discovery errors (the API server restarting) until ctx
// ends; a clear answer returns at once.
func (w *gatewayWatch) served(ctx context.Context) (bool, string, error) {
	for {
		served, reason, err := gatewayAPIServed(w.discovery)
		if err == nil && served {
			reason, err = w.forbidden(ctx)
			served = reason == ""
		}
		if err == nil {
			return served, reason, nil
		}
		w.logger.Debug("Gateway API discovery failed; retrying", "error", err)
		select {
		case <-ctx.Done():
			return false, "", ctx.Err()
		case <-time.After(2 * time.Second):
		}
	}
}

// forbidden lists one object of each kind: an informer whose list is
// forbidden retries forever and its cache never syncs, which would hold
// up every snapshot (Ingresses included) behind an RBAC that predates
// the Gateway API. It returns the reason when one list is forbidden.
func (w *gatewayWatch) forbidden(ctx context.Context) (string, error) {
	one := metav1.ListOptions{Limit: 1}
	lists := []struct {
		what string
		list func() error
	}{
		{"gatewayclasses", func() error { _, err := w.client.GatewayV1().GatewayClasses().List(ctx, one); return err }},
		{"gateways", func() error { _, err := w.client.GatewayV1().Gateways(w.namespace).List(ctx, one); return err }},
		{"httproutes", func() error { _, err := w.client.GatewayV1().HTTPRoutes(w.namespace).List(ctx, one); return err }},
		{"referencegrants", func() error {
			_, err := w.client.GatewayV1beta1().ReferenceGrants(w.namespace).List(ctx, one)
			return err
		}},
		{"namespaces", func() error { _, err := w.core.CoreV1().Namespaces().List(ctx, one); return err }},
	}
	for _, l := range lists {
		err := l.list()
		if apierrors.IsForbidden(err) {
			return "listing " + l.what + " is forbidden: grant the controller the Gateway API rules of deploy/rbac.yaml", nil
		}
		if err != nil {
			return "", fmt.Errorf("list %s: %w", l.what, err)
		}
	}
	return "", nil
}

// grpcRoutesUnwatched says why GRPCRoutes cannot be watched ("" when
// they can): their CRD came to the standard channel after the others and
// RBAC written before pier served them does not grant them, so a cluster
// without them keeps the rest of the Gateway API rather than losing it
// all (an informer that cannot list never syncs).
func (w *gatewayWatch) grpcRoutesUnwatched(ctx context.Context) string {
	list, err := w.discovery.ServerResourcesForGroupVersion(gwv1.GroupVersion.String())
	if err != nil {
		return "discovery of " + gwv1.GroupVersion.String() + ": " + err.Error()
	}
	if !servesResource(list, "grpcroutes") {
		return gwv1.GroupVersion.String() + " does not serve grpcroutes: install the standard channel's GRPCRoute CRD"
	}
	_, err = w.client.GatewayV1().GRPCRoutes(w.namespace).List(ctx, metav1.ListOptions{Limit: 1})
	switch {
	case apierrors.IsForbidden(err):
		return "listing grpcroutes is forbidden: grant the controller the Gateway API rules of deploy/rbac.yaml"
	case err != nil:
		return "list grpcroutes: " + err.Error()
	}
	return ""
}

// backendTLSPoliciesUnwatched says why BackendTLSPolicies cannot be
// watched ("" when they can): their CRD came to the standard channel in
// v1.4 and RBAC written before pier read them does not grant them; their
// absence costs only backend TLS verification.
func (w *gatewayWatch) backendTLSPoliciesUnwatched(ctx context.Context) string {
	list, err := w.discovery.ServerResourcesForGroupVersion(gwv1.GroupVersion.String())
	if err != nil {
		return "discovery of " + gwv1.GroupVersion.String() + ": " + err.Error()
	}
	if !servesResource(list, "backendtlspolicies") {
		return gwv1.GroupVersion.String() + " does not serve backendtlspolicies: install the standard channel's BackendTLSPolicy CRD (v1.4 or later)"
	}
	_, err = w.client.GatewayV1().BackendTLSPolicies(w.namespace).List(ctx, metav1.ListOptions{Limit: 1})
	switch {
	case apierrors.IsForbidden(err):
		return "listing backendtlspolicies is forbidden: grant the controller the Gateway API rules of deploy/rbac.yaml"
	case err != nil:
		return "list backendtlspolicies: " + err.Error()
	}
	return ""
}

// tcpRoutesUnwatched says why TCPRoutes cannot be watched ("" when they
// can): their CRD is the experimental channel's (v1alpha2), which most
// clusters do not install, so its absence costs only TCPRoutes.
func (w *gatewayWatch) tcpRoutesUnwatched(ctx context.Context) string {
	gv := gwv1alpha2.GroupVersion.String()
	list, err := w.discovery.ServerResourcesForGroupVersion(gv)
	switch {
	case apierrors.IsNotFound(err):
		return gv + " is not served: install the experimental channel's TCPRoute CRD"
	case err != nil:
		return "discovery of " + gv + ": " + err.Error()
	}
	if !servesResource(list, "tcproutes") {
		return gv + " does not serve tcproutes: install the experimental channel's TCPRoute CRD"
	}
	_, err = w.client.GatewayV1alpha2().TCPRoutes(w.namespace).List(ctx, metav1.ListOptions{Limit: 1})
	switch {
	case apierrors.IsForbidden(err):
		return "listing tcproutes is forbidden: grant the controller the Gateway API rules of deploy/rbac.yaml"
	case err != nil:
		return "list tcproutes: " + err.Error()
	}
	return ""
}

// wait looks for the CRDs every recheck; once served, it starts the
// informers and asks for a snapshot when their caches synced.
func (w *gatewayWatch) wait(ctx context.Context, changed chan struct{}) {
	t := time.NewTicker(w.recheck)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if served, _, err := gatewayAPIServed(w.discovery); err != nil || !served {
			continue
		}
		if reason, err := w.forbidden(ctx); err != nil || reason != "" {
			continue
		}
		synced, l := w.run(ctx)
		if !cache.WaitForCacheSync(ctx.Done(), synced...) {
			return
		}
		// Only now: a snapshot must never hold a half-listed Gateway API.
		w.listers.Store(l)
		w.logger.Info("Gateway API CRDs installed: Gateway API support is on")
		notify(changed)
		return
	}
}

// run starts the informers and returns their sync checks and listers.
// The factories end with ctx.
func (w *gatewayWatch) run(ctx context.Context) ([]cache.InformerSynced, *gatewayListers) {
	gwFactory := gwinformers.NewSharedInformerFactoryWithOptions(w.client, 0, gwinformers.WithNamespace(w.namespace))
	coreFactory := informers.NewSharedInformerFactory(w.core, 0)
	classes := gwFactory.Gateway().V1().GatewayClasses()
	gateways := gwFactory.Gateway().V1().Gateways()
	routes := gwFactory.Gateway().V1().HTTPRoutes()
	grants := gwFactory.Gateway().V1beta1().ReferenceGrants()
	namespaces := coreFactory.Core().V1().Namespaces()
	watched := []cache.SharedIndexInformer{classes.Informer(), gateways.Informer(), routes.Informer(),
		grants.Informer(), namespaces.Informer()}
	var grpcRoutes func() ([]*gwv1.GRPCRoute, error)
	if reason := w.grpcRoutesUnwatched(ctx); reason != "" {
		w.logger.Warn("GRPCRoutes are not served; the rest of the Gateway API is", "reason", reason)
	} else {
		inf := gwFactory.Gateway().V1().GRPCRoutes()
		watched = append(watched, inf.Informer())
		grpcRoutes = func() ([]*gwv1.GRPCRoute, error) { return inf.Lister().List(labels.Everything()) }
	}
	var policies func() ([]*gwv1.BackendTLSPolicy, error)
	if reason := w.backendTLSPoliciesUnwatched(ctx); reason != "" {
		w.logger.Warn("BackendTLSPolicies are not served; the rest of the Gateway API is", "reason", reason)
	} else {
		inf := gwFactory.Gateway().V1().BackendTLSPolicies()
		watched = append(watched, inf.Informer())
		policies = func() ([]*gwv1.BackendTLSPolicy, error) { return inf.Lister().List(labels.Everything()) }
	}
	udp := w.watchUDPRoutes(ctx, gwFactory)
	if udp.informer != nil {
		watched = append(watched, udp.informer)
	}
	tcp := w.watchTCPRoutes(ctx, func() tcpRouteWatch {
		inf := gwFactory.Gateway().V1alpha2().TCPRoutes()
		return tcpRouteWatch{informer: inf.Informer(), list: func() ([]*gwv1alpha2.TCPRoute, error) { return inf.Lister().List(labels.Everything()) }}
	})
	if tcp.informer != nil {
		watched = append(watched, tcp.informer)
	}
	tls := w.watchTLSRoutes(ctx)
	if tls.watch.informer != nil {
		watched = append(watched, tls.watch.informer)
	}
	sets := w.watchListenerSets(ctx)
	if sets.informer != nil {
		watched = append(watched, sets.informer)
	}
	var synced []cache.InformerSynced
	for _, inf := range watched {
		if _, err := inf.AddEventHandler(w.handler); err != nil {
			// Only fails on an informer already stopped, i.e. ctx ended.
			w.logger.Debug("add gateway event handler", "error", err)
		}
		synced = append(synced, inf.HasSynced)
	}
	gwFactory.Start(ctx.Done())
	coreFactory.Start(ctx.Done())
	if udp.start != nil {
		udp.start()
	}
	if tcp.start != nil {
		tcp.start()
	}
	if tls.watch.start != nil {
		tls.watch.start()
	}
	if sets.start != nil {
		sets.start()
	}
	go func() {
		<-ctx.Done()
		gwFactory.Shutdown()
		coreFactory.Shutdown()
	}()
	return synced, &gatewayListers{
		classes:      func() ([]*gwv1.GatewayClass, error) { return classes.Lister().List(labels.Everything()) },
		gateways:     func() ([]*gwv1.Gateway, error) { return gateways.Lister().List(labels.Everything()) },
		routes:       func() ([]*gwv1.HTTPRoute, error) { return routes.Lister().List(labels.Everything()) },
		grpcRoutes:   grpcRoutes,
		udpRoutes:    udp.list,
		tcpRoutes:    tcp.list,
		tlsRoutes:    tls.list,
		listenerSets: sets.list,
		policies:     policies,
		grants:       func() ([]*gwv1beta1.ReferenceGrant, error) { return grants.Lister().List(labels.Everything()) },
		namespaces:   func() ([]*corev1.Namespace, error) { return namespaces.Lister().List(labels.Everything()) },
	}
}

// fill adds the Gateway API objects to a snapshot; nothing while support
// is off.
func (w *gatewayWatch) fill(snap *source.Snapshot) error {
	if w == nil {
		return nil
	}
	l := w.listers.Load()
	if l == nil {
		return nil
	}
	var err error
	if snap.GatewayClasses, err = l.classes(); err != nil {
		return fmt.Errorf("list gateway classes: %w", err)
	}
	if snap.Gateways, err = l.gateways(); err != nil {
		return fmt.Errorf("list gateways: %w", err)
	}
	if snap.HTTPRoutes, err = l.routes(); err != nil {
		return fmt.Errorf("list httproutes: %w", err)
	}
	if l.grpcRoutes != nil {
		if snap.GRPCRoutes, err = l.grpcRoutes(); err != nil {
			return fmt.Errorf("list grpcroutes: %w", err)
		}
	}
	if l.udpRoutes != nil {
		if snap.UDPRoutes, err = l.udpRoutes(); err != nil {
			return fmt.Errorf("list udproutes: %w", err)
		}
	}
	if l.tcpRoutes != nil {
		if snap.TCPRoutes, err = l.tcpRoutes(); err != nil {
			return fmt.Errorf("list tcproutes: %w", err)
		}
	}
	if l.tlsRoutes != nil {
		if snap.TLSRoutes, err = l.tlsRoutes(); err != nil {
			return fmt.Errorf("list tlsroutes: %w", err)
		}
	}
	if l.listenerSets != nil {
		if snap.ListenerSets, err = l.listenerSets(); err != nil {
			return fmt.Errorf("list listenersets: %w", err)
		}
	}
	if l.policies != nil {
		if snap.BackendTLSPolicies, err = l.policies(); err != nil {
			return fmt.Errorf("list backendtlspolicies: %w", err)
		}
	}
	if snap.ReferenceGrants, err = l.grants(); err != nil {
		return fmt.Errorf("list reference grants: %w", err)
	}
	if snap.Namespaces, err = l.namespaces(); err != nil {
		return fmt.Errorf("list namespaces: %w", err)
	}
	sortByName(snap.GatewayClasses)
	sortByName(snap.Gateways)
	sortByName(snap.HTTPRoutes)
	sortByName(snap.GRPCRoutes)
	sortByName(snap.UDPRoutes)
	sortByName(snap.TCPRoutes)
	sortByName(snap.TLSRoutes)
	sortByName(snap.ListenerSets)
	sortByName(snap.ReferenceGrants)
	sortByName(snap.BackendTLSPolicies)
	sortByName(snap.Namespaces)
	return nil
}

// servesResource reports whether a discovered group version lists the
// resource name.
func servesResource(list *metav1.APIResourceList, name string) bool {
	return list != nil && slices.ContainsFunc(list.APIResources, func(r metav1.APIResource) bool { return r.Name == name })
}
