package web

import (
	"net/http"
	"net/netip"
	"time"

	"pier.dev/pier/internal/model"
)

// lbPage is the detail page: the Octavia tree, addresses, placement with
// each node's report, the rendered haproxy.conf and the problems of the
// Ingresses the load balancer serves.
type lbPage struct {
	Title        string
	UUID         string
	Name         string
	Provider     string
	State        string
	Message      string
	SpecHash     string
	VIP, FIP     string
	RequestedFIP string
	Created      time.Time
	Age          string `json:"-"`
	Sources      []sourceLink
	Nodes        []nodeReport
	// Holder is the node whose agent reports VRRP MASTER; History its
	// changes, newest first (what an operator reads first).
	Holder    string
	History   []holderChange
	Listeners []listenerView
	Pools     []poolView
	Problems  []problemView
	// Errors are the recent 5xx kinds the nodes report, newest first.
	Errors     []errorView
	Config     string
	ConfigNote string
}

func (p *lbPage) etagSource() any { return p }

type nodeReport struct {
	Role       string
	Node       string
	Reported   bool
	State      string
	Current    bool // the node serves the spec the store holds now
	SpecHash   string
	ConfigHash string
	Message    string
	Updated    time.Time
	// VRRP is the role the node's agent reports; "" without VRRP.
	VRRP           string
	MembersUp      int
	Members        int
	MembersDown    []string
	Rate, Errors   string // "" without rates (the native provider)
	Reloads        uint64
	RuntimeUpdates uint64
}

type holderChange struct {
	At       time.Time
	From, To string
}

type listenerView struct {
	Name         string
	Protocol     string
	Port         int
	DefaultPool  poolRef
	Certificates []certView
	Policies     []policyView
}

type certView struct {
	Secret   string // namespace/name of the Secret: a reference, never its data
	Hosts    []string
	SHA256   string
	NotAfter time.Time
}

type policyView struct {
	Position int
	Action   string
	Rules    []ruleView
	Pool     poolRef
	Source   sourceLink
}

type ruleView struct{ Type, Compare, Value string }

type poolRef struct {
	Anchor  string // "pool-<id>" on this page
	Name    string
	Members int
}

type poolView struct {
	Anchor      string
	ID          string
	Name        string
	Service     string
	Port        string
	Algorithm   string
	HealthCheck bool
	Members     []memberView
}

type memberView struct {
	Address string
	Port    int
	Weight  int
	Target  string
	// Health is how HAProxy on the serving node sees the member: "up",
	// "down", "not checked" (a pool without health checks, which HAProxy
	// counts up whatever the member does), or "" when not known (no
	// report, or past the MaxMembersDown the report lists).
	Health string
}

type problemView struct {
	Ingress  sourceLink
	Severity string
	Reason   string
	Field    string
	Message  string
}

func (h *Handler) loadBalancer(w http.ResponseWriter, r *http.Request) {
	lb, err := h.Store.Get(r.Context(), r.PathValue("uuid"))
	if err != nil {
		h.fail(w, r, err)
		return
	}
	gws, routes := h.gatewayStates()
	p := buildLB(lb, problemsBySource(h.ingresses(), gws, routes), h.now())
	switch {
	case h.Config == nil:
		p.ConfigNote = "not available in this mode"
	default:
		conf, err := h.Config(lb)
		if err != nil {
			p.ConfigNote = "could not render: " + Clean(err.Error())
		} else {
			p.Config = Clean(string(conf))
		}
	}
	h.page(w, r, http.StatusOK, "lb", p)
}

func buildLB(lb *model.LoadBalancer, problems map[model.ObjectRef][]model.Problem, now time.Time) *lbPage {
	p := &lbPage{Title: Clean(lb.Name), UUID: Clean(lb.UUID), Name: Clean(lb.Name), Provider: Clean(string(lb.Provider)),
		State: displayState(lb), Message: Clean(lb.Status.Message), SpecHash: lb.SpecHash(),
		VIP: Clean(lb.VIP), FIP: Clean(lb.FIP), RequestedFIP: Clean(lb.RequestedFIP),
		Created: lb.CreatedAt, Age: Age(now.Sub(lb.CreatedAt)), Sources: sourceLinks(lb.Sources)}
	p.Nodes = nodeReports(lb)
	p.Errors = recentErrors(lb, now, nil)
	p.Holder = Clean(lb.Status.Holder)
	for i := len(lb.Status.History) - 1; i >= 0; i-- {
		c := lb.Status.History[i]
		p.History = append(p.History, holderChange{At: c.At, From: Clean(c.From), To: Clean(c.To)})
	}
	pools := map[string]poolRef{}
	health := memberHealth(lb)
	for _, pool := range lb.Pools {
		v := buildPool(pool, health)
		p.Pools = append(p.Pools, v)
		pools[pool.ID] = poolRef{Anchor: v.Anchor, Name: v.Name, Members: len(v.Members)}
	}
	for _, l := range lb.Listeners {
		p.Listeners = append(p.Listeners, buildListener(l, pools))
	}
	for _, s := range lb.Sources {
		for _, pr := range problems[s.Ref()] {
			p.Problems = append(p.Problems, buildProblem(pr))
		}
	}
	return p
}

