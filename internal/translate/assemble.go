package translate

import (
	"crypto/sha1"
	"fmt"
	"sort"

	"pier.dev/pier/internal/annotation"
	"pier.dev/pier/internal/model"
)

// lbGroup is the Ingresses that share one LoadBalancer, oldest first.
type lbGroup struct {
	uuid, name string
	members    []*parsedIngress
}

// assemble groups accepted Ingresses into LoadBalancers: one per Ingress,
// or one per pier.dev/load-balancer group.
func assemble(parsed []*parsedIngress, opts Options, def defaultCert) ([]*model.LoadBalancer, []model.Problem) {
	groups := map[string]*lbGroup{}
	var order []*lbGroup
	mains, canaries, allCanaries := splitCanaries(parsed)
	for _, p := range mains {
		uuid, name := lbIdentity(p, opts)
		g := groups[uuid]
		if g == nil {
			g = &lbGroup{uuid: uuid, name: name}
			groups[uuid] = g
			order = append(order, g)
		}
		g.members = append(g.members, p)
	}
	var lbs []*model.LoadBalancer
	var problems []model.Problem
	for _, g := range order {
		lb, ps := g.build(opts, canaries, def)
		lbs = append(lbs, lb)
		problems = append(problems, ps...)
	}
	problems = append(problems, unattachedCanaries(allCanaries)...)
	sort.Slice(lbs, func(i, j int) bool { return lbs[i].UUID < lbs[j].UUID })
	return lbs, problems
}

// lbIdentity derives the LoadBalancer UUID: the Ingress UID when it has a
// real one, else a name-based UUID, so that it is stable across restarts.
// A group is per namespace unless the administrator shares it
// (--shared-load-balancer, or the class-wide --default-load-balancer-group
// an Ingress naming no group joins): then its identity is the group name
// alone.
func lbIdentity(p *parsedIngress, opts Options) (uuid, name string) {
	g := p.settings.Group
	if g == "" {
		g = opts.DefaultGroup
	}
	if g != "" {
		if opts.shares(g, p.source.Namespace) {
			return nameUUID("group", g), "group:" + g
		}
		return nameUUID("group", p.source.Namespace, g), "group:" + p.source.Namespace + "/" + g
	}
	if p.source.UID != "" {
		return p.source.UID, p.source.Key()
	}
	return nameUUID("ingress", p.source.Namespace, p.source.Name), p.source.Key()
}

