package gatewayapi

import (
	"sort"
	"strings"

	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/translate"
)

// gwEntry is one match of one rule of one route, for one host, on one
// listener port: a policy-to-be.
type gwEntry struct {
	host   string // "" for any host
	match  gwMatch
	poolID string
	status int // 500 when every backendRef failed (no pool)
	route  *gwv1.HTTPRoute
	kind   string // the route's: model.KindHTTPRoute or model.KindGRPCRoute
	rule   int    // index of the rule in the route
	index  int    // index of the match in the rule
	// options are the rule's filters for this match and listener.
	options *model.PolicyOptions
	// isolation marks a listener's 404 entry (gateway_isolation.go):
	// no route; it comes after every route entry of its host.
	isolation bool
	// breadth is how much broader than host the route's own hostname
	// is (hostBreadth): 0 when the route wrote host itself.
	breadth int
}

// gatewayEntryBefore is the Gateway API's precedence, which HAProxy's
// "first policy that matches" turns into routing:
//
//  1. the most specific host: an exact name, then wildcards by longer
//     suffix, then any host;
//  2. for one intersected host, the route whose own hostname is the
//     more specific (hostBreadth: the host itself, then a longer
//     wildcard, then none), as the spec asks of routes whose hostnames
//     meet a listener's in one name (a route for "*.example.com" and
//     one for "abc.example.com" on a listener for "abc.example.com":
//     the second, even over a longer path of the first); a listener's
//     404 after every route of its host;
//  3. an Exact path before a PathPrefix, then the longer prefix;
//  4. a method match before none;
//  5. more header matches, then more query-parameter matches;
//  6. the older route, then namespace/name;
//  7. rule order in the route, then match order in the rule.
//
// Steps 1 and 3 are Ingress's order (routeBefore), steps 4-5 render's
// match maps' (render/matches.go), so render's map routing reads Gateway
// policies in the order it decides. Step 2 is a key of its own entry
// (not "when the hosts are equal", which would not be a strict weak
// order): 0 wherever the route wrote the host it is served on, so it
// reorders only where a route's hostname is broader than the
// listener's; where that puts a shorter path first, render keeps the
// ACL rules for the port (its maps order by host and path alone).
func gatewayEntryBefore(a, b gwEntry) bool {
	if ra, rb := gatewayHostRank(a.host), gatewayHostRank(b.host); ra != rb {
		return ra < rb
	}
	if isWildcard(a.host) && isWildcard(b.host) && len(a.host) != len(b.host) {
		return len(a.host) > len(b.host)
	}
	if a.breadth != b.breadth {
		return a.breadth < b.breadth
	}
	if ra, rb := translate.PathRank(a.match.pathMatch), translate.PathRank(b.match.pathMatch); ra != rb {
		return ra < rb
	}
	if len(a.match.path) != len(b.match.path) {
		return len(a.match.path) > len(b.match.path)
	}
	if (a.match.method != "") != (b.match.method != "") {
		return a.match.method != ""
	}
	if len(a.match.headers) != len(b.match.headers) {
		return len(a.match.headers) > len(b.match.headers)
	}
	if len(a.match.queries) != len(b.match.queries) {
		return len(a.match.queries) > len(b.match.queries)
	}
	if a.route != b.route {
		return olderObject(a.route, b.route)
	}
	if a.rule != b.rule {
		return a.rule < b.rule
	}
	if a.index != b.index {
		return a.index < b.index
	}
	// Same match on several hosts of one route: any fixed order.
	if a.host != b.host {
		return a.host < b.host
	}
	return a.match.path < b.match.path
}

// Breadths of hostBreadth: a route without hostnames served on a
// listener's hostname, and a listener's 404 entry, after every wildcard.
const (
	breadthNoHostname = 2 + maxHostLen
	breadthIsolation  = breadthNoHostname + 1
	maxHostLen        = 253
)

// hostBreadth ranks the hostname a route wrote (original, "" for none:
// originalHost) against the host it is served on there (the
// intersection with the listener's): 0 when they are one name, then
// wildcards, the longer (more specific) first, then no hostname.
func hostBreadth(original, host string) int {
	switch {
	case original == host:
		return 0
	case original == "":
		return breadthNoHostname
	}
	return 1 + maxHostLen - min(len(original), maxHostLen)
}

func gatewayHostRank(h string) int {
	switch {
	case h == "":
		return 2
	case isWildcard(h):
		return 1
	}
	return 0
}

