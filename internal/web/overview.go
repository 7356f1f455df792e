package web

import (
	"math"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"pier.dev/pier/internal/model"
)

// DefaultPageSize bounds the overview. A row weighs about 640 bytes
// (bench/web_test.go measures it): 1,000 load balancers on one page are
// 0.64 MB, 10,000 would be 6 MB; 200 rows are 0.13 MB and still fit an
// operator's scroll, and the filters narrow the rest.
const DefaultPageSize = 200

// filter is the overview's query: every field is a query parameter, so a
// filtered view is a link and works without JavaScript.
type filter struct {
	Namespace string `json:"namespace"`
	Provider  string `json:"provider"`
	State     string `json:"state"`
	Page      int    `json:"page"`
}

func parseFilter(q url.Values) filter {
	f := filter{Namespace: q.Get("namespace"), Provider: q.Get("provider"), State: q.Get("state")}
	f.Page, _ = strconv.Atoi(q.Get("page"))
	if f.Page < 1 {
		f.Page = 1
	}
	return f
}

func (f filter) query(page int) string {
	q := url.Values{}
	for k, v := range map[string]string{"namespace": f.Namespace, "provider": f.Provider, "state": f.State} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if page > 1 {
		q.Set("page", strconv.Itoa(page))
	}
	if len(q) == 0 {
		return "/ui/"
	}
	return "/ui/?" + q.Encode()
}

type option struct {
	Value    string `json:"v"`
	Selected bool   `json:"s"`
}

func options(values map[string]bool, selected string) []option {
	keys := make([]string, 0, len(values))
	for v := range values {
		keys = append(keys, v)
	}
	sort.Strings(keys)
	out := make([]option, 0, len(keys))
	for _, v := range keys {
		out = append(out, option{Value: Clean(v), Selected: v == selected})
	}
	return out
}

// Display states: the summary state, with ACTIVE split in two, because an
// ACTIVE load balancer whose active node serves an older spec is not yet
// what the operator asked for.
const (
	stateUpdating = "UPDATING"
)

func displayState(lb *model.LoadBalancer) string {
	switch {
	case lb.Status.State == "":
		return string(model.StatePending)
	case lb.Status.State == model.StateActive && !lb.Serving():
		return stateUpdating
	}
	return Clean(string(lb.Status.State))
}

type sourceLink struct {
	Kind string `json:"k"`
	Key  string `json:"n"` // namespace/name, cleaned
	Href string `json:"h,omitempty"`
}

func sourceLinks(srcs []model.Source) []sourceLink {
	out := make([]sourceLink, 0, len(srcs))
	for _, s := range srcs {
		l := sourceLink{Kind: Clean(s.Kind), Key: Clean(s.Key())}
		switch s.Kind {
		case model.KindIngress:
			l.Href = ingressHref(s.Namespace, s.Name)
		case model.KindGateway:
			l.Href = gatewayHref(s.Namespace, s.Name)
		case model.KindHTTPRoute:
			l.Href = routeHref(s.Namespace, s.Name)
		}
		out = append(out, l)
	}
	return out
}

func ingressHref(namespace, name string) string {
	return "/ui/ingress/" + url.PathEscape(namespace) + "/" + url.PathEscape(name)
}

func lbHref(uuid string) string { return "/ui/lb/" + url.PathEscape(uuid) }

// nodeCell is one placed node and what its agent reports.
type nodeCell struct {
	Node  string `json:"n"`
	State string `json:"s"` // the node's reported state, "" when it has not reported
	// Role is the node's reported VRRP role (MASTER, BACKUP, FAULT); ""
	// without VRRP.
	Role string `json:"r,omitempty"`
}

