package accesslog

import (
	"net/netip"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"pier.dev/pier/internal/haproxy/render"
	"pier.dev/pier/internal/metrics"
	"pier.dev/pier/internal/model"
)

// lbInfo is what the reader knows of one load balancer: its names, and
// the metrics of each pool ready to be counted (a label lookup per line
// would cost more than the rest of the line).
type lbInfo struct {
	uuid string
	name string
	plan render.AccessLogPlan
	// route is who a request answered by HAProxy itself belongs to (a
	// 404, a redirect, a refusal): the load balancer's Ingress when it
	// has one, else nobody.
	route route
	pools map[string]*route // by pool id
	// seen counts the lines received, for the agent's sampling.
	seen *atomic.Uint64
	// errors are the recent 5xx kinds (errors.go); like seen, kept
	// when the load balancer is set again.
	errors *errorRing
}

// route is where a line's request went, and its metrics.
type route struct {
	namespace, ingress, kind, service, port string
	// members names each member's pod, by address and port.
	members           map[netip.AddrPort]string
	labels            []string
	requests          [statusClasses]prometheus.Counter
	seconds, upstream prometheus.Observer
	sent, received    prometheus.Counter
}

// statusClasses are 1xx to 5xx and "none" (no status: the client left).
const statusClasses = 6

var classNames = [statusClasses]string{"none", "1xx", "2xx", "3xx", "4xx", "5xx"}

func classOf(status int) int {
	if status >= 100 && status < 600 {
		return status / 100
	}
	return 0
}

func newRoute(m *metrics.Metrics, namespace, ingress, kind, service, port string) *route {
	r := &route{namespace: namespace, ingress: ingress, kind: kind, service: service, port: port,
		labels: []string{namespace, ingress, service}}
	if m == nil {
		return r
	}
	for i, c := range classNames {
		r.requests[i] = m.Requests.WithLabelValues(namespace, ingress, service, c)
	}
	r.seconds = m.RequestSeconds.WithLabelValues(r.labels...)
	r.upstream = m.UpstreamSeconds.WithLabelValues(r.labels...)
	r.sent = m.ResponseBytes.WithLabelValues(r.labels...)
	r.received = m.RequestBytes.WithLabelValues(r.labels...)
	return r
}

// deleteMetrics removes the route's series, so a load balancer that
// went away leaves no frozen series behind.
func (r *route) deleteMetrics(m *metrics.Metrics) {
	if m == nil || r.requests[0] == nil {
		return
	}
	for _, c := range classNames {
		m.Requests.DeleteLabelValues(r.namespace, r.ingress, r.service, c)
	}
	m.RequestSeconds.DeleteLabelValues(r.labels...)
	m.UpstreamSeconds.DeleteLabelValues(r.labels...)
	m.ResponseBytes.DeleteLabelValues(r.labels...)
	m.RequestBytes.DeleteLabelValues(r.labels...)
}

// infoOf reads lb. A pool's Ingress is the one whose rules route to it;
// when several Ingresses of a group route to one Service port their
// names are joined by ",", sorted (their requests cannot be told apart:
// HAProxy knows the backend, not which rule chose it). A pool no rule
// names (a default backend, a canary) belongs to the load balancer's
// only Ingress, or to none in a group.
func infoOf(lb *model.LoadBalancer, o render.AccessLogOptions, m *metrics.Metrics, seen *atomic.Uint64) *lbInfo {
	info := &lbInfo{uuid: lb.UUID, name: lb.Name, plan: render.PlanAccessLog(lb, o),
		pools: map[string]*route{}, seen: seen}
	var only model.Source
	if len(lb.Sources) == 1 {
		only = lb.Sources[0]
	}
	users := map[string]map[model.Source]bool{}
	for _, l := range lb.Listeners {
		for _, p := range l.Policies {
			if p.PoolID == "" || p.Source.Name == "" {
				continue
			}
			if users[p.PoolID] == nil {
				users[p.PoolID] = map[model.Source]bool{}
			}
			users[p.PoolID][p.Source] = true
		}
	}
	info.route = *newRoute(m, only.Namespace, only.Name, only.Kind, "", "")
	for _, p := range lb.Pools {
		src := only
		if u := users[p.ID]; len(u) > 0 {
			src = joined(u)
		}
		r := newRoute(m, p.Namespace, src.Name, src.Kind, p.Service, p.Port)
		for _, mb := range p.Members {
			if a, err := netip.ParseAddr(mb.Address); err == nil && mb.Target != "" {
				if r.members == nil {
					r.members = map[netip.AddrPort]string{}
				}
				r.members[netip.AddrPortFrom(a, uint16(mb.Port))] = mb.Target
			}
		}
		info.pools[p.ID] = r
	}
	return info
}

// joined is one source naming all of u, in name order.
func joined(u map[model.Source]bool) model.Source {
	var names []string
	var one model.Source
	for s := range u {
		names = append(names, s.Name)
		one = s
	}
	if len(names) == 1 {
		return one
	}
	sort.Strings(names)
	return model.Source{Kind: one.Kind, Namespace: one.Namespace, Name: strings.Join(names, ",")}
}

// routes is every route of info, for deleteMetrics.
func (info *lbInfo) routes() []*route {
	out := []*route{&info.route}
	for _, r := range info.pools {
		out = append(out, r)
	}
	return out
}

// routeOf is the route of a line's backend.
func (info *lbInfo) routeOf(backend string) *route {
	if id, ok := render.PoolOf(info.uuid, backend); ok {
		if r := info.pools[id]; r != nil {
			return r
		}
	}
	return &info.route
}

// pod names the member at addr:port, or "".
func (r *route) pod(addr, port string) string {
	if r.members == nil {
		return ""
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		return ""
	}
	a, err := netip.ParseAddr(addr)
	if err != nil {
		return ""
	}
	return r.members[netip.AddrPortFrom(a, uint16(p))]
}
