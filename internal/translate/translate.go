// Package translate is the kube-manager role: a pure, deterministic
// function from a snapshot of Kubernetes objects to the LoadBalancers pier
// should run, plus the problems found in each source object. It does no
// I/O and calls no API server; addresses (VIP, FIP) and placement are left
// empty for IPAM and the scheduler.
package translate

import (
	"maps"
	"sort"
	"time"

	networkingv1 "k8s.io/api/networking/v1"

	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/source"
)

// DefaultControllerName is the IngressClass spec.controller value pier
// answers to.
const DefaultControllerName = "pier.dev/ingress-controller"

// Options tune translation. The zero value is not useful: start from
// DefaultOptions.
type Options struct {
	// ControllerName selects our IngressClasses by spec.controller.
	ControllerName string
	// TakeClassless makes pier serve Ingresses that name no class even
	// when no IngressClass of ours is marked default.
	TakeClassless bool
	// HTTPPort and HTTPSPort are the listener ports.
	HTTPPort, HTTPSPort int
	// MembersFromClusterIP uses the Service ClusterIP as the only member
	// of a pool (the seed's two-hop mode) instead of the ready endpoints.
	MembersFromClusterIP bool
	// MaxIngresses and MaxPathsPerIngress bound what one snapshot may ask
	// for, so one tenant cannot make the rendered file or its reload
	// unbounded. Ingresses past the cap are refused.
	MaxIngresses       int
	MaxPathsPerIngress int
	// MaxHTTPRoutes bounds the HTTPRoutes attached to our Gateways, as
	// MaxIngresses does Ingresses: the newest past the cap are refused.
	MaxHTTPRoutes int
	// MaxIngressesPerNamespace, MaxHTTPRoutesPerNamespace and
	// MaxGatewaysPerNamespace bound what one namespace may take
	// (quota.go): the newest of a namespace past its quota are refused
	// with QuotaExceeded. 0: no quota.
	MaxIngressesPerNamespace  int
	MaxHTTPRoutesPerNamespace int
	MaxGatewaysPerNamespace   int
	// MaxRegexPathsPerLoadBalancer and MaxRegexPathsPerNamespace bound
	// the regular-expression paths HAProxy tries on a request and
	// compiles per tenant (regexcap.go); 0: no cap.
	MaxRegexPathsPerLoadBalancer int
	MaxRegexPathsPerNamespace    int
	// ExternalIPNamespaces, when not empty, lists the only namespaces
	// whose Ingresses may pin an address with pier.dev/external-ip.
	ExternalIPNamespaces []string
	// SharedGroups lists, per pier.dev/load-balancer group, the
	// namespaces that share it (["*"]: every namespace). A group not
	// listed, or used from a namespace not listed, is per namespace: one
	// tenant cannot join another's load balancer by naming its group.
	SharedGroups map[string][]string
	// DefaultGroup, when set, is the pier.dev/load-balancer group of
	// every Ingress that names none, shared by every namespace: one load
	// balancer and one address for the class, as ingress-nginx serves
	// every Ingress on the controller's address. An Ingress that names
	// this group joins it too; one that names another keeps its own.
	DefaultGroup string
	// Members says which endpoint addresses may become members
	// (members.go). The zero value refuses link-local and loopback ones.
	Members MemberPolicy
	// TakeClasslessServices makes pier serve Services of type
	// LoadBalancer that name no loadBalancerClass (MetalLB's default);
	// without it only those of class NativeClass.
	TakeClasslessServices bool
	// GatewayControllerName selects our GatewayClasses by
	// spec.controllerName.
	GatewayControllerName string
	// GatewayExtendedMatches emits HTTPRoute header, query-parameter and
	// method matches (model rules HEADER, QUERY_PARAMETER, METHOD), which
	// render routes through its match maps. On by default; off, a route
	// that uses them is refused with a reason (dropping the match would
	// serve a rule to requests it was written to exclude), for agents of
	// a version whose render refuses such rules.
	GatewayExtendedMatches bool
	// IgnoreSnippets serves an Ingress with snippet annotations
	// (configuration-snippet, server-snippet, …) with the snippet ignored
	// and a Warning; without it such an Ingress is refused (snippets.go).
	IgnoreSnippets bool
	// IgnoreProtections serves an Ingress whose client-certificate or
	// ModSecurity annotations pier cannot honour without them, with a
	// Warning; without it such an Ingress is refused (protections.go).
	IgnoreProtections bool
	// AuthURLNamespaces lists the namespaces whose Services an auth-url
	// of any namespace may name (an oauth2-proxy of its own); without
	// them an auth-url names a Service of its Ingress's namespace only.
	AuthURLNamespaces []string
	// DefaultCertificate, a TLS Secret as namespace/name, is served on an
	// HTTPS listener that every Ingress's load balancer then has
	// (defaultcert.go); "" is none.
	DefaultCertificate string
	// HealthChecks checks the members of every pool with TCP connects
	// (render: inter 2s, fall 3, rise 2), so that a member nobody can
	// reach gets no requests and shows down, unless an Ingress turns
	// them off with pier.dev/health-check: "false". Off, only the
	// Ingresses that set it "true" are checked.
	HealthChecks bool
	// Now is compared with certificate expiry to warn about expired
	// certificates; zero skips the check. Passed in, not read, so that
	// translation stays a pure function.
	Now time.Time
}