func placedNode(lb *model.LoadBalancer, node string) nodeCell {
	if node == "" {
		return nodeCell{}
	}
	c := nodeCell{Node: Clean(node)}
	if r, ok := lb.Status.Report(node); ok {
		c.State, c.Role = Clean(string(r.State)), Clean(string(r.VRRP))
		if r.State == model.StateActive && r.SpecHash != lb.SpecHash() {
			c.State = stateUpdating
		}
	}
	return c
}

// health is what the node that serves a load balancer reports: the node
// that holds its addresses (VRRP MASTER), else the active node; the
// standby's HAProxy sees the same members but serves nobody.
type health struct {
	Node string `json:"n,omitempty"` // "" when that node has not reported
	// Known is false when the node's driver does not count members (the
	// native provider): the view then shows the spec's count only.
	Known          bool   `json:"k,omitempty"`
	Up             int    `json:"u"`
	Total          int    `json:"t"`
	Reloads        uint64 `json:"rl"`
	RuntimeUpdates uint64 `json:"ru"`
	// Rate and Errors are the node's requests per second and 5xx share
	// as the page prints them; "" where no rate is measured (the native
	// provider).
	Rate   string `json:"r,omitempty"`
	Errors string `json:"e,omitempty"`
}

// servingReport is the report of the node that serves lb: the one that
// holds its addresses, else the active node.
func servingReport(lb *model.LoadBalancer) (model.NodeStatus, bool) {
	node := lb.Status.Holder
	if node == "" {
		node = lb.Placement.Active
	}
	return lb.Status.Report(node)
}

func healthOf(lb *model.LoadBalancer, specMembers int) health {
	r, ok := servingReport(lb)
	if !ok {
		return health{Total: specMembers} // shown as the spec's count
	}
	h := health{Node: Clean(r.Node), Known: r.Members > 0 || specMembers == 0, Up: r.MembersUp, Total: r.Members,
		Reloads: r.Reloads, RuntimeUpdates: r.RuntimeUpdates}
	if !h.Known {
		h.Total = specMembers
	}
	if lb.Provider == model.ProviderHAProxy {
		h.Rate, h.Errors = rateText(r.RequestsPerSecond), shareText(r.ErrorShare)
	}
	return h
}

// rateText prints a rate already rounded to two figures: "1200 req/s",
// "0.5 req/s".
func rateText(perSecond float64) string {
	return strconv.FormatFloat(perSecond, 'f', -1, 64) + " req/s"
}

// shareText prints a share of 0 to 1 as a percentage: "0.97% 5xx".
func shareText(share float64) string {
	return strconv.FormatFloat(math.Round(share*1e4)/100, 'f', -1, 64) + "% 5xx"
}

type lbRow struct {
	Href     string       `json:"h"`
	Name     string       `json:"n"`
	Sources  []sourceLink `json:"src"`
	Provider string       `json:"p"`
	VIP      string       `json:"v"`
	FIP      string       `json:"f"`
	Active   nodeCell     `json:"a"`
	Standby  nodeCell     `json:"sb"`
	State    string       `json:"s"`
	// Message is the first line of an ERROR's message, cut to
	// maxRowMessage: a row stays one row high, and the load balancer's
	// page shows the whole text (MessageCut says there is more).
	Message    string    `json:"m,omitempty"`
	MessageCut bool      `json:"mc,omitempty"`
	Members    int       `json:"mm"`
	Health     health    `json:"hl"`
	Pools      int       `json:"pp"`
	Problems   int       `json:"pr"`
	Created    time.Time `json:"c"`
	Age        string    `json:"-"`
}

type overviewPage struct {
	Title      string
	Filter     filter
	Namespaces []option
	Providers  []option
	States     []option
	Rows       []lbRow
	Total      int // every load balancer
	Matched    int // those the filter keeps
	Counts     map[string]int
	// ProblemIngresses counts Ingresses with problems, served or not.
	ProblemIngresses int
	IngressesKnown   bool
	// Gateways counts the Gateways of pier's classes; ProblemGatewayObjects
	// the Gateways and HTTPRoutes with problems.
	Gateways, ProblemGatewayObjects int
	Page, Pages                     int
	Prev, Next                      string
}

