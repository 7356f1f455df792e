package web

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"pier.dev/pier/internal/model"
)

// TestLastErrors: the load balancer's page lists every node's recent 5xx
// kinds newest first, with the route (a link to its Ingress), the member
// or none, the termination state, the count and since when; an
// Ingress's page lists those of its routes only, a group's shared pool
// included; a load balancer without any says so.
func TestLastErrors(t *testing.T) {
	l := lb("u1", "demo", "shop", 1)
	l.Sources = append(l.Sources, model.Source{Kind: "Ingress", Namespace: "demo", Name: "blog"})
	f := newFixture(t, fakeIngresses{{Ingress: ingress("demo", "shop", nil, "shop.example")}, {Ingress: ingress("demo", "blog", nil, "blog.example")}},
		l, lb("u2", "demo", "quiet", 1))
	shop := model.RequestError{First: now.Add(-26 * time.Hour), Last: now.Add(-3 * time.Minute), Count: 4213, Status: 502, Method: "GET",
		Host: "shop.example", Path: "/cart", Namespace: "demo", Route: "shop", RouteKind: "Ingress", Service: "svc", ServicePort: "80",
		Member: "10.0.0.1:8080", Pod: "shop-pod", TerminationState: "SH--", RequestID: "eac14d8a-2460-4362-aef6-3e20e73e5348"}
	shared := model.RequestError{First: now.Add(-time.Minute), Last: now.Add(-time.Minute), Count: 1, Status: 503, Method: "POST",
		Host: "blog.example", Path: "/post", Namespace: "demo", Route: "blog,shop", RouteKind: "Ingress", Service: "web", ServicePort: "http",
		TerminationState: "SC--", RequestID: "r2"}
	blog := model.RequestError{First: now.Add(-10 * time.Second), Last: now.Add(-10 * time.Second), Count: 7, Status: 504, Namespace: "demo",
		Route: "blog", RouteKind: "Ingress", Service: "api", ServicePort: "80", Member: "10.0.0.9:80", TerminationState: "sH--"}
	for node, errs := range map[string][]model.RequestError{"node-a": {shared, shop}, "node-b": {blog}} {
		if err := f.store.PutNodeStatus(context.Background(), "u1", model.NodeStatus{Node: node, State: model.StateActive,
			UpdatedAt: now, RecentErrors: errs}); err != nil {
			t.Fatal(err)
		}
	}
	rowsOf := func(body string) []string {
		return regexp.MustCompile(`(?s)<tr class="error">.*?</tr>`).FindAllString(body, -1)
	}
	_, _, body := get(t, f.srv.URL+"/ui/lb/u1")
	got := rowsOf(body)
	if len(got) != 3 {
		t.Fatalf("%d error rows on the load balancer's page, want 3:\n%s", len(got), body)
	}
	for i, want := range [][]string{
		{">504<", "<code>sH--</code>", `<a href="/ui/ingress/demo/blog">demo/blog</a>`, "→ api:80", "10.0.0.9:80", "<td>node-b</td>", "10s</time> ago"},
		{">503<", "<code>SC--</code>", "demo/blog,shop", "→ web:http", "no member", "POST", "blog.example/post", "id <code>r2</code>", "<td>node-a</td>"},
		{">502<", "<code>SH--</code>", `<a href="/ui/ingress/demo/shop">demo/shop</a>`, "shop-pod", "4213", "since 2026-01-01 01:04:05",
			"2026-01-02 03:01:05", "shop.example/cart", "eac14d8a-2460-4362-aef6-3e20e73e5348"},
	} {
		mustContain(t, "row "+string(rune('0'+i)), got[i], want...)
	}
	if strings.Contains(got[1], `href="/ui/ingress/demo/blog,shop"`) {
		t.Error("a shared pool's joined names link to no Ingress")
	}

	_, _, body = get(t, f.srv.URL+"/ui/ingress/demo/shop")
	got = rowsOf(body)
	if len(got) != 2 || !strings.Contains(got[0], ">503<") || !strings.Contains(got[1], ">502<") {
		t.Errorf("shop's page: %d rows, want the shared 503 then its 502:\n%q", len(got), got)
	}
	_, _, body = get(t, f.srv.URL+"/ui/ingress/demo/blog")
	if got = rowsOf(body); len(got) != 2 || !strings.Contains(got[0], ">504<") || !strings.Contains(got[1], ">503<") {
		t.Errorf("blog's page: %d rows, want its 504 then the shared 503:\n%q", len(got), got)
	}
	_, _, body = get(t, f.srv.URL+"/ui/lb/u2")
	mustContain(t, "quiet", body, `id="no-errors"`, "No 5xx answer seen since the serving agent started")
}

// TestLastErrorsOfAnHTTPRoute: an HTTPRoute's page lists the errors of
// its rules on the Gateway's load balancer, not another route's.
func TestLastErrorsOfAnHTTPRoute(t *testing.T) {
	f := newFixture(t, fakeIngresses{}, gatewayLB("u1", "demo", "gw"))
	f.h.Gateways = gatewayFixture("demo", "gw", "http", "u1", "v")
	mine := model.RequestError{First: now.Add(-time.Minute), Last: now.Add(-time.Minute), Count: 5, Status: 504, Namespace: "demo",
		Route: "web", RouteKind: model.KindHTTPRoute, Service: "web", ServicePort: "80", Member: "10.0.0.1:8080", TerminationState: "sH--"}
	other := mine
	other.Route, other.Status = "bad", 502
	if err := f.store.PutNodeStatus(context.Background(), "u1", model.NodeStatus{Node: "node-a", State: model.StateActive,
		UpdatedAt: now, RecentErrors: []model.RequestError{mine, other}}); err != nil {
		t.Fatal(err)
	}
	_, _, body := get(t, f.srv.URL+"/ui/httproute/demo/web")
	rows := regexp.MustCompile(`(?s)<tr class="error">.*?</tr>`).FindAllString(body, -1)
	if len(rows) != 1 || !strings.Contains(rows[0], ">504<") || !strings.Contains(rows[0], `<a href="/ui/httproute/demo/web">demo/web</a>`) {
		t.Errorf("route page: %q, want its 504 only", rows)
	}
	_, _, body = get(t, f.srv.URL+"/ui/httproute/demo/bad")
	mustContain(t, "the other route", body, `id="no-errors"`)
}
