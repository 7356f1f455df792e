package web

import (
	"net/http"
	"sort"
	"strconv"
	"time"

	networkingv1 "k8s.io/api/networking/v1"

	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/store"
)

// maxAnnotation bounds an annotation value on the page: values such as
// last-applied-configuration can be kilobytes of JSON.
const maxAnnotation = 300

type ingressRow struct {
	Href      string
	Namespace string
	Name      string
	Class     string
	Hosts     []string
	Addresses []string
	LBs       []ingressLB
	Problems  int
	Errors    int
	Created   time.Time
	Age       string `json:"-"`
}

type lbLink struct{ Href, Name string }

// ingressLB is a load balancer that serves an Ingress, with its state:
// an Ingress whose load balancer is in ERROR is not served as written,
// whatever its own problems say.
type ingressLB struct {
	lbLink
	State string
	// Message is the whole message on the Ingress's page; the list
	// shows only State.
	Message string
}

type ingressListPage struct {
	Title      string
	Known      bool
	Namespace  string
	Namespaces []option
	Rows       []ingressRow
}

func (p *ingressListPage) etagSource() any { return p }

type ingressPage struct {
	Title       string
	Row         ingressRow
	UID         string
	Annotations []keyValue
	Rules       []ingressRule
	TLS         []keyValue // secret name → hosts
	Policies    []ingressPolicy
	Problems    []problemView
	// Errors are the recent 5xx kinds of its routes, newest first.
	Errors []errorView
}

func (p *ingressPage) etagSource() any { return p }

type keyValue struct{ Key, Value string }

// ingressRule is one path of the spec (or the default backend), as the
// user wrote it.
type ingressRule struct {
	Host, Path, PathType, Backend string
}

// ingressPolicy is a policy the Ingress asked for, where it ended up.
type ingressPolicy struct {
	LB       lbLink
	Listener string
	Policy   policyView
}

func (h *Handler) ingressList(w http.ResponseWriter, r *http.Request) {
	lbs, err := h.Store.List(r.Context())
	if err != nil {
		h.fail(w, r, err)
		return
	}
	ns := r.URL.Query().Get("namespace")
	ings := h.ingresses()
	p := &ingressListPage{Title: "Ingresses", Known: ings != nil, Namespace: Clean(ns)}
	byIngress := lbsByIngress(lbs)
	namespaces := map[string]bool{}
	now := h.now()
	for _, in := range ings {
		namespaces[in.Ingress.Namespace] = true
		if ns == "" || in.Ingress.Namespace == ns {
			p.Rows = append(p.Rows, buildIngressRow(in, byIngress, now))
		}
	}
	p.Namespaces = options(namespaces, ns)
	sort.Slice(p.Rows, func(i, j int) bool {
		a, b := p.Rows[i], p.Rows[j]
		return a.Namespace < b.Namespace || a.Namespace == b.Namespace && a.Name < b.Name
	})
	h.page(w, r, http.StatusOK, "ingresses", p)
}

func lbsByIngress(lbs []*model.LoadBalancer) map[model.ObjectRef][]*model.LoadBalancer {
	out := map[model.ObjectRef][]*model.LoadBalancer{}
	for _, lb := range lbs {
		for _, s := range lb.Sources {
			if s.Kind == model.KindIngress {
				out[s.Ref()] = append(out[s.Ref()], lb)
			}
		}
	}
	return out
}

func buildIngressRow(in IngressInfo, byIngress map[model.ObjectRef][]*model.LoadBalancer, now time.Time) ingressRow {
	ing := in.Ingress
	row := ingressRow{Href: ingressHref(ing.Namespace, ing.Name), Namespace: Clean(ing.Namespace), Name: Clean(ing.Name),
		Problems: len(in.Problems), Created: ing.CreationTimestamp.Time, Age: Age(now.Sub(ing.CreationTimestamp.Time))}
	if ing.Spec.IngressClassName != nil {
		row.Class = Clean(*ing.Spec.IngressClassName)
	}
	seen := map[string]bool{}
	for _, rule := range ing.Spec.Rules {
		if !seen[rule.Host] {
			seen[rule.Host] = true
			row.Hosts = append(row.Hosts, Clean(rule.Host))
		}
	}
	for _, a := range ing.Status.LoadBalancer.Ingress {
		if a.IP != "" {
			row.Addresses = append(row.Addresses, Clean(a.IP))
		}
		if a.Hostname != "" {
			row.Addresses = append(row.Addresses, Clean(a.Hostname))
		}
	}
	for _, lb := range byIngress[model.IngressRef(ing.Namespace, ing.Name)] {
		l := ingressLB{lbLink: lbLink{Href: lbHref(lb.UUID), Name: Clean(lb.Name)}, State: displayState(lb)}
		if lb.Status.State == model.StateError {
			l.Message = Clean(lb.Status.Message)
		}
		row.LBs = append(row.LBs, l)
	}
	for _, p := range in.Problems {
		if p.Severity == model.SeverityError {
			row.Errors++
		}
	}
	return row
}

