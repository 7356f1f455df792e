package api

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"pier.dev/pier/internal/model"
)

// TestPrintErrors: pier get errors lists every node's recent 5xx kinds
// newest first, one line each whatever a path holds (a tab, a newline, a
// terminal escape are percent-encoded), and pier get loadbalancers gives
// the serving node's newest in LAST-5XX.
func TestPrintErrors(t *testing.T) {
	now := time.Date(2026, 12, 2, 3, 15, 0, 0, time.UTC)
	lb := &model.LoadBalancer{Name: "shop/web", Provider: model.ProviderHAProxy, CreatedAt: now.Add(-time.Hour),
		Placement: model.Placement{Active: "n1", Standby: "n2"}}
	lb.Status.Nodes = []model.NodeStatus{
		{Node: "n1", RecentErrors: []model.RequestError{
			{First: now.Add(-20 * time.Minute), Last: now.Add(-3 * time.Minute), Count: 4213, Status: 502, Method: "GET", Host: "web.example",
				Path: "/cart\t\n\x1b[2Jx", Namespace: "shop", Route: "web", RouteKind: "Ingress", Service: "echo", ServicePort: "80",
				Member: "10.1.0.5:8080", Pod: "echo-7f9", TerminationState: "SH--", RequestID: "eac14d8a"},
			{First: now.Add(-time.Minute), Last: now.Add(-time.Minute), Count: 1, Status: 503, TerminationState: "SC--"}}},
		{Node: "n2", RecentErrors: []model.RequestError{{First: now.Add(-time.Hour), Last: now.Add(-50 * time.Minute), Count: 2, Status: 504}}},
	}
	var b bytes.Buffer
	if err := PrintErrors(&b, RecentErrors([]*model.LoadBalancer{lb}), now); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(lines) != 4 {
		t.Fatalf("%d lines, want a header and 3:\n%s", len(lines), b.String())
	}
	for i, want := range [][]string{
		{"LOADBALANCER", "LAST", "STATUS", "END", "COUNT", "SINCE", "REQUEST", "ROUTE", "SERVICE", "MEMBER", "POD", "NODE", "REQUEST-ID"},
		{"shop/web", "60s", "503", "SC--", "1", "60s", "-", "-", "-", "-", "-", "n1", "-"},
		{"shop/web", "3m", "502", "SH--", "4213", "20m", "GET", "web.example/cart%09%0A%1B[2Jx", "Ingress/shop/web", "echo:80", "10.1.0.5:8080", "echo-7f9", "n1", "eac14d8a"},
		{"shop/web", "50m", "504", "-", "2", "60m", "-", "-", "-", "-", "-", "n2", "-"},
	} {
		if got := strings.Fields(lines[i]); strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("line %d:\ngot  %q\nwant %q", i, got, want)
		}
	}
	b.Reset()
	if err := PrintTable(&b, []*model.LoadBalancer{lb}, now); err != nil {
		t.Fatal(err)
	}
	rows := strings.Split(b.String(), "\n")
	if !strings.Contains(rows[0], "5XX   LAST-5XX   AGE") || !strings.Contains(rows[1], " 503 60s ") {
		t.Errorf("load balancers:\n%s", b.String())
	}
}
