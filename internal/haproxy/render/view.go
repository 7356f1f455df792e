package render

import (
	"cmp"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"pier.dev/pier/internal/encode"
	"pier.dev/pier/internal/model"
)

// view is a LoadBalancer after validation: every value re-checked (the
// store may be a custom resource anyone with RBAC can edit), every name
// computed, everything sorted. Rendering and planning read only this.
type view struct {
	uuid      string
	vip, fip  netip.Addr // fip is the zero Addr when there is none
	listeners []listenerView
	pools     []poolView
	// spares are empty backends a new pool can take without a reload
	// (spares.go); only on a shared load balancer.
	spares  []poolView
	need404 bool
	// crtListPath is the crt-list the TLS binds load (Result.CrtListPath).
	crtListPath string
	// sections are the userlists and stick tables the profiles use.
	sections *sections
	// authLuaPath is where the auth-url Lua file goes, or "".
	authLuaPath string
	// backendMaxConn is Options.BackendMaxConn (negative: no bound).
	backendMaxConn int
	// trusted is Options.TrustedProxies.
	trusted []netip.Prefix
	// accessLog is who sends the access-log lines; logSocket is where.
	accessLog AccessLogPlan
	logSocket string
}

type listenerView struct {
	port      int
	tls       bool
	tcp       bool // forwards connections to defaultPool (tcp.go)
	strictSNI bool // no default certificate (model.Listener.StrictSNI)
	certs     []model.Certificate
	policies  []policyView
	needHost  bool // some rule reads the Host header
	needWild  bool // some rule is a wildcard host
	// pathScoped: some rule tests a path other than the catch-all prefix
	// "/", so the path decides which rule a request meets
	// (refuseAmbiguous's third rule).
	pathScoped  bool
	defaultPool string
	routes      *routeTable // nil: the policies are rendered as ACL rules
	profiles    []*profile  // distinct profiles of the policies, by id
	// passthrough are the SNI hosts passed to TCP pools untouched, sorted
	// by host; passthroughMap is their map file, once named.
	passthrough          []passthroughView
	passthroughMap       string
	passthroughSuffixMap string
	// decryptCerts terminate the decrypt routes of passthrough
	// (decrypt.go); decryptMap and decryptSuffixMap are their maps.
	decryptCerts                 []model.Certificate
	decryptMap, decryptSuffixMap string
	decryptDefault               string // the first decrypt certificate's file
	// misdirect are the Gateway listener hostnames sharing this TLS
	// port, most specific first (misdirect.go); nil: no 421 check.
	misdirect []misdirectHost
	// grpc: some route of this listener goes to a gRPC pool, so a TLS
	// bind must offer h2 by ALPN (gRPC clients speak nothing else).
	grpc bool
	// clientValidation checks TLS clients' certificates against the CA
	// file at clientCAPath (clientca.go); nil: none is asked for.
	clientValidation *model.ClientValidation
	clientCAPath     string
}

type policyView struct {
	id     string
	acls   [][]encode.Word // full "acl ..." lines; a name may repeat (OR)
	names  []encode.Word   // the ACL names ANDed by the policy
	reject bool
	status int // FIXED_RESPONSE's status, else 0
	pool   string
	// route is the policy as a map entry, when mappable.
	route    route
	mappable bool
	profile  *profile // nil: no options
}

type poolView struct {
	id      string
	balance encode.Word
	check   bool
	slots   []slot
	// connect and server replace the defaults' timeouts when not 0.
	connect, server time.Duration
	deadline        time.Duration // model.Pool.Deadline
	cookie          *cookieView   // nil: no affinity
	// protocol are the server words for proto, the members' protocol.
	protocol []encode.Word
	proto    model.BackendProtocol
	tcp      bool // a TCP backend (ssl-passthrough)
	// upstream is the pool's UpstreamTLS (zero without): upstreamTLS
	// turns it into protocol once the folder is known.
	upstream model.UpstreamTLS
	// tries, when not 0, sets the backend's retries to tries-1.
	tries int
	// retryOn, when not empty, replaces the defaults' retry-on (an
	// HTTPRoute rule's retry): the words after "retry-on".
	retryOn []encode.Word
	// fail of every failTotal requests are answered 500 (model.Pool).
	fail, failTotal int
	// reqHeaders change every request sent to the pool (model.Pool's
	// RequestHeaders), after the policy's.
	reqHeaders []headerOp
	// rewrite changes the path of every request sent to the pool
	// (model.Pool's RewritePath or PrefixRewrite), after its header
	// changes: the words after "http-request"; nil for none.
	rewrite []encode.Word
}