// rules are the model rules of an entry: host, path, then method,
// headers and query parameters (each sorted by key).
func (e gwEntry) rules() []model.L7Rule {
	var out []model.L7Rule
	switch {
	case isWildcard(e.host):
		// SUFFIX, not Ingress's one-label WILDCARD: a Gateway API
		// wildcard spans labels.
		out = append(out, model.L7Rule{Type: model.RuleHostName, Compare: model.CompareSuffix, Value: e.host})
	case e.host != "":
		out = append(out, model.L7Rule{Type: model.RuleHostName, Compare: model.CompareEqualTo, Value: e.host})
	}
	out = append(out, model.L7Rule{Type: model.RulePath, Compare: e.match.pathMatch, Value: e.match.path})
	if e.match.method != "" {
		out = append(out, model.L7Rule{Type: model.RuleMethod, Compare: model.CompareEqualTo, Value: e.match.method})
	}
	out = append(out, e.match.headers...)
	return append(out, e.match.queries...)
}

// ruleKey identifies what a policy matches: two entries with the same key
// match the same requests, so only the first (in precedence) is kept.
func ruleKey(rules []model.L7Rule) string {
	parts := make([]string, 0, 4*len(rules))
	for _, r := range rules {
		parts = append(parts, string(r.Type), string(r.Compare), r.Key, r.Value)
	}
	return strings.Join(parts, "\x00")
}

// policies orders a listener's entries into L7Policies.
func gatewayPolicies(entries []gwEntry, gateway model.Source) []model.L7Policy {
	sorted := append([]gwEntry(nil), entries...)
	sort.SliceStable(sorted, func(i, j int) bool { return gatewayEntryBefore(sorted[i], sorted[j]) })
	seen := map[string]bool{}
	var out []model.L7Policy
	for _, e := range sorted {
		rules := e.rules()
		key := ruleKey(rules)
		if seen[key] {
			continue
		}
		seen[key] = true
		source := gateway // an isolation entry is the Gateway's own
		if e.route != nil {
			source = model.Source{Kind: e.kind, Namespace: e.route.Namespace, Name: e.route.Name, UID: translate.ValidUID(string(e.route.UID))}
		}
		p := model.L7Policy{
			ID:       model.ID("gateway-policy", key),
			Position: len(out) + 1,
			Action:   model.ActionRedirectToPool,
			PoolID:   e.poolID,
			Rules:    rules,
			Options:  e.options,
			Source:   source,
		}
		if e.status != 0 {
			p.Action, p.StatusCode = model.ActionFixedResponse, e.status
		}
		out = append(out, p)
	}
	return out
}

