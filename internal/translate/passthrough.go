package translate

import (
	"fmt"
	"strings"

	"pier.dev/pier/internal/annotation"
	"pier.dev/pier/internal/model"
)

// passthroughRoute is one host of an Ingress with ssl-passthrough: every
// TLS connection for it goes to pool, untouched.
type passthroughRoute struct {
	host  string
	pool  *model.Pool
	field string
}

// parsePassthrough collects the hosts of an Ingress with ssl-passthrough,
// as ingress-nginx does: a rule's host (required) is passed through to
// the backend of its path "/"; its other paths, which a TCP connection
// cannot tell apart, keep serving plain HTTP only, with a warning. The
// pool is the Service port's TCP twin (TCPPool), so that the HTTP
// backend of the same port keeps its own settings.
func (p *parsedIngress) parsePassthrough(x *index, opts Options, problems *[]model.Problem) error {
	if !p.settings.SSLPassthrough {
		return nil
	}
	for i, rule := range p.ing.Spec.Rules {
		field := fmt.Sprintf("spec.rules[%d]", i)
		if rule.Host == "" || strings.HasPrefix(rule.Host, "*") {
			*problems = append(*problems, warning(p.ing, "IgnoredPassthrough", field+".host",
				"ssl-passthrough needs an exact rule host (SNI): this rule is not passed through"))
			continue
		}
		if rule.HTTP == nil {
			continue
		}
		var root *passthroughRoute
		for j, hp := range rule.HTTP.Paths {
			pfield := fmt.Sprintf("%s.http.paths[%d]", field, j)
			if hp.Path != "/" || root != nil {
				*problems = append(*problems, warning(p.ing, "IgnoredPassthrough", pfield,
					"with ssl-passthrough, TLS connections for host %s all go to the backend of path /: path %s serves plain HTTP only",
					rule.Host, annotation.QuoteForMessage(hp.Path)))
				continue
			}
			pool, warnings, err := x.poolFor(p.ing, hp.Backend.Service, pfield+".backend.service", p.settings, opts)
			if err != nil {
				return err
			}
			*problems = append(*problems, warnings...)
			root = &passthroughRoute{host: rule.Host, pool: tcpPool(pool), field: field + ".host"}
		}
		if root == nil {
			*problems = append(*problems, warning(p.ing, "IgnoredPassthrough", field,
				"ssl-passthrough needs a path / for host %s: the host is not passed through", rule.Host))
			continue
		}
		p.passthrough = append(p.passthrough, *root)
	}
	return nil
}

// tcpPool is the TCP twin of an HTTP pool (same Service port and
// members), with an ID of its own: HTTP settings do not apply to bytes.
func tcpPool(http *model.Pool) *model.Pool {
	p := *http
	p.ID = model.ID("pool-tcp", http.Namespace, http.Service, http.Port)
	p.Name = http.Name + "_passthrough"
	p.TCP = true
	p.Affinity, p.Protocol, p.UpstreamTLS, p.Tries = nil, "", nil, 0
	p.Members = append([]model.Member(nil), http.Members...)
	return &p
}

// passthroughRoutes keeps, for each host, the passthrough of the oldest
// Ingress of the host's namespace, and warns the others.
func passthroughRoutes(members []*parsedIngress, owners map[string]*parsedIngress, pools map[string]*model.Pool) ([]model.PassthroughRoute, []model.Problem) {
	var out []model.PassthroughRoute
	var problems []model.Problem
	taken := map[string]*parsedIngress{}
	for _, p := range members {
		for _, r := range p.passthrough {
			owner := owners[string(model.CompareEqualTo)+"\x00"+r.host]
			if certOwner := owners[tlsHostKey(r.host)]; certOwner != nil && certOwner.source.Namespace != p.source.Namespace {
				owner = certOwner
			}
			if owner != nil && owner.source.Namespace != p.source.Namespace {
				problems = append(problems, warning(p.ing, "RouteConflict", r.field,
					"host %s belongs to namespace %s (Ingress %s, older): it is not passed through", r.host, owner.source.Namespace, owner.source.Key()))
				continue
			}
			if first := taken[r.host]; first != nil {
				problems = append(problems, warning(p.ing, "RouteConflict", r.field,
					"host %s is already passed through by Ingress %s (older): this one is ignored", r.host, first.source.Key()))
				continue
			}
			taken[r.host] = p
			addPool(pools, r.pool)
			out = append(out, model.PassthroughRoute{Host: r.host, PoolID: r.pool.ID, Source: p.source})
		}
	}
	return out, problems
}