// DefaultOptions are the Kubernetes defaults: ports 80 and 443.
func DefaultOptions() Options {
	return Options{
		ControllerName:               DefaultControllerName,
		GatewayControllerName:        DefaultGatewayControllerName,
		HTTPPort:                     80,
		HTTPSPort:                    443,
		MaxIngresses:                 10000,
		MaxPathsPerIngress:           1000,
		MaxHTTPRoutes:                10000,
		MaxIngressesPerNamespace:     DefaultMaxIngressesPerNamespace,
		MaxHTTPRoutesPerNamespace:    DefaultMaxHTTPRoutesPerNamespace,
		MaxGatewaysPerNamespace:      DefaultMaxGatewaysPerNamespace,
		MaxRegexPathsPerLoadBalancer: DefaultMaxRegexPathsPerLoadBalancer,
		MaxRegexPathsPerNamespace:    DefaultMaxRegexPathsPerNamespace,
		GatewayExtendedMatches:       true,
		HealthChecks:                 true,
	}
}

// mayPin reports whether an Ingress of namespace ns may use
// pier.dev/external-ip.
func (o Options) mayPin(ns string) bool {
	if len(o.ExternalIPNamespaces) == 0 {
		return true
	}
	for _, allowed := range o.ExternalIPNamespaces {
		if allowed == ns {
			return true
		}
	}
	return false
}

// shares reports whether namespace ns takes part in the cross-namespace
// group g.
func (o Options) shares(g, ns string) bool {
	if g != "" && g == o.DefaultGroup {
		return true
	}
	for _, allowed := range o.SharedGroups[g] {
		if allowed == ns || allowed == "*" {
			return true
		}
	}
	return false
}

// Result is what a snapshot asks for.
type Result struct {
	// LoadBalancers sorted by UUID, without addresses or placement.
	LoadBalancers []*model.LoadBalancer
	// Problems sorted by kind, namespace, name.
	Problems []model.Problem
	// Accepted maps the ref of every object pier serves (an Ingress
	// today) to the UUID of its LoadBalancer. Ingresses of other classes
	// and refused ones are absent.
	Accepted map[model.ObjectRef]string
	// Ours lists every object of our class, accepted or refused: the
	// status writer may touch only these.
	Ours map[model.ObjectRef]bool
	// Gateway is the status of the Gateway API objects of our classes;
	// nil when Gateways were not translated.
	Gateway *GatewayStatus
	// AddressRefused holds the UUIDs of load balancers whose requested
	// addresses translation already refused (a Gateway asking for more
	// than pier binds): the reconciler treats them as IPAM refusals,
	// keeping what the store holds and creating no new one. nil or
	// missing: none.
	AddressRefused map[string]bool
}

