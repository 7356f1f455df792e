package gatewayapi

import (
	"fmt"
	"regexp"
	"sort"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"pier.dev/pier/internal/encode"
	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/translate"
)

// gwMatch is one validated HTTPRouteMatch.
type gwMatch struct {
	pathMatch model.CompareType // EQUAL_TO (Exact) or STARTS_WITH (PathPrefix)
	path      string
	method    string         // "" for any
	headers   []model.L7Rule // sorted by key, one per name
	queries   []model.L7Rule // sorted by key, one per name
}

// extended reports whether the match needs more than host and path.
func (m gwMatch) extended() bool {
	return m.method != "" || len(m.headers) > 0 || len(m.queries) > 0
}

// gwRule is one validated HTTPRouteRule: its matches, in order, and
// its filters.
type gwRule struct {
	matches  []gwMatch
	filters  gwFilters
	settings ruleSettings
	// refFilters are the backendRefs' filters, one per ref; nil when no
	// ref has filters.
	refFilters []refFilters
}

// routeRefusal is why a whole HTTPRoute is not served: the field and
// message name the first invalid value.
type routeRefusal struct {
	field, message string
}

// parseRouteSpec validates an HTTPRoute's hostnames and matches. One
// invalid value refuses the whole route (as one invalid path refuses a
// whole Ingress): serving the rest would serve a route other than the
// one written.
func parseRouteSpec(r *gwv1.HTTPRoute, opts translate.Options) ([]string, []gwRule, *routeRefusal) {
	var hosts []string
	for i, h := range r.Spec.Hostnames {
		if _, err := translate.CheckHost(string(h)); err != nil || h == "" {
			return nil, nil, &routeRefusal{fmt.Sprintf("spec.hostnames[%d]", i),
				fmt.Sprintf("hostname %s: %v", translate.Quote(string(h)), err)}
		}
		hosts = append(hosts, string(h))
	}
	rules := make([]gwRule, 0, len(r.Spec.Rules))
	for i, rule := range r.Spec.Rules {
		field := fmt.Sprintf("spec.rules[%d]", i)
		var out gwRule
		var refusal *routeRefusal
		if out.filters, refusal = parseFilters(field+".filters", rule.Filters); refusal != nil {
			return nil, nil, refusal
		}
		if out.settings, refusal = parseRuleSettings(field, rule, r, i); refusal != nil {
			return nil, nil, refusal
		}
		specs := rule.Matches
		if len(specs) == 0 {
			specs = []gwv1.HTTPRouteMatch{{}} // the spec's default: PathPrefix "/"
		}
		for j, m := range specs {
			gm, err := parseMatch(m)
			if err != nil {
				return nil, nil, &routeRefusal{fmt.Sprintf("%s.matches[%d]", field, j), err.Error()}
			}
			if gm.extended() && !opts.GatewayExtendedMatches {
				return nil, nil, &routeRefusal{fmt.Sprintf("%s.matches[%d]", field, j),
					"header, query-parameter and method matches are not served by this version of pier yet"}
			}
			out.matches = append(out.matches, gm)
		}
		if err := out.filters.checkPrefixMatches(out.matches); err != nil {
			return nil, nil, &routeRefusal{field + ".filters", err.Error()}
		}
		if out.refFilters, refusal = parseRuleRefFilters(field, rule.BackendRefs, out); refusal != nil {
			return nil, nil, refusal
		}
		rules = append(rules, out)
	}
	// Each host × match becomes a policy: bound them as an Ingress's
	// paths are, so one route cannot blow up render.
	combos := 0
	for _, rule := range rules {
		combos += len(rule.matches) * max(1, len(hosts))
	}
	if opts.MaxPathsPerIngress > 0 && combos > opts.MaxPathsPerIngress {
		return nil, nil, &routeRefusal{"spec", fmt.Sprintf("%d hostname × match combinations; pier serves at most %d per route (--max-paths-per-ingress)",
			combos, opts.MaxPathsPerIngress)}
	}
	return hosts, rules, nil
}