// slot is one pre-declared server. An unused slot is a disabled
// placeholder, so members can come and go through the runtime API.
type slot struct {
	used   bool
	addr   netip.Addr
	port   int
	weight int
}

var placeholder = slot{addr: netip.MustParseAddr("127.0.0.1"), port: 1, weight: 1}

func newView(lb *model.LoadBalancer, opts Options, prev Slots) (*view, error) {
	if lb == nil {
		return nil, errors.New("nil load balancer")
	}
	if lb.Provider != model.ProviderHAProxy {
		return nil, fmt.Errorf("provider %s is not rendered by HAProxy", encode.Printable(string(lb.Provider)))
	}
	v := &view{uuid: lb.UUID, backendMaxConn: opts.BackendMaxConn, trusted: opts.TrustedProxies,
		accessLog: PlanAccessLog(lb, opts.AccessLog), logSocket: opts.AccessLog.Socket}
	if err := encode.ID("", lb.UUID).Err(); err != nil {
		return nil, fmt.Errorf("uuid: %w", err)
	}
	var err error
	if v.vip, err = encode.IP(lb.VIP); err != nil {
		return nil, fmt.Errorf("vip: %w", err)
	}
	if lb.FIP != "" {
		if v.fip, err = encode.IP(lb.FIP); err != nil {
			return nil, fmt.Errorf("fip: %w", err)
		}
	}
	if v.pools, err = poolViews(lb.Pools, opts.MinSlots, prev); err != nil {
		return nil, err
	}
	if sharedLB(lb) && opts.SparePools > 0 {
		if v.spares, err = spareViews(opts.SparePools, opts.MinSlots, v.pools, opts.BackendMaxConn); err != nil {
			return nil, fmt.Errorf("spare pools: %w", err)
		}
	}
	pools := map[string]bool{}
	for _, p := range v.pools {
		pools[p.id] = true
	}
	v.sections = newSections(lb.UUID, opts.Users)
	if v.listeners, err = listenerViews(lb.Listeners, pools, v.sections); err != nil {
		return nil, err
	}
	if err := checkPassthroughPools(v); err != nil {
		return nil, err
	}
	if err := checkTCPListeners(v); err != nil {
		return nil, err
	}
	grpcPools := map[string]bool{}
	for _, p := range lb.Pools {
		grpcPools[p.ID] = p.Protocol == model.BackendGRPC || p.Protocol == model.BackendGRPCS
	}
	for i := range v.listeners {
		l := &v.listeners[i]
		l.grpc = routesTo(l, grpcPools)
		v.need404 = v.need404 || (l.defaultPool == "" && l.terminates())
		if len(l.policies) > 0 && mappable(l.policies) {
			if l.routes, err = buildRoutes(v.uuid, l.policies); err != nil {
				return nil, fmt.Errorf("listener %d: %w", l.port, err)
			}
		}
	}
	return v, nil
}

// routesTo reports whether some policy or the default of l sends to a
// pool in pools.
func routesTo(l *listenerView, pools map[string]bool) bool {
	if pools[l.defaultPool] {
		return true
	}
	for _, p := range l.policies {
		if pools[p.pool] {
			return true
		}
	}
	return false
}

func listenerViews(ls []model.Listener, pools map[string]bool, lists *sections) ([]listenerView, error) {
	if len(ls) == 0 {
		return nil, errors.New("no listeners")
	}
	out := make([]listenerView, 0, len(ls))
	for i := range ls {
		lv, err := listenerOf(&ls[i], pools, lists)
		if err != nil {
			return nil, fmt.Errorf("listener %d: %w", ls[i].Port, err)
		}
		out = append(out, lv)
	}
	slices.SortFunc(out, func(a, b listenerView) int { return cmp.Compare(a.port, b.port) })
	for i := 1; i < len(out); i++ {
		if out[i].port == out[i-1].port {
			return nil, fmt.Errorf("two listeners on port %d", out[i].port)
		}
	}
	return out, nil
}