// loadBalancer is the Gateway's load balancer: one model listener per
// port of its usable listeners (several Gateway listeners on one port
// share it, told apart by host rules), its routes' policies and pools.
// nil when the Gateway is not accepted or has no usable listener.
func (p *parsedGateway) loadBalancer(checks bool) *model.LoadBalancer {
	if p.refusal != "" || !anyUsable(p.listeners) {
		return nil
	}
	lb := &model.LoadBalancer{
		UUID: p.uuid, Name: "gateway:" + p.gw.Namespace + "/" + p.gw.Name, Provider: model.ProviderHAProxy,
		Sources: []model.Source{{Kind: model.KindGateway, Namespace: p.gw.Namespace, Name: p.gw.Name, UID: translate.ValidUID(string(p.gw.UID))}},
		// IPAM grants the pinned address or refuses it, as an Ingress's
		// pier.dev/external-ip; CreatedAt makes the older object win
		// when two new ones ask for the same address.
		RequestedFIP: p.address.pin, CreatedAt: p.gw.CreationTimestamp.Time.UTC(),
	}
	byPort, ports := p.portListeners()
	used := map[string]bool{}
	for _, port := range ports {
		ml := byPort[port]
		// Misdirected requests are told apart only between listeners.
		if len(ml.ListenerHosts) < 2 {
			ml.ListenerHosts = nil
		}
		sort.Strings(ml.ListenerHosts)
		if ml.Protocol == model.ProtocolTCP {
			// One pool, no policies (render/tcp.go).
			if ml.DefaultPoolID != "" {
				used[ml.DefaultPoolID] = true
			}
			lb.Listeners = append(lb.Listeners, *ml)
			continue
		}
		ml.Passthrough = p.passthroughRoutes(port)
		for _, r := range ml.Passthrough {
			if r.PoolID != "" {
				used[r.PoolID] = true
			}
		}
		entries := append(append([]gwEntry(nil), p.entries[port]...), p.isolationEntries(port)...)
		ml.Policies = gatewayPolicies(entries, lb.Sources[0])
		for _, pol := range ml.Policies {
			used[pol.PoolID] = true
			if pol.Options != nil && pol.Options.Split != nil {
				for _, share := range pol.Options.Split.Pools {
					used[share.PoolID] = true
				}
			}
		}
		// Certificates in a fixed order: the first is the fallback for
		// clients without SNI, so it must not depend on map order.
		sort.SliceStable(ml.Certificates, func(i, j int) bool { return certBefore(ml.Certificates[i], ml.Certificates[j]) })
		sort.SliceStable(ml.DecryptCertificates, func(i, j int) bool {
			return certBefore(ml.DecryptCertificates[i], ml.DecryptCertificates[j])
		})
		lb.Listeners = append(lb.Listeners, *ml)
	}
	udp, udpPools := p.udpListeners()
	lb.Listeners = append(lb.Listeners, udp...)
	for _, pool := range udpPools {
		p.pools[pool.ID], used[pool.ID] = pool, true
	}
	for id, pool := range p.pools {
		if used[id] {
			pool = p.backendClient.presentOn(pool)
			pool.HealthCheck = checks // a Gateway has no annotation to say otherwise
			lb.Pools = append(lb.Pools, *pool)
		}
	}
	sort.Slice(lb.Pools, func(i, j int) bool { return lb.Pools[i].ID < lb.Pools[j].ID })
	return lb
}

// portListeners merges the usable listeners but UDP's into one model
// listener per port (their certificates, a TCPRoute's pool, the HTTPS
// hosts), and returns them with their ports in order. A TCPRoute's pool
// joins p.pools.
func (p *parsedGateway) portListeners() (map[int]*model.Listener, []int) {
	byPort := map[int]*model.Listener{}
	var ports []int
	for _, l := range p.listeners {
		if !l.usable() || l.protocol == model.ProtocolUDP {
			continue // UDP listeners after these (udproute.go)
		}
		ml := byPort[l.port]
		if ml == nil {
			ml = &model.Listener{Name: modelListenerName(l.protocol, l.port), Protocol: l.protocol, Port: l.port}
			byPort[l.port] = ml
			ports = append(ports, l.port)
		}
		if l.tcpRoute != nil && l.tcpRoute.backend.pool != nil {
			pool := l.tcpRoute.backend.pool
			if _, ok := p.pools[pool.ID]; !ok {
				p.pools[pool.ID] = pool
			}
			ml.DefaultPoolID = pool.ID
		}
		if l.tlsTerminate {
			ml.DecryptCertificates = appendCerts(ml.DecryptCertificates, l.certs)
		} else {
			ml.Certificates = appendCerts(ml.Certificates, l.certs)
		}
		if l.protocol == model.ProtocolTerminatedHTTPS && !l.tlsListener() {
			ml.ListenerHosts = append(ml.ListenerHosts, l.host)
			// The same for every HTTPS listener of the port (per port).
			ml.ClientValidation = l.clientValidation
		}
	}
	sort.Ints(ports)
	return byPort, ports
}

// appendCerts merges the certificates of listeners sharing a port: one
// Secret named by two listeners serves both hosts.
func appendCerts(to, add []model.Certificate) []model.Certificate {
	for _, c := range add {
		merged := false
		for i := range to {
			if to[i].ID == c.ID {
				to[i].Hosts = dedupSorted(append(append([]string(nil), to[i].Hosts...), c.Hosts...))
				merged = true
			}
		}
		if !merged {
			to = append(to, c)
		}
	}
	return to
}

// certBefore puts a certificate without hosts (a listener without
// hostname, which serves every name) first: the first is what clients
// whose SNI matches no host filter get. Then by first host.
func certBefore(a, b model.Certificate) bool {
	if (len(a.Hosts) == 0) != (len(b.Hosts) == 0) {
		return len(a.Hosts) == 0
	}
	if len(a.Hosts) > 0 && a.Hosts[0] != b.Hosts[0] {
		return a.Hosts[0] < b.Hosts[0]
	}
	return a.ID < b.ID
}