func (h *Handler) ingress(w http.ResponseWriter, r *http.Request) {
	ns, name := r.PathValue("namespace"), r.PathValue("name")
	var found *IngressInfo
	for _, in := range h.ingresses() {
		if in.Ingress.Namespace == ns && in.Ingress.Name == name {
			found = &in
			break
		}
	}
	if found == nil {
		h.notFound(w, r)
		return
	}
	lbs, err := store.ListBySource(r.Context(), h.Store, model.IngressRef(ns, name))
	if err != nil {
		h.fail(w, r, err)
		return
	}
	h.page(w, r, http.StatusOK, "ingress", buildIngress(*found, lbs, h.now()))
}

func buildIngress(in IngressInfo, lbs []*model.LoadBalancer, now time.Time) *ingressPage {
	ing := in.Ingress
	byIngress := lbsByIngress(lbs)
	p := &ingressPage{Title: Clean(ing.Namespace + "/" + ing.Name), Row: buildIngressRow(in, byIngress, now), UID: Clean(string(ing.UID))}
	keys := make([]string, 0, len(ing.Annotations))
	for k := range ing.Annotations {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := ing.Annotations[k]
		if len(v) > maxAnnotation {
			v = v[:maxAnnotation] + "… (" + strconv.Itoa(len(v)) + " bytes)"
		}
		p.Annotations = append(p.Annotations, keyValue{Key: Clean(k), Value: Clean(v)})
	}
	p.Rules = ingressRules(ing)
	for _, t := range ing.Spec.TLS {
		hosts := ""
		for i, host := range t.Hosts {
			if i > 0 {
				hosts += ", "
			}
			hosts += host
		}
		p.TLS = append(p.TLS, keyValue{Key: Clean(t.SecretName), Value: Clean(hosts)})
	}
	key := ing.Namespace + "/" + ing.Name // as a policy's source shows
	for _, lb := range byIngress[model.IngressRef(ing.Namespace, ing.Name)] {
		p.Errors = append(p.Errors, recentErrors(lb, now, errorsOf(model.KindIngress, ing.Namespace, ing.Name))...)
		page := buildLB(lb, nil, now)
		for _, l := range page.Listeners {
			for _, pol := range l.Policies {
				if pol.Source.Key == Clean(key) {
					p.Policies = append(p.Policies, ingressPolicy{LB: lbLink{Href: lbHref(lb.UUID), Name: Clean(lb.Name)},
						Listener: l.Name, Policy: pol})
				}
			}
		}
	}
	for _, pr := range in.Problems {
		p.Problems = append(p.Problems, buildProblem(pr))
	}
	sort.SliceStable(p.Errors, func(i, j int) bool { return p.Errors[i].Created.After(p.Errors[j].Created) })
	return p
}

func ingressRules(ing *networkingv1.Ingress) []ingressRule {
	var out []ingressRule
	if b := ing.Spec.DefaultBackend; b != nil {
		out = append(out, ingressRule{Host: "*", Path: "(default backend)", Backend: backendString(*b)})
	}
	for _, rule := range ing.Spec.Rules {
		if rule.HTTP == nil {
			continue
		}
		for _, path := range rule.HTTP.Paths {
			r := ingressRule{Host: Clean(rule.Host), Path: Clean(path.Path), Backend: backendString(path.Backend)}
			if r.Host == "" {
				r.Host = "*"
			}
			if path.PathType != nil {
				r.PathType = Clean(string(*path.PathType))
			}
			out = append(out, r)
		}
	}
	return out
}

func backendString(b networkingv1.IngressBackend) string {
	switch {
	case b.Service != nil && b.Service.Port.Name != "":
		return Clean(b.Service.Name + ":" + b.Service.Port.Name)
	case b.Service != nil:
		return Clean(b.Service.Name + ":" + strconv.Itoa(int(b.Service.Port.Number)))
	case b.Resource != nil:
		return Clean(b.Resource.Kind + "/" + b.Resource.Name)
	}
	return "(none)"
}