func listenerOf(l *model.Listener, pools map[string]bool, lists *sections) (listenerView, error) {
	lv := listenerView{certs: l.Certificates, decryptCerts: l.DecryptCertificates, defaultPool: l.DefaultPoolID, strictSNI: l.StrictSNI}
	var err error
	if lv.port, err = encode.Port(l.Port); err != nil {
		return lv, err
	}
	switch l.Protocol {
	case model.ProtocolHTTP:
	case model.ProtocolTCP:
		if err := tcpListenerOf(l, &lv); err != nil {
			return lv, err
		}
	case model.ProtocolTerminatedHTTPS:
		lv.tls = true
		if len(l.Certificates) == 0 && (len(l.Passthrough) == 0 || len(l.Policies) > 0 || l.DefaultPoolID != "") {
			return lv, errors.New("TERMINATED_HTTPS without certificates")
		}
	default:
		return lv, fmt.Errorf("unknown protocol %s", encode.Printable(string(l.Protocol)))
	}
	if err := checkClientValidation(l, &lv); err != nil {
		return lv, err
	}
	if lv.tls && len(l.ListenerHosts) > 0 {
		if lv.misdirect, err = misdirectHosts(l.ListenerHosts); err != nil {
			return lv, err
		}
		lv.needHost = true
	}
	if lv.passthrough, err = passthroughViews(l); err != nil {
		return lv, err
	}
	if len(l.DecryptCertificates) > 0 && l.Protocol != model.ProtocolTerminatedHTTPS {
		return lv, fmt.Errorf("decrypt certificates on a %s listener", encode.Printable(string(l.Protocol)))
	}
	if lv.defaultPool != "" && !pools[lv.defaultPool] {
		return lv, fmt.Errorf("default pool %s does not exist", encode.Printable(lv.defaultPool))
	}
	// Position orders policies; a stable sort keeps the slice order that
	// translation produced when positions are equal or unset.
	policies := slices.Clone(l.Policies)
	slices.SortStableFunc(policies, func(a, b model.L7Policy) int { return cmp.Compare(a.Position, b.Position) })
	seen := map[string]bool{}
	for i := range policies {
		p := &policies[i]
		if seen[p.ID] {
			return lv, fmt.Errorf("duplicate policy id %s", encode.Printable(p.ID))
		}
		seen[p.ID] = true
		pv, err := policyOf(p, pools, &lv, lists)
		if err != nil {
			return lv, fmt.Errorf("policy %s: %w", encode.Printable(p.ID), err)
		}
		lv.policies = append(lv.policies, pv)
	}
	lv.profiles = listenerProfiles(lv.policies)
	return lv, nil
}

func policyOf(p *model.L7Policy, pools map[string]bool, lv *listenerView, lists *sections) (policyView, error) {
	pv := policyView{id: p.ID}
	pv.route, pv.mappable = routeOf(p)
	switch p.Action {
	case model.ActionRedirectToPool:
		if !pools[p.PoolID] {
			return pv, fmt.Errorf("pool %s does not exist", encode.Printable(p.PoolID))
		}
		pv.pool = p.PoolID
	case model.ActionReject:
		pv.reject = true
		if p.Options != nil {
			return pv, errors.New("a REJECT policy has no options")
		}
	case model.ActionFixedResponse:
		if !fixedStatuses[p.StatusCode] {
			return pv, fmt.Errorf("status %d is not one a FIXED_RESPONSE answers (404, 500-504)", p.StatusCode)
		}
		pv.status = p.StatusCode
		if p.Options != nil {
			return pv, errors.New("a FIXED_RESPONSE policy has no options")
		}
	default:
		return pv, fmt.Errorf("unknown action %s", encode.Printable(string(p.Action)))
	}
	var err error
	if pv.profile, err = profileOf(p.Options, lv.tls, lists, pools); err != nil {
		return pv, fmt.Errorf("options: %w", err)
	}
	for j, r := range p.Rules {
		name := encode.Concat(encode.ID("p_", p.ID), encode.Lit("_"), encode.Num(j))
		if err := name.Err(); err != nil {
			return pv, err
		}
		lines, err := ruleACLs(name, r, lv)
		if err != nil {
			return pv, fmt.Errorf("rule %d: %w", j, err)
		}
		pv.acls = append(pv.acls, lines...)
		pv.names = append(pv.names, name)
	}
	return pv, nil
}