// Without is r less the objects in refused (the sources of load balancers
// the reconciler did not create): a copy whose Accepted lacks them, or r
// itself when refused is empty. r is left as it was, so that a result a
// later change patches (EndpointMembers, IngressChanges) is still what
// translation gave.
func (r *Result) Without(refused []model.ObjectRef) *Result {
	if len(refused) == 0 {
		return r
	}
	c := *r
	c.Accepted = maps.Clone(r.Accepted)
	for _, ref := range refused {
		delete(c.Accepted, ref)
	}
	return &c
}

// Ingresses translates every Ingress of our class in snap.
func Ingresses(snap *source.Snapshot, opts Options) *Result {
	res := &Result{Accepted: map[model.ObjectRef]string{}, Ours: map[model.ObjectRef]bool{}}
	idx := newIndex(snap)
	classes := ourClasses(snap.IngressClasses, opts)

	var parsed []*parsedIngress
	quota := newNamespaceQuota(opts.MaxIngressesPerNamespace)
	for _, ing := range oldestFirst(snap.Ingresses) {
		if !classes.owns(ing, opts) {
			continue
		}
		res.Ours[model.IngressRef(ing.Namespace, ing.Name)] = true
		// The namespace's quota first: a tenant past it is told of its
		// own limit, and what it is refused leaves the global cap to
		// the others.
		if quota.full(ing.Namespace) {
			res.Problems = append(res.Problems, refusal(ing, ReasonQuotaExceeded, "",
				"namespace %s already has %d Ingresses served, the most one namespace may have (--max-ingresses-per-namespace): the newest past it are refused",
				ing.Namespace, opts.MaxIngressesPerNamespace))
			continue
		}
		if opts.MaxIngresses > 0 && len(parsed) >= opts.MaxIngresses {
			res.Problems = append(res.Problems, refusal(ing, "TooManyIngresses", "",
				"pier serves at most %d Ingresses (--max-ingresses)", opts.MaxIngresses))
			continue
		}
		p, problems := parseIngress(ing, idx, opts)
		res.Problems = append(res.Problems, problems...)
		if p != nil {
			parsed = append(parsed, p)
			quota.take(ing.Namespace)
		}
	}

	parsed, capped := capRegexPaths(parsed, opts)
	res.Problems = append(res.Problems, capped...)
	lbs, problems := assemble(parsed, opts, resolveDefaultCert(idx, opts))
	res.Problems = append(res.Problems, problems...)
	for _, lb := range lbs {
		for _, src := range lb.Sources {
			res.Accepted[src.Ref()] = lb.UUID
		}
	}
	res.LoadBalancers = lbs
	sortProblems(res.Problems)
	return res
}

// oldestFirst orders Ingresses by creation time, then namespace/name, so
// that every "first come wins" decision is stable across restarts.
func oldestFirst(in []*networkingv1.Ingress) []*networkingv1.Ingress {
	out := append([]*networkingv1.Ingress(nil), in...)
	sort.SliceStable(out, func(i, j int) bool { return olderThan(out[i], out[j]) })
	return out
}

func olderThan(a, b *networkingv1.Ingress) bool {
	ta, tb := a.CreationTimestamp.Time, b.CreationTimestamp.Time
	if !ta.Equal(tb) {
		return ta.Before(tb)
	}
	if a.Namespace != b.Namespace {
		return a.Namespace < b.Namespace
	}
	return a.Name < b.Name
}

func sortProblems(ps []model.Problem) {
	sort.SliceStable(ps, func(i, j int) bool {
		a, b := ps[i], ps[j]
		if a.Kind != b.Kind {
			return a.Kind < b.Kind
		}
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.Name < b.Name
	})
}