// nameUUID is a version-5-style UUID over pier's namespace and parts.
func nameUUID(parts ...string) string {
	h := sha1.New()
	h.Write([]byte("pier.dev"))
	for _, p := range parts {
		h.Write([]byte{0})
		h.Write([]byte(p))
	}
	b := h.Sum(nil)[:16]
	b[6] = (b[6] & 0x0f) | 0x50
	b[8] = (b[8] & 0x3f) | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// claim records which Ingress owns a host+path in a shared LoadBalancer.
type claim struct {
	owner *parsedIngress
}

func (g *lbGroup) build(opts Options, canaries map[string][]*canaryRef, def defaultCert) (*model.LoadBalancer, []model.Problem) {
	lb := &model.LoadBalancer{UUID: g.uuid, Name: g.name, Provider: model.ProviderHAProxy}
	var problems []model.Problem
	claims := map[string]claim{}
	hostOwners := hostOwnership(g.members)
	var kept []keptRoute
	pools := map[string]*model.Pool{}
	warned := map[string]bool{} // Ingress and pool of a timeout conflict
	var defaultPool string
	var defaultOwner *parsedIngress
	// The oldest Ingress's creation time: IPAM settles conflicts between
	// new load balancers by age, and the store keeps it as the object's.
	lb.CreatedAt = g.members[0].ing.CreationTimestamp.Time.UTC()
	sources := map[string]bool{}
	for _, p := range g.members {
		sources[p.source.Key()] = true
	}
	for _, p := range g.members {
		lb.Sources = append(lb.Sources, p.source)
		for _, r := range p.routes {
			hostKey := string(r.hostMatch) + "\x00" + r.host
			if owner := hostOwners[hostKey]; owner.source.Namespace != p.source.Namespace {
				problems = append(problems, hostConflict(p, owner, r, g.name))
				continue
			}
			key := hostKey + "\x00" + string(r.pathMatch) + "\x00" + r.path
			if c, taken := claims[key]; taken {
				problems = append(problems, routeConflict(p, c.owner, r))
				continue
			}
			claims[key] = claim{owner: p}
			kept = append(kept, keptRoute{route: r, owner: p})
			addPool(pools, p.pools[r.poolID])
			if p.fallbackPool != nil {
				addPool(pools, p.fallbackPool)
			}
			if p.extAuthPool != nil {
				addPool(pools, p.extAuthPool)
			}
			problems = append(problems, attachCanary(&kept[len(kept)-1], canaries, pools, lb, sources)...)
			problems = append(problems, timeoutConflict(pools, p, r.poolID, warned)...)
			problems = append(problems, affinityConflict(pools, p, r.poolID, warned)...)
			problems = append(problems, protocolConflict(pools, p, r.poolID, warned)...)
			problems = append(problems, upstreamConflict(pools, p, r.poolID, warned)...)
		}
		if p.defaultPool != nil {
			if defaultOwner != nil {
				problems = append(problems, warning(p.ing, "DefaultBackendConflict", "spec.defaultBackend",
					"load balancer %s already has the default backend of %s (older): this one is ignored",
					g.name, defaultOwner.source.Key()))
			} else {
				defaultOwner, defaultPool = p, p.defaultPool.ID
				addPool(pools, p.defaultPool)
			}
		}
		problems = append(problems, takeRequestedFIP(lb, g.members[0], p, opts)...)
	}
	kept = append(kept, wwwRoutes(g.members, hostOwners)...)
	certs, certProblems := mergeCertificates(g.members, hostOwners, g.name)
	problems = append(problems, certProblems...)
	lb.Listeners = append(lb.Listeners, model.Listener{
		Name: model.DefaultHTTPListenerName, Protocol: model.ProtocolHTTP, Port: opts.HTTPPort,
		DefaultPoolID: defaultPool, Policies: policiesFor(kept, true, certHosts(certs)),
	})
	https, httpsProblems := g.httpsListener(opts, kept, certs, def, hostOwners, pools, defaultPool)
	problems = append(problems, httpsProblems...)
	if https != nil {
		lb.Listeners = append(lb.Listeners, *https)
	}
	for _, id := range sortedKeys(pools) {
		lb.Pools = append(lb.Pools, *pools[id])
	}
	sort.Slice(lb.Sources, func(i, j int) bool { return lb.Sources[i].Key() < lb.Sources[j].Key() })
	lb.AccessLog = groupAccessLog(g.members)
	return lb, problems
}

// httpsListener is the group's HTTPS listener: its certificates (the
// operator's default among them) terminate the kept routes, and its
// ssl-passthrough hosts pass; nil when it has neither.
func (g *lbGroup) httpsListener(opts Options, kept []keptRoute, certs []model.Certificate, def defaultCert,
	hostOwners map[string]*parsedIngress, pools map[string]*model.Pool, defaultPool string) (*model.Listener, []model.Problem) {
	passthrough, problems := passthroughRoutes(g.members, hostOwners, pools)
	// The owner's first certificate is the fallback; one of another
	// namespace must not be served to every client (StrictSNI), the
	// operator's default certificate may.
	strict := len(certs) > 0 && certs[0].Namespace != g.members[0].source.Namespace && def.cert == nil
	if len(certs) == 0 && def.cert == nil && len(passthrough) == 0 {
		problems = append(problems, forceRedirectWarnings(g.members, g.name, def)...)
	}
	certs = def.withDefault(certs)
	switch {
	case len(certs) > 0:
		return &model.Listener{
			Name: model.DefaultHTTPSListenerName, Protocol: model.ProtocolTerminatedHTTPS, Port: opts.HTTPSPort,
			DefaultPoolID: defaultPool, Certificates: certs, Policies: policiesFor(kept, false, certHosts(certs)),
			StrictSNI: strict, Passthrough: passthrough,
		}, problems
	case len(passthrough) > 0:
		// Nothing to terminate: the listener passes its hosts and closes
		// other connections.
		return &model.Listener{
			Name: model.DefaultHTTPSListenerName, Protocol: model.ProtocolTerminatedHTTPS, Port: opts.HTTPSPort,
			Passthrough: passthrough,
		}, problems
	}
	return nil, problems
}

// groupAccessLog is the access logging the members of a group ask for,
// the most verbose one's, or "" when none asks (the agent's default).
func groupAccessLog(members []*parsedIngress) string {
	var asked *model.AccessLog
	for _, p := range members {
		switch a := p.settings.AccessLog; {
		case a == nil:
		case asked == nil:
			asked = a
		default:
			louder := asked.Louder(*a)
			asked = &louder
		}
	}
	if asked == nil {
		return ""
	}
	return asked.String()
}

func routeConflict(loser, winner *parsedIngress, r route) model.Problem {
	what := "host " + annotation.QuoteForMessage(r.host)
	if r.host == "" {
		what = "every host"
	}
	if loser == winner {
		return warning(loser.ing, "DuplicatePath", r.field,
			"path %s for %s appears twice in this Ingress: the first one is used", annotation.QuoteForMessage(r.path), what)
	}
	return warning(loser.ing, "RouteConflict", r.field,
		"path %s for %s is already served by Ingress %s (older): this path is ignored",
		annotation.QuoteForMessage(r.path), what, winner.source.Key())
}

func hostConflict(loser, owner *parsedIngress, r route, lbName string) model.Problem {
	what := "host " + annotation.QuoteForMessage(r.host)
	if r.host == "" {
		what = "the rules without a host"
	}
	return warning(loser.ing, "RouteConflict", r.field,
		"in load balancer %s, %s belongs to namespace %s (Ingress %s, older): path %s is ignored",
		lbName, what, owner.source.Namespace, owner.source.Key(), annotation.QuoteForMessage(r.path))
}

// takeRequestedFIP records the pinned floating IP. Only the load
// balancer's owner (its oldest Ingress) may pin: a newer member's pin
// would move the address of a group it merely joined, and hand the old
// address, with the owner's hosts still resolving to it, to whoever pins
// it next.
func takeRequestedFIP(lb *model.LoadBalancer, owner, p *parsedIngress, opts Options) []model.Problem {
	ip := p.settings.ExternalIP
	field := "metadata.annotations[" + annotation.ExternalIP + "]"
	switch {
	case ip == "":
		return nil
	case !opts.mayPin(p.source.Namespace):
		return []model.Problem{warning(p.ing, "ExternalIPNotAllowed", field,
			"namespace %s may not pin external IPs (--external-ip-namespaces): %s is ignored", p.source.Namespace, ip)}
	case p == owner:
		lb.RequestedFIP = ip
		return nil
	case ip == owner.settings.ExternalIP && opts.mayPin(owner.source.Namespace):
		return nil
	}
	return []model.Problem{warning(p.ing, "ExternalIPConflict", field,
		"only the owner of load balancer %s, Ingress %s (oldest), may choose its external IP: %s is ignored",
		lb.Name, owner.source.Key(), ip)}
}

// certHosts are the hosts the certificates are served for.
func certHosts(certs []model.Certificate) map[string]bool {
	hosts := map[string]bool{}
	for _, c := range certs {
		for _, h := range c.Hosts {
			hosts[h] = true
		}
	}
	return hosts
}

// timeoutConflict warns an Ingress whose timeouts for a pool differ from
// those of the Ingress that created it (older): a Service port is one
// HAProxy backend, with one set of timeouts.
func timeoutConflict(pools map[string]*model.Pool, p *parsedIngress, poolID string, warned map[string]bool) []model.Problem {
	kept, mine := pools[poolID], p.pools[poolID]
	key := p.source.Key() + "\x00" + poolID
	if kept == mine || warned[key] ||
		(kept.ConnectTimeout == mine.ConnectTimeout && kept.ServerTimeout == mine.ServerTimeout) {
		return nil
	}
	warned[key] = true
	return []model.Problem{warning(p.ing, "TimeoutConflict", "metadata.annotations",
		"service %s port %s is also the backend of an older Ingress with other proxy timeouts: those apply (connect %v, server %v)",
		mine.Service, mine.Port, kept.ConnectTimeout, kept.ServerTimeout)}
}

// affinityConflict warns an Ingress whose cookie affinity for a pool
// differs from that of the Ingress that created it (older), as
// timeoutConflict does: a Service port is one backend, with one cookie.
func affinityConflict(pools map[string]*model.Pool, p *parsedIngress, poolID string, warned map[string]bool) []model.Problem {
	kept, mine := pools[poolID], p.pools[poolID]
	key := "affinity\x00" + p.source.Key() + "\x00" + poolID
	if kept == mine || warned[key] || sameAffinity(kept.Affinity, mine.Affinity) {
		return nil
	}
	warned[key] = true
	what := "no cookie affinity"
	if a := kept.Affinity; a != nil {
		what = fmt.Sprintf("cookie %s", a.Name)
	}
	return []model.Problem{warning(p.ing, "AffinityConflict", "metadata.annotations",
		"service %s port %s is also the backend of an older Ingress with other session cookie settings: those apply (%s)",
		mine.Service, mine.Port, what)}
}

// protocolConflict warns an Ingress whose backend-protocol for a pool
// differs from that of the Ingress that created it (older), as
// timeoutConflict does: a Service port is one backend, with one protocol.
func protocolConflict(pools map[string]*model.Pool, p *parsedIngress, poolID string, warned map[string]bool) []model.Problem {
	kept, mine := pools[poolID], p.pools[poolID]
	key := "protocol\x00" + p.source.Key() + "\x00" + poolID
	if kept == mine || warned[key] || (kept.Protocol == mine.Protocol && sameUpstreamTLS(kept.UpstreamTLS, mine.UpstreamTLS)) {
		return nil
	}
	warned[key] = true
	what := string(kept.Protocol)
	if what == "" {
		what = "HTTP"
	}
	return []model.Problem{warning(p.ing, "BackendProtocolConflict", "metadata.annotations",
		"service %s port %s is also the backend of an older Ingress with another backend-protocol or proxy-ssl-* settings: those apply (%s)",
		mine.Service, mine.Port, what)}
}

func sameUpstreamTLS(a, b *model.UpstreamTLS) bool {
	return (a == nil && b == nil) || (a != nil && b != nil && *a == *b)
}

func addPool(pools map[string]*model.Pool, p *model.Pool) {
	if p == nil {
		return
	}
	if _, ok := pools[p.ID]; !ok {
		pools[p.ID] = p
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func unionSorted(a, b []string) []string {
	set := map[string]bool{}
	for _, s := range append(append([]string(nil), a...), b...) {
		set[s] = true
	}
	if len(set) == 0 {
		return nil
	}
	return sortedKeys(set)
}