func (p *overviewPage) etagSource() any {
	return struct {
		F         filter
		R         []lbRow
		T, M, P   int
		G, GP     int
		C         map[string]int
		N, Pr, St []option
	}{p.Filter, p.Rows, p.Total, p.Matched, p.ProblemIngresses, p.Gateways, p.ProblemGatewayObjects, p.Counts, p.Namespaces, p.Providers, p.States}
}

func (h *Handler) overview(w http.ResponseWriter, r *http.Request) {
	lbs, err := h.Store.List(r.Context())
	if err != nil {
		h.fail(w, r, err)
		return
	}
	ings := h.ingresses()
	gws, routes := h.gatewayStates()
	size := h.PageSize
	if size <= 0 {
		size = DefaultPageSize
	}
	p := buildOverview(lbs, ings, problemsBySource(ings, gws, routes), parseFilter(r.URL.Query()), size, h.now())
	p.Gateways, p.ProblemGatewayObjects = len(gws), problemObjects(gws, routes)
	h.page(w, r, http.StatusOK, "overview", p)
}

func (h *Handler) ingresses() []IngressInfo {
	if h.Ingresses == nil {
		return nil
	}
	return h.Ingresses.Ingresses()
}

// problemsBySource maps a load balancer source, "Kind/namespace/name",
// to its problems: an Ingress's own; a Gateway's own and those of the
// HTTPRoutes with a parent entry for it (their rules are its policies).
func problemsBySource(ings []IngressInfo, gws []GatewayInfo, routes []RouteInfo) map[model.ObjectRef][]model.Problem {
	out := make(map[model.ObjectRef][]model.Problem, len(ings)+len(gws))
	for _, in := range ings {
		if len(in.Problems) > 0 {
			out[model.IngressRef(in.Ingress.Namespace, in.Ingress.Name)] = in.Problems
		}
	}
	for _, g := range gws {
		if len(g.Problems) > 0 {
			k := gatewayRef(g.Gateway.Namespace, g.Gateway.Name)
			out[k] = append(out[k], g.Problems...)
		}
	}
	for _, rt := range routes {
		if len(rt.Problems) == 0 {
			continue
		}
		seen := map[model.ObjectRef]bool{}
		for _, ps := range rt.Parents {
			ns := rt.Meta.Namespace
			if ps.ParentRef.Namespace != nil {
				ns = string(*ps.ParentRef.Namespace)
			}
			k := gatewayRef(ns, string(ps.ParentRef.Name))
			if !seen[k] {
				seen[k] = true
				out[k] = append(out[k], rt.Problems...)
			}
		}
	}
	return out
}

func gatewayRef(namespace, name string) model.ObjectRef {
	return model.ObjectRef{Kind: model.KindGateway, Namespace: namespace, Name: name}
}

// problemObjects counts the Gateway API objects with problems.
func problemObjects(gws []GatewayInfo, routes []RouteInfo) int {
	n := 0
	for _, g := range gws {
		if len(g.Problems) > 0 {
			n++
		}
	}
	for _, rt := range routes {
		if len(rt.Problems) > 0 {
			n++
		}
	}
	return n
}