// ruleACLs implements model.CompareType's Ingress semantics.
func ruleACLs(name encode.Word, r model.L7Rule, lv *listenerView) ([][]encode.Word, error) {
	acl := func(words ...encode.Word) []encode.Word {
		return append([]encode.Word{encode.Lit("acl"), name}, words...)
	}
	m, str := encode.Lit("-m"), encode.Lit("str")
	switch {
	case r.Type == model.RuleHostName && r.Compare == model.CompareEqualTo:
		h, err := encode.Host(r.Value)
		lv.needHost = true
		return [][]encode.Word{acl(encode.Lit("var(txn.pier_host)"), m, str, h.Word())}, err
	case r.Type == model.RuleHostName && r.Compare == model.CompareWildcard:
		// txn.pier_hwild is the host with its first label replaced by
		// "*": it equals the rule's value exactly when one label precedes
		// the suffix (see hostVars).
		h, err := encode.WildcardHost(r.Value)
		lv.needHost, lv.needWild = true, true
		return [][]encode.Word{acl(encode.Lit("var(txn.pier_hwild)"), m, str, h.Word())}, err
	case r.Type == model.RuleHostName && r.Compare == model.CompareSuffix:
		// One or more labels, then the suffix: the host ends with ".suffix".
		h, err := encode.HostSuffix(r.Value)
		lv.needHost = true
		return [][]encode.Word{acl(encode.Lit("var(txn.pier_host)"), m, encode.Lit("end"), h.Word())}, err
	case r.Type == model.RulePath && r.Compare == model.CompareEqualTo:
		p, err := encode.Path(r.Value, encode.PathExact)
		lv.pathScoped = true
		return [][]encode.Word{acl(encode.Lit("path"), m, str, p.Word())}, err
	case r.Type == model.RulePath && r.Compare == model.CompareStartsWith:
		lv.pathScoped = lv.pathScoped || strings.TrimSuffix(r.Value, "/") != ""
		return prefixACLs(r.Value, acl)
	case r.Type == model.RulePath && r.Compare == model.CompareRegex:
		lv.pathScoped = true
		// Re-validated here: the store may be a custom resource anyone
		// with write access edits; HAProxy gets the re-written form.
		re, err := encode.ParsePathRegex(r.Value)
		return [][]encode.Word{acl(encode.Lit("path"), m, encode.Lit("reg"), re.Word())}, err
	case isCond(r):
		return condACLs(r, acl)
	}
	return nil, fmt.Errorf("unsupported rule %s %s", encode.Printable(string(r.Type)), encode.Printable(string(r.Compare)))
}

// condACLs matches HTTPRoute's Exact method, header and query rules. A
// header compares its last occurrence whole (req.fhdr, as the match maps
// hash it); an absent header or parameter matches no value. Values are
// compared by their SHA-1, as in the match maps: a 4 KiB header value
// would not fit a config line (MaxLineBytes).
func condACLs(r model.L7Rule, acl func(...encode.Word) []encode.Word) ([][]encode.Word, error) {
	m, str := encode.Lit("-m"), encode.Lit("str")
	var sample encode.Word
	var v encode.Value
	var err error
	switch r.Type {
	case model.RuleMethod:
		v, err = encode.Method(r.Value)
		return [][]encode.Word{acl(encode.Lit("method"), m, str, v.Word())}, err
	case model.RuleHeader:
		sample = encode.FullHeaderSample(strings.ToLower(r.Key))
		v, err = encode.HeaderValue(r.Value)
	default:
		sample = encode.QueryParamSample(r.Key)
		v, err = encode.QueryValue(r.Value)
	}
	if err == nil {
		err = sample.Err()
	}
	hashed := encode.Concat(sample, encode.Lit(",sha1,hex"))
	return [][]encode.Word{acl(hashed, m, str, encode.ValueHash(v))}, err
}

// prefixACLs matches element-wise: "/foo" matches "/foo" and "/foo/...",
// not "/foobar". Two acl lines with one name are ORed by HAProxy. A
// trailing slash in the value is dropped ("/foo/" as Prefix is "/foo").
func prefixACLs(value string, acl func(...encode.Word) []encode.Word) ([][]encode.Word, error) {
	p, err := encode.Path(value, encode.PathPrefix)
	if err != nil {
		return nil, err
	}
	base := strings.TrimSuffix(p.String(), "/")
	if base == "" {
		return [][]encode.Word{acl(encode.Lit("always_true"))}, nil
	}
	exact, err := encode.Path(base, encode.PathPrefix)
	if err != nil {
		return nil, err
	}
	under, err := encode.PathBelow(base)
	if err != nil {
		return nil, err
	}
	m := encode.Lit("-m")
	return [][]encode.Word{
		acl(encode.Lit("path"), m, encode.Lit("str"), exact.Word()),
		acl(encode.Lit("path"), m, encode.Lit("beg"), under),
	}, nil
}
