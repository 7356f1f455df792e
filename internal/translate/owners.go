package translate

import (
	"strings"

	"pier.dev/pier/internal/annotation"
	"pier.dev/pier/internal/model"
)

// hostOwnership gives each host of a load balancer (and the catch-all "no
// host", key "\x00") to the oldest Ingress that names it, in a rule or a
// TLS entry. Ownership is by namespace: the owner's namespace may add
// paths and certificates for the host, no other may. A tenant who joins a
// shared group must not add routes to another tenant's host, not even
// more specific ones, nor serve a certificate for it.
func hostOwnership(members []*parsedIngress) map[string]*parsedIngress {
	owners := map[string]*parsedIngress{}
	claim := func(key string, p *parsedIngress) {
		if _, ok := owners[key]; !ok {
			owners[key] = p
		}
	}
	age := map[*parsedIngress]int{}
	for i, p := range members {
		age[p] = i
		for _, r := range p.routes {
			claim(string(r.hostMatch)+"\x00"+r.host, p)
		}
		for _, c := range p.certs {
			for _, h := range c.Hosts {
				claim(tlsHostKey(h), p)
			}
		}
	}
	// A wildcard covers every name one label below it: an exact host under
	// an older wildcard of another namespace belongs to the wildcard's
	// owner, or the newer tenant's exact host (which HAProxy matches
	// first) would take admin.victim.example from *.victim.example.
	for key, p := range owners {
		match, host, _ := strings.Cut(key, "\x00")
		if model.CompareType(match) != model.CompareEqualTo {
			continue
		}
		_, parent, found := strings.Cut(host, ".")
		if !found {
			continue
		}
		wild := owners[string(model.CompareWildcard)+"\x00*."+parent]
		if wild != nil && wild.source.Namespace != p.source.Namespace && age[wild] < age[p] {
			owners[key] = wild
		}
	}
	return owners
}

// tlsHostKey is the ownership key of a TLS host, which parseTLS checked.
func tlsHostKey(h string) string {
	match, _ := checkHost(h)
	return string(match) + "\x00" + h
}

// mergeCertificates unions the certificates of a load balancer's
// Ingresses. Each TLS host must belong to the entry's namespace (else
// TLSHostConflict). The owner namespace's certificates come first, so the
// one HAProxy serves to clients whose SNI matches nothing is the owner's.
//
// An entry without hosts is, in a load balancer of one namespace, left
// without SNI filters as before (HAProxy then matches the names in the
// certificate). In a load balancer shared between namespaces it covers
// only the hosts its namespace owns: else a tenant's self-signed
// certificate naming the victim's host would be offered for it.
func mergeCertificates(members []*parsedIngress, owners map[string]*parsedIngress, lbName string) ([]model.Certificate, []model.Problem) {
	ownerNS := members[0].source.Namespace
	shared := false
	for _, p := range members {
		shared = shared || p.source.Namespace != ownerNS
	}
	var out []model.Certificate
	var problems []model.Problem
	seen := map[string]int{}
	for _, ownerFirst := range []bool{true, false} {
		for _, p := range members {
			if (p.source.Namespace == ownerNS) != ownerFirst {
				continue
			}
			for i, c := range p.certs {
				hosts, ps := ownedTLSHosts(p, c, p.certFields[i], owners, shared, lbName)
				problems = append(problems, ps...)
				if hosts == nil && (shared || len(c.Hosts) > 0) {
					continue // nothing of its own left to cover
				}
				if j, ok := seen[c.ID]; ok {
					out[j].Hosts = unionSorted(out[j].Hosts, hosts)
					continue
				}
				c.Hosts = hosts
				seen[c.ID] = len(out)
				out = append(out, c)
			}
		}
	}
	return out, problems
}

// ownedTLSHosts returns the hosts entry c of p may cover, sorted; nil
// means none (or, for a hostless entry of an unshared load balancer, no
// SNI filter).
func ownedTLSHosts(p *parsedIngress, c model.Certificate, field string, owners map[string]*parsedIngress,
	shared bool, lbName string) ([]string, []model.Problem) {
	ns := p.source.Namespace
	if len(c.Hosts) == 0 {
		if !shared {
			return nil, nil
		}
		var hosts []string
		for key, owner := range owners {
			if _, h, _ := strings.Cut(key, "\x00"); h != "" && owner.source.Namespace == ns {
				hosts = append(hosts, h)
			}
		}
		if len(hosts) == 0 {
			return nil, []model.Problem{warning(p.ing, "TLSHostConflict", field+".hosts",
				"TLS entry without hosts ignored: in load balancer %s, shared between namespaces, it would cover only hosts of namespace %s, which owns none",
				lbName, ns)}
		}
		return unionSorted(nil, hosts), nil
	}
	var hosts []string
	var problems []model.Problem
	for _, h := range c.Hosts {
		if owner := owners[tlsHostKey(h)]; owner.source.Namespace != ns {
			problems = append(problems, warning(p.ing, "TLSHostConflict", field+".hosts",
				"in load balancer %s, host %s belongs to namespace %s (Ingress %s, older): this TLS entry does not cover it",
				lbName, annotation.QuoteForMessage(h), owner.source.Namespace, owner.source.Key()))
			continue
		}
		hosts = append(hosts, h)
	}
	if len(hosts) == 0 {
		return nil, problems
	}
	return unionSorted(nil, hosts), problems
}