func buildOverview(lbs []*model.LoadBalancer, ings []IngressInfo, problems map[model.ObjectRef][]model.Problem, f filter, pageSize int, now time.Time) *overviewPage {
	withProblems := 0
	for _, in := range ings {
		if len(in.Problems) > 0 {
			withProblems++
		}
	}
	p := &overviewPage{Title: "Load balancers", Filter: f, Total: len(lbs), Counts: map[string]int{},
		ProblemIngresses: withProblems, IngressesKnown: ings != nil}
	namespaces, providers := map[string]bool{}, map[string]bool{}
	states := map[string]bool{string(model.StateActive): true, stateUpdating: true,
		string(model.StatePending): true, string(model.StateError): true}
	var matched []*model.LoadBalancer
	for _, lb := range lbs {
		state := displayState(lb)
		p.Counts[state]++
		providers[string(lb.Provider)] = true
		inNS := f.Namespace == ""
		for _, s := range lb.Sources {
			namespaces[s.Namespace] = true
			inNS = inNS || s.Namespace == f.Namespace
		}
		if inNS && (f.Provider == "" || string(lb.Provider) == f.Provider) && (f.State == "" || state == f.State) {
			matched = append(matched, lb)
		}
	}
	p.Namespaces, p.Providers, p.States = options(namespaces, f.Namespace), options(providers, f.Provider), options(states, f.State)
	sort.SliceStable(matched, func(i, j int) bool { return matched[i].Name < matched[j].Name })
	p.Matched = len(matched)
	p.Pages = (len(matched) + pageSize - 1) / pageSize
	if p.Pages == 0 {
		p.Pages = 1
	}
	p.Page = min(f.Page, p.Pages)
	if p.Page > 1 {
		p.Prev = f.query(p.Page - 1)
	}
	if p.Page < p.Pages {
		p.Next = f.query(p.Page + 1)
	}
	from := (p.Page - 1) * pageSize
	for _, lb := range matched[from:min(from+pageSize, len(matched))] {
		p.Rows = append(p.Rows, buildRow(lb, problems, now))
	}
	return p
}

func buildRow(lb *model.LoadBalancer, problems map[model.ObjectRef][]model.Problem, now time.Time) lbRow {
	row := lbRow{Href: lbHref(lb.UUID), Name: Clean(lb.Name), Sources: sourceLinks(lb.Sources),
		Provider: Clean(string(lb.Provider)), VIP: Clean(lb.VIP), FIP: Clean(lb.FIP),
		Active: placedNode(lb, lb.Placement.Active), Standby: placedNode(lb, lb.Placement.Standby),
		State: displayState(lb), Pools: len(lb.Pools), Created: lb.CreatedAt, Age: Age(now.Sub(lb.CreatedAt))}
	if lb.Status.State == model.StateError {
		row.Message, row.MessageCut = shortMessage(Clean(lb.Status.Message))
	}
	for _, pool := range lb.Pools {
		row.Members += len(pool.Members)
	}
	row.Health = healthOf(lb, row.Members)
	for _, s := range lb.Sources {
		row.Problems += len(problems[s.Ref()])
	}
	return row
}

// maxRowMessage bounds the message a row shows, in runes: an HAProxy
// refusal is kilobytes over many lines.
const maxRowMessage = 120

// shortMessage is the first line of s, cut to maxRowMessage runes on a
// word where it can be; cut says something was left out.
func shortMessage(s string) (short string, cut bool) {
	line, rest, more := strings.Cut(strings.TrimSpace(s), "\n")
	line = strings.TrimSpace(line)
	if r := []rune(line); len(r) > maxRowMessage {
		line = string(r[:maxRowMessage])
		if i := strings.LastIndexByte(line, ' '); i > maxRowMessage/2 {
			line = line[:i]
		}
		return line + " …", true
	}
	if more && strings.TrimSpace(rest) != "" {
		return line + " …", true
	}
	return line, false
}

// Age formats like kubectl (45s, 12m, 5h, 3d); static/app.js has the same
// rules for the ages it refreshes.
func Age(d time.Duration) string {
	switch {
	case d < 0:
		return "0s"
	case d < 2*time.Minute:
		return strconv.Itoa(int(d.Seconds())) + "s"
	case d < 2*time.Hour:
		return strconv.Itoa(int(d.Minutes())) + "m"
	case d < 48*time.Hour:
		return strconv.Itoa(int(d.Hours())) + "h"
	}
	return strconv.Itoa(int(d.Hours()/24)) + "d"
}