func parseMatch(m gwv1.HTTPRouteMatch) (gwMatch, error) {
	var out gwMatch
	var err error
	if out.pathMatch, out.path, err = gatewayPath(m.Path); err != nil {
		return out, err
	}
	if m.Method != nil {
		if out.method, err = gatewayMethod(string(*m.Method)); err != nil {
			return out, err
		}
	}
	seen := map[string]bool{}
	for i, h := range m.Headers {
		if h.Type != nil && *h.Type != gwv1.HeaderMatchExact {
			return out, fmt.Errorf("headers[%d]: type %s is not supported (Exact only)", i, translate.Quote(string(*h.Type)))
		}
		name, err := encode.HeaderName(string(h.Name))
		if err != nil {
			return out, fmt.Errorf("headers[%d].name: %w", i, err)
		}
		value, err := encode.HeaderValue(h.Value)
		if err != nil {
			return out, fmt.Errorf("headers[%d].value: %w", i, err)
		}
		// Header names are case-insensitive; the spec says the first of
		// two matches on one name wins and the rest are ignored.
		key := strings.ToLower(name.String())
		if !seen[key] {
			seen[key] = true
			out.headers = append(out.headers, model.L7Rule{Type: model.RuleHeader, Compare: model.CompareEqualTo, Key: key, Value: value.String()})
		}
	}
	seen = map[string]bool{}
	for i, q := range m.QueryParams {
		if q.Type != nil && *q.Type != gwv1.QueryParamMatchExact {
			return out, fmt.Errorf("queryParams[%d]: type %s is not supported (Exact only)", i, translate.Quote(string(*q.Type)))
		}
		if !queryNamePattern.MatchString(string(q.Name)) {
			return out, fmt.Errorf("queryParams[%d].name %s: allowed are letters, digits and ._~- (1-256)", i, translate.Quote(string(q.Name)))
		}
		if len(q.Value) > maxQueryValue || !queryValuePattern.MatchString(q.Value) {
			return out, fmt.Errorf("queryParams[%d].value %s: allowed are letters, digits and ._~-!*+:@/ (1-1024)", i, translate.Quote(q.Value))
		}
		if !seen[string(q.Name)] { // query names are case-sensitive
			seen[string(q.Name)] = true
			out.queries = append(out.queries, model.L7Rule{Type: model.RuleQuery, Compare: model.CompareEqualTo, Key: string(q.Name), Value: q.Value})
		}
	}
	sort.Slice(out.headers, func(i, j int) bool { return out.headers[i].Key < out.headers[j].Key })
	sort.Slice(out.queries, func(i, j int) bool { return out.queries[i].Key < out.queries[j].Key })
	return out, nil
}

// Query parameter names and values reach map keys or ACL arguments like a
// path, so they get an anchored allow-list of the unreserved and a few
// sub-delimiter characters: no quote, '%', '$', '#', '&', '=', space, nor
// the converter-argument delimiters ',', ';', '(' and ')', so a value
// stays one word in the config and in a map line, and never ends a
// converter's arguments. Wider values are refused, not escaped.
var (
	queryNamePattern = regexp.MustCompile(`^[A-Za-z0-9._~-]{1,256}$`)
	// No '?': HAProxy 2.6's url_param ends a value there ("?q=a?b" is "a").
	queryValuePattern = regexp.MustCompile(`^[A-Za-z0-9._~!*+:@/-]+$`) // and maxQueryValue bytes
)

// maxQueryValue bounds a query parameter value, as paths are bounded.
const maxQueryValue = 1024

// gatewayPath validates a path match with Ingress's rules: Exact is
// EQUAL_TO, PathPrefix is an element-wise STARTS_WITH without trailing
// slash. Absent means PathPrefix "/".
func gatewayPath(pm *gwv1.HTTPPathMatch) (model.CompareType, string, error) {
	typ, value := gwv1.PathMatchPathPrefix, "/"
	if pm != nil && pm.Type != nil {
		typ = *pm.Type
	}
	if pm != nil && pm.Value != nil {
		value = *pm.Value
	}
	var pt networkingv1.PathType
	switch typ {
	case gwv1.PathMatchExact:
		pt = networkingv1.PathTypeExact
	case gwv1.PathMatchPathPrefix:
		pt = networkingv1.PathTypePrefix
	default:
		return "", "", fmt.Errorf("path type %s is not supported (Exact, PathPrefix)", translate.Quote(string(typ)))
	}
	path, compare, err := translate.CheckPath(value, &pt)
	return compare, path, err
}

// gatewayMethod allows the methods the spec's enum lists.
func gatewayMethod(m string) (string, error) {
	switch gwv1.HTTPMethod(m) {
	case gwv1.HTTPMethodGet, gwv1.HTTPMethodHead, gwv1.HTTPMethodPost, gwv1.HTTPMethodPut, gwv1.HTTPMethodDelete,
		gwv1.HTTPMethodConnect, gwv1.HTTPMethodOptions, gwv1.HTTPMethodTrace, gwv1.HTTPMethodPatch:
		return m, nil
	}
	return "", fmt.Errorf("method %s is not one of the spec's", translate.Quote(m))
}

// intersectHosts is the spec's hostname intersection of a listener's
// hostname (l, "" for any) and a route's hostnames (none for any). It
// returns the hosts the route serves on that listener, the more specific
// name of each matching pair; [""] means every host; nil means none
// match, and the route does not attach there. Gateway API wildcards
// match one or more labels: "*.example.com" covers "a.b.example.com".
func intersectHosts(l string, route []string) []string {
	if len(route) == 0 {
		return []string{l}
	}
	if l == "" {
		return dedupSorted(route)
	}
	var out []string
	for _, h := range route {
		switch {
		case h == l:
			out = append(out, h)
		case isWildcard(l) && covers(l, h):
			out = append(out, h)
		case isWildcard(h) && covers(h, l):
			out = append(out, l)
		}
	}
	return dedupSorted(out)
}

func isWildcard(h string) bool { return strings.HasPrefix(h, "*.") }

// covers reports whether wildcard w matches h (a name or a narrower
// wildcard): h ends with w's suffix after at least one more label.
func covers(w, h string) bool {
	suffix := w[1:] // ".example.com"
	label := strings.TrimSuffix(h, suffix)
	return len(label) < len(h) && label != "" && label != "*"
}

func dedupSorted(in []string) []string {
	out := append([]string(nil), in...)
	sort.Strings(out)
	n := 0
	for i, s := range out {
		if i == 0 || s != out[n-1] {
			out[n] = s
			n++
		}
	}
	return out[:n]
}
