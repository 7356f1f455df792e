package api

import (
	"fmt"
	"io"
	"sort"
	"strconv"
	"text/tabwriter"
	"time"

	"pier.dev/pier/internal/model"
)

// ErrorRow is one kind of 5xx answer one node reports for a load
// balancer (pier get errors): the report's model.RequestError with the
// load balancer and the node.
type ErrorRow struct {
	LoadBalancer string `json:"loadBalancer"`
	Node         string `json:"node"`
	model.RequestError
}

// RecentErrors lists the recent 5xx kinds of every node's report of lbs,
// newest first, each bounded again: a report is what an agent (or
// anyone allowed to write the status) wrote, and a terminal obeys the
// escape sequences a raw path could carry.
func RecentErrors(lbs []*model.LoadBalancer) []ErrorRow {
	out := []ErrorRow{}
	for _, lb := range lbs {
		for _, r := range lb.Status.Nodes {
			for _, e := range r.RecentErrors[:min(len(r.RecentErrors), model.MaxRecentErrors)] {
				out = append(out, ErrorRow{LoadBalancer: model.Printable(lb.Name, model.MaxErrorRoute),
					Node: model.Printable(r.Node, model.MaxErrorName), RequestError: e.Bounded()})
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Last.After(out[j].Last) })
	return out
}

// errorsOf are the recent 5xx kinds of route kind namespace/name in
// every node's report of lb, newest first; nil when none.
func errorsOf(lb *model.LoadBalancer, kind, namespace, name string) []model.RequestError {
	var out []model.RequestError
	for _, r := range lb.Status.Nodes {
		for _, e := range r.RecentErrors {
			if e.Of(kind, namespace, name) {
				out = append(out, e)
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Last.After(out[j].Last) })
	return out
}

// PrintErrors writes rows as kubectl-style columns: LOADBALANCER LAST
// STATUS END COUNT SINCE REQUEST ROUTE SERVICE MEMBER POD NODE
// REQUEST-ID. LAST and SINCE are ages (of the newest and the first
// request of the kind), END HAProxy's termination state.
func PrintErrors(w io.Writer, rows []ErrorRow, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 4, 3, ' ', 0)
	fmt.Fprintln(tw, "LOADBALANCER\tLAST\tSTATUS\tEND\tCOUNT\tSINCE\tREQUEST\tROUTE\tSERVICE\tMEMBER\tPOD\tNODE\tREQUEST-ID")
	for _, r := range rows {
		route, service := "-", "-"
		if r.Route != "" {
			route = r.RouteKind + "/" + r.Namespace + "/" + r.Route
		}
		if r.Service != "" {
			service = r.Service + ":" + r.ServicePort
		}
		request := r.Method + " " + r.Host + r.Path
		if r.Method == "" && r.Host == "" && r.Path == "" {
			request = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.LoadBalancer, age(now.Sub(r.Last)), r.Status,
			dash(r.TerminationState), r.Count, age(now.Sub(r.First)), request, route, service, dash(r.Member), dash(r.Pod),
			dash(r.Node), dash(r.RequestID))
	}
	return tw.Flush()
}

// lastError is the LAST-5XX cell of a load balancer's row: the status
// and age of the newest 5xx its serving node reports ("502 3m"), "-"
// without one.
func lastError(r model.NodeStatus, now time.Time) string {
	if len(r.RecentErrors) == 0 {
		return "-"
	}
	newest := r.RecentErrors[0]
	for _, e := range r.RecentErrors[1:] {
		if e.Last.After(newest.Last) {
			newest = e
		}
	}
	return strconv.Itoa(newest.Status) + " " + age(now.Sub(newest.Last))
}