// nodeReports lists the placed nodes, then any report from a node the
// placement no longer names (stores drop those, but a view shows what is
// there rather than what should be).
func nodeReports(lb *model.LoadBalancer) []nodeReport {
	var out []nodeReport
	seen := map[string]bool{}
	add := func(role, node string) {
		if node == "" {
			return
		}
		seen[node] = true
		n := nodeReport{Role: role, Node: Clean(node)}
		if r, ok := lb.Status.Report(node); ok {
			n.Reported, n.State, n.Current = true, Clean(string(r.State)), r.SpecHash == lb.SpecHash()
			n.SpecHash, n.ConfigHash, n.Message, n.Updated = Clean(r.SpecHash), Clean(r.ConfigHash), Clean(r.Message), r.UpdatedAt
			n.VRRP, n.MembersUp, n.Members = Clean(string(r.VRRP)), r.MembersUp, r.Members
			for _, m := range r.MembersDown {
				n.MembersDown = append(n.MembersDown, Clean(m))
			}
			if lb.Provider == model.ProviderHAProxy {
				n.Rate, n.Errors = rateText(r.RequestsPerSecond), shareText(r.ErrorShare)
			}
			n.Reloads, n.RuntimeUpdates = r.Reloads, r.RuntimeUpdates
		}
		out = append(out, n)
	}
	add("active", lb.Placement.Active)
	add("standby", lb.Placement.Standby)
	for _, r := range lb.Status.Nodes {
		if !seen[r.Node] {
			add("not placed", r.Node)
		}
	}
	return out
}

// memberHealth says how the serving node's HAProxy sees a member: down
// when its report lists it, up when the report lists every member down
// (fewer than MaxMembersDown: the list was not cut) and this one is not
// among them, else not known.
func memberHealth(lb *model.LoadBalancer) func(m model.Member, checked bool) string {
	r, ok := servingReport(lb)
	if !ok || r.Members == 0 || lb.Provider != model.ProviderHAProxy {
		return func(model.Member, bool) string { return "" }
	}
	down := map[string]bool{}
	for _, m := range r.MembersDown {
		down[m] = true
	}
	complete := len(r.MembersDown) < model.MaxMembersDown
	return func(m model.Member, checked bool) string {
		a, err := netip.ParseAddr(m.Address)
		if err != nil || m.Port < 1 || m.Port > 65535 {
			return ""
		}
		switch key := netip.AddrPortFrom(a, uint16(m.Port)).String(); {
		case down[key]:
			return "down"
		case !complete:
			return ""
		case !checked:
			return "not checked"
		}
		return "up"
	}
}

func buildPool(pool model.Pool, health func(model.Member, bool) string) poolView {
	v := poolView{Anchor: "pool-" + Clean(pool.ID), ID: Clean(pool.ID), Name: Clean(pool.Name),
		Service: Clean(pool.Namespace + "/" + pool.Service), Port: Clean(pool.Port),
		Algorithm: Clean(string(pool.Algorithm)), HealthCheck: pool.HealthCheck}
	for _, m := range pool.Members {
		v.Members = append(v.Members, memberView{Address: Clean(m.Address), Port: m.Port, Weight: m.Weight, Target: Clean(m.Target),
			Health: health(m, pool.HealthCheck)})
	}
	return v
}

func buildListener(l model.Listener, pools map[string]poolRef) listenerView {
	v := listenerView{Name: Clean(l.Name), Protocol: Clean(string(l.Protocol)), Port: l.Port}
	if l.DefaultPoolID != "" {
		v.DefaultPool = poolFor(l.DefaultPoolID, pools)
	}
	for _, c := range l.AllCertificates() {
		cv := certView{Secret: Clean(c.Namespace + "/" + c.Secret), SHA256: Clean(c.SHA256), NotAfter: c.NotAfter}
		for _, host := range c.Hosts {
			cv.Hosts = append(cv.Hosts, Clean(host))
		}
		v.Certificates = append(v.Certificates, cv)
	}
	for _, pol := range l.Policies {
		pv := policyView{Position: pol.Position, Action: Clean(string(pol.Action)),
			Source: sourceLinks([]model.Source{pol.Source})[0]}
		if pol.PoolID != "" {
			pv.Pool = poolFor(pol.PoolID, pools)
		}
		for _, rule := range pol.Rules {
			typ := string(rule.Type)
			if rule.Key != "" { // HEADER x-a, QUERY_PARAMETER q
				typ += " " + rule.Key
			}
			pv.Rules = append(pv.Rules, ruleView{Type: Clean(typ), Compare: Clean(string(rule.Compare)), Value: Clean(rule.Value)})
		}
		v.Policies = append(v.Policies, pv)
	}
	return v
}

func poolFor(id string, pools map[string]poolRef) poolRef {
	if ref, ok := pools[id]; ok {
		return ref
	}
	return poolRef{Name: "missing pool " + Clean(id)}
}

func buildProblem(p model.Problem) problemView {
	return problemView{
		Ingress:  sourceLinks([]model.Source{{Kind: p.Kind, Namespace: p.Namespace, Name: p.Name}})[0],
		Severity: Clean(string(p.Severity)), Reason: Clean(p.Reason), Field: Clean(p.Field), Message: Clean(p.Message),
	}
}
