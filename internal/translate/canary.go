package translate

import (
	"fmt"

	"pier.dev/pier/internal/annotation"
	"pier.dev/pier/internal/encode"
	"pier.dev/pier/internal/model"
)

// ingress-nginx's canary-weight-total default, and pier's bound on it.
const (
	defaultCanaryTotal = 100
	maxCanaryTotal     = 1000000
)

// canarySettings are canary and its companions.
type canarySettings struct {
	enabled                     bool
	weight, total               int
	header, headerValue, cookie string
	headerPattern               string // as written: encode.ParseValueRegex's subset
}

func parseCanaryWeight(name, v string, min int) (int, error) {
	n, err := encode.Int(v, min, maxCanaryTotal)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", name, err)
	}
	return n, nil
}

func parseCanaryHeader(v string) (string, error) {
	h, err := encode.HeaderName(v)
	if err != nil {
		return "", fmt.Errorf("canary-by-header: %w", err)
	}
	return h.String(), nil
}

func parseCanaryHeaderValue(v string) (string, error) {
	h, err := encode.PlainValue(v)
	if err != nil {
		return "", fmt.Errorf("canary-by-header-value: %w", err)
	}
	return h.String(), nil
}

func parseCanaryHeaderPattern(v string) (string, error) {
	if _, err := encode.ParseValueRegex(v); err != nil {
		return "", fmt.Errorf("canary-by-header-pattern: %w", err)
	}
	return v, nil
}

func parseCanaryCookie(v string) (string, error) {
	c, err := encode.CookieName(v)
	if err != nil {
		return "", fmt.Errorf("canary-by-cookie: %w", err)
	}
	return c.String(), nil
}

// canaryIssues checks the companions once all are read: the weight is
// within the total, a header value needs its header, and without canary
// "true" they do nothing (as in ingress-nginx).
func canaryIssues(c canarySettings, ann map[string]string) []annotationIssue {
	var out []annotationIssue
	if c.weight > c.total {
		out = append(out, annotationIssue{key: annotation.KeyOf(ann, "canary-weight"), fatal: true,
			message: fmt.Sprintf("canary-weight %d is over canary-weight-total %d", c.weight, c.total)})
	}
	if c.headerValue != "" && c.header == "" {
		out = append(out, annotationIssue{key: annotation.KeyOf(ann, "canary-by-header-value"),
			message: "canary-by-header-value without canary-by-header (the header it is compared with) does nothing, as in ingress-nginx"})
	}
	switch {
	case c.headerPattern != "" && c.header == "":
		out = append(out, annotationIssue{key: annotation.KeyOf(ann, "canary-by-header-pattern"),
			message: "canary-by-header-pattern without canary-by-header (the header it is matched against) does nothing, as in ingress-nginx"})
	case c.headerPattern != "" && c.headerValue != "":
		out = append(out, annotationIssue{key: annotation.KeyOf(ann, "canary-by-header-pattern"),
			message: "canary-by-header-value is also set and wins: the pattern is ignored, as in ingress-nginx"})
	}
	if !c.enabled {
		for _, name := range []string{"canary-weight", "canary-weight-total", "canary-by-header", "canary-by-header-value",
			"canary-by-header-pattern", "canary-by-cookie"} {
			if _, set := ann[annotation.KeyOf(ann, name)]; set {
				out = append(out, annotationIssue{key: annotation.KeyOf(ann, name), message: name + " without canary \"true\" does nothing, as in ingress-nginx"})
			}
		}
	}
	return out
}

// canaryRef is one route of a canary Ingress, waiting for the main route
// with the same host and path.
type canaryRef struct {
	p *parsedIngress
	r route
	// attached says a main route took it.
	attached bool
}

// canaryKey names a route by namespace, host and path, as a canary must
// match its main route.
func canaryKey(ns string, r route) string {
	return ns + "\x00" + string(r.hostMatch) + "\x00" + r.host + "\x00" + string(r.pathMatch) + "\x00" + r.path
}

// splitCanaries takes the canary Ingresses out of parsed (they get no
// load balancer of their own) and indexes their routes, oldest first.
func splitCanaries(parsed []*parsedIngress) ([]*parsedIngress, map[string][]*canaryRef, []*canaryRef) {
	var mains []*parsedIngress
	index := map[string][]*canaryRef{}
	var all []*canaryRef
	for _, p := range parsed {
		if !p.settings.canary.enabled {
			mains = append(mains, p)
			continue
		}
		for _, r := range p.routes {
			c := &canaryRef{p: p, r: r}
			index[canaryKey(p.source.Namespace, r)] = append(index[canaryKey(p.source.Namespace, r)], c)
			all = append(all, c)
		}
	}
	return mains, index, all
}

// attachCanary gives a kept main route the oldest canary of its host
// and path, adding the canary's pool and source to the load balancer;
// a newer canary of the same route is refused (an Error: not served).
func attachCanary(k *keptRoute, index map[string][]*canaryRef, pools map[string]*model.Pool, lb *model.LoadBalancer,
	sources map[string]bool) []model.Problem {
	refs := index[canaryKey(k.owner.source.Namespace, k.route)]
	if len(refs) == 0 {
		return nil
	}
	c := refs[0]
	c.attached = true
	s := c.p.settings.canary
	k.canary = &model.Canary{PoolID: c.r.poolID, Weight: s.weight, WeightTotal: s.total, Header: s.header,
		Cookie: s.cookie, Source: c.p.source}
	if s.header != "" {
		k.canary.HeaderValue = s.headerValue
		if s.headerValue == "" {
			k.canary.HeaderPattern = s.headerPattern
		}
	}
	addPool(pools, c.p.pools[c.r.poolID])
	if !sources[c.p.source.Key()] {
		sources[c.p.source.Key()] = true
		lb.Sources = append(lb.Sources, c.p.source)
	}
	var problems []model.Problem
	for _, other := range refs[1:] {
		other.attached = true // not served, but said why below
		problems = append(problems, refusal(other.p.ing, "CanaryConflict", other.r.field,
			"host %s path %s already has the canary of %s (older): this one is not served", quoteForMessage(k.host),
			quoteForMessage(k.path), c.p.source.Key()))
	}
	return problems
}

// unattachedCanaries reports each canary route no main route took, as
// an Error: that route is not served (a canary of another namespace never
// takes a host's traffic).
func unattachedCanaries(all []*canaryRef) []model.Problem {
	var out []model.Problem
	for _, c := range all {
		if !c.attached {
			out = append(out, refusal(c.p.ing, "CanaryWithoutMain", c.r.field,
				"no Ingress of namespace %s serves host %s path %s without canary: this canary route is not served",
				c.p.source.Namespace, quoteForMessage(c.r.host), quoteForMessage(c.r.path)))
		}
	}
	return out
}
