package web

import (
	"sort"
	"strings"
	"time"

	"pier.dev/pier/internal/model"
)

// errorView is one kind of 5xx answer a node reports (model.RequestError),
// as the load balancer's and the Ingress's pages show it.
type errorView struct {
	Node string
	// Created is when the newest was accepted, for the "age" template.
	Created   time.Time
	Age       string `json:"-"`
	First     time.Time
	FirstText string // its time, with the date when not the newest's day
	Count     uint64
	Status    int
	Term      string
	Method    string
	Host      string
	Path      string
	// Route is the Ingress or HTTPRoute, a link when it names one;
	// Key empty: an answer of HAProxy's no route chose.
	Route     sourceLink
	Service   string // "name:port"
	Member    string
	Pod       string
	RequestID string
}

// recentErrors lists the recent 5xx kinds of every node's report of lb
// that keep accepts (nil: all), newest first, at most
// model.MaxRecentErrors: on a pair only the node that serves has any,
// and with ECMP the newest across the nodes is what an operator wants.
// Every string is bounded again and cleaned: a report is what an agent
// wrote, or anyone allowed to write the status.
func recentErrors(lb *model.LoadBalancer, now time.Time, keep func(model.RequestError) bool) []errorView {
	var out []errorView
	for _, r := range lb.Status.Nodes {
		for _, e := range r.RecentErrors {
			if keep != nil && !keep(e) {
				continue
			}
			out = append(out, errorViewOf(Clean(r.Node), e.Bounded(), now))
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Created.After(out[j].Created) })
	return out[:min(len(out), model.MaxRecentErrors)]
}

func errorViewOf(node string, e model.RequestError, now time.Time) errorView {
	v := errorView{Node: node, Created: e.Last, Age: Age(now.Sub(e.Last)), First: e.First, Count: e.Count, Status: e.Status,
		Term: Clean(e.TerminationState), Method: Clean(e.Method), Host: Clean(e.Host), Path: Clean(e.Path),
		Member: Clean(e.Member), Pod: Clean(e.Pod), RequestID: Clean(e.RequestID)}
	v.FirstText = e.First.UTC().Format("15:04:05")
	if y1, m1, d1 := e.First.UTC().Date(); e.First.IsZero() || y1 != e.Last.UTC().Year() || m1 != e.Last.UTC().Month() || d1 != e.Last.UTC().Day() {
		v.FirstText = e.First.UTC().Format("2006-01-02 15:04:05")
	}
	if e.Service != "" {
		v.Service = Clean(e.Service + ":" + e.ServicePort)
	}
	if e.Route != "" {
		v.Route = sourceLink{Kind: Clean(e.RouteKind), Key: Clean(e.Namespace + "/" + e.Route)}
		switch {
		case strings.Contains(e.Route, ","): // a group's Ingresses sharing the pool: no one page
		case e.RouteKind == model.KindIngress:
			v.Route.Href = ingressHref(e.Namespace, e.Route)
		case e.RouteKind == model.KindHTTPRoute:
			v.Route.Href = routeHref(e.Namespace, e.Route)
		}
	}
	return v
}

// errorsOf keeps the errors of one route: its namespace and name, one of
// the names when several Ingresses of a group share the pool.
func errorsOf(kind, namespace, name string) func(model.RequestError) bool {
	return func(e model.RequestError) bool { return e.Of(kind, namespace, name) }
}
