package api

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/pipeline"
)

type fakeGateways struct {
	gws    []pipeline.GatewayState
	routes []pipeline.HTTPRouteState
	all    []pipeline.RouteState
}

func (f fakeGateways) Gateways() []pipeline.GatewayState     { return f.gws }
func (f fakeGateways) HTTPRoutes() []pipeline.HTTPRouteState { return f.routes }
func (f fakeGateways) Routes() []pipeline.RouteState         { return f.all }

var created = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func gatewayFixture() fakeGateways {
	ip := gwv1.IPAddressType
	section := gwv1.SectionName("http")
	gw := &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "gw", CreationTimestamp: metav1.NewTime(created)},
		Spec: gwv1.GatewaySpec{GatewayClassName: "pier"},
		Status: gwv1.GatewayStatus{
			Addresses:  []gwv1.GatewayStatusAddress{{Type: &ip, Value: "10.0.0.1"}, {Type: &ip, Value: "192.0.2.1"}},
			Conditions: []metav1.Condition{{Type: "Accepted", Status: "True", Reason: "Accepted"}, {Type: "Programmed", Status: "True", Reason: "Programmed"}},
			Listeners:  []gwv1.ListenerStatus{{Name: "http", AttachedRoutes: 1}},
		}}
	refused := &gwv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "bad", CreationTimestamp: metav1.NewTime(created)}}
	refused.Spec.Hostnames = []gwv1.Hostname{"a.example.com", "b.example.com"}
	refused.Status.Parents = []gwv1.RouteParentStatus{{ParentRef: gwv1.ParentReference{Name: "gw", SectionName: &section},
		ControllerName: "pier.dev/gateway-controller",
		Conditions:     []metav1.Condition{{Type: "Accepted", Status: "False", Reason: "UnsupportedValue"}}}}
	tcp := pipeline.RouteState{Kind: model.KindTCPRoute, Meta: metav1.ObjectMeta{Namespace: "ns", Name: "db", CreationTimestamp: metav1.NewTime(created)},
		Parents: []gwv1.RouteParentStatus{{ParentRef: gwv1.ParentReference{Name: "gw"}, ControllerName: "pier.dev/gateway-controller",
			Conditions: []metav1.Condition{{Type: "Accepted", Status: "True", Reason: "Accepted"}}}}}
	return fakeGateways{
		all: []pipeline.RouteState{{Kind: model.KindHTTPRoute, Meta: refused.ObjectMeta, Hostnames: refused.Spec.Hostnames, Parents: refused.Status.Parents,
			Problems: []model.Problem{{Kind: model.KindHTTPRoute, Namespace: "ns", Name: "bad", Severity: model.SeverityError}}}, tcp},
		gws: []pipeline.GatewayState{{Gateway: gw, LoadBalancer: "uuid-1"}},
		routes: []pipeline.HTTPRouteState{{Route: refused, Problems: []model.Problem{{Kind: model.KindHTTPRoute, Namespace: "ns", Name: "bad",
			Severity: model.SeverityError, Reason: "UnsupportedValue", Message: "header value"}}}},
	}
}

func getBody(t *testing.T, srv *httptest.Server, path string, want int) []byte {
	t.Helper()
	resp, err := http.Get(srv.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		t.Fatalf("GET %s: %d, want %d: %s", path, resp.StatusCode, want, b)
	}
	return b
}

// The API serves Gateways and HTTPRoutes with the status pier computed,
// the load balancer and problems, as it serves Ingresses; a server
// without them (an agent's) answers 404.
func TestGatewayEndpoints(t *testing.T) {
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	srv := httptest.NewServer((&Server{Gateways: gatewayFixture(), Registry: prometheus.NewRegistry(), Logger: logger}).Handler())
	defer srv.Close()

	var gw GatewayResponse
	if err := json.Unmarshal(getBody(t, srv, "/gateways/ns/gw", 200), &gw); err != nil {
		t.Fatal(err)
	}
	if gw.LoadBalancer != "uuid-1" || len(gw.Status.Addresses) != 2 || gw.Status.Listeners[0].AttachedRoutes != 1 || gw.Problems == nil {
		t.Errorf("gateway: %+v", gw)
	}
	var plain gwv1.Gateway // the response is a Gateway to a client that knows no more
	if err := json.Unmarshal(getBody(t, srv, "/gateways/ns/gw", 200), &plain); err != nil || plain.Name != "gw" {
		t.Errorf("as a gwv1.Gateway: %v %+v", err, plain.ObjectMeta)
	}
	getBody(t, srv, "/gateways/ns/other", 404)
	var route HTTPRouteResponse
	if err := json.Unmarshal(getBody(t, srv, "/httproutes/ns/bad", 200), &route); err != nil {
		t.Fatal(err)
	}
	if len(route.Status.Parents) != 1 || route.Problems[0].Reason != "UnsupportedValue" {
		t.Errorf("route: %+v", route)
	}
	getBody(t, srv, "/httproutes/other/bad", 404)

	gws, err := ListGateways(context.Background(), strings.TrimPrefix(srv.URL, "http://"))
	if err != nil || len(gws) != 1 {
		t.Fatalf("ListGateways: %v %+v", err, gws)
	}
	routes, err := ListHTTPRoutes(context.Background(), strings.TrimPrefix(srv.URL, "http://"))
	if err != nil || len(routes) != 1 {
		t.Fatalf("ListHTTPRoutes: %v %+v", err, routes)
	}
	all, err := ListRoutes(context.Background(), strings.TrimPrefix(srv.URL, "http://"))
	if err != nil || len(all) != 2 || all[1].Kind != model.KindTCPRoute || all[1].Metadata.Name != "db" ||
		all[1].Parents[0].Conditions[0].Status != "True" || all[1].Problems == nil ||
		len(all[0].Hostnames) != 2 || all[1].Hostnames != nil || all[0].APIVersion != "gateway.networking.k8s.io/v1" {
		t.Fatalf("ListRoutes: %v %+v", err, all)
	}
	var table bytes.Buffer
	if err := PrintRoutes(&table, all, created.Add(time.Hour)); err != nil ||
		!strings.Contains(table.String(), "TCPRoute    ns          db     -                             ns/gw        True                     0") ||
		!strings.Contains(table.String(), "HTTPRoute   ns          bad    a.example.com,b.example.com   ns/gw/http   False/UnsupportedValue   1") {
		t.Errorf("routes table (%v):\n%s", err, table.String())
	}

	none := httptest.NewServer((&Server{Registry: prometheus.NewRegistry(), Logger: logger}).Handler())
	defer none.Close()
	getBody(t, none, "/gateways", 404)
	getBody(t, none, "/httproutes", 404)
	getBody(t, none, "/routes", 404)
	empty := httptest.NewServer((&Server{Gateways: fakeGateways{gws: []pipeline.GatewayState{}, routes: []pipeline.HTTPRouteState{}},
		Registry: prometheus.NewRegistry(), Logger: logger}).Handler())
	defer empty.Close()
	if b := getBody(t, empty, "/gateways", 200); !bytes.Contains(b, []byte(`"items": []`)) {
		t.Errorf("no Gateway: %s", b)
	}
}

// `pier get gateways` and `pier get httproutes` print kubectl's columns,
// a refused parent with its reason; `pier get loadbalancers` names the
// source kind.
func TestGatewayTables(t *testing.T) {
	f := gatewayFixture()
	var gws []GatewayResponse
	for _, g := range f.gws {
		gws = append(gws, gatewayResponse(g))
	}
	var b bytes.Buffer
	now := created.Add(3 * time.Hour)
	if err := PrintGateways(&b, gws, now); err != nil {
		t.Fatal(err)
	}
	want := "NAMESPACE   NAME   CLASS   ADDRESSES            PROGRAMMED   LOADBALANCER   AGE\n" +
		"ns          gw     pier    10.0.0.1,192.0.2.1   True         uuid-1         3h\n"
	if b.String() != want {
		t.Errorf("gateways:\n%s\nwant:\n%s", b.String(), want)
	}
	b.Reset()
	if err := PrintHTTPRoutes(&b, []HTTPRouteResponse{routeResponse(f.routes[0])}, now); err != nil {
		t.Fatal(err)
	}
	want = "NAMESPACE   NAME   HOSTNAMES                     PARENTS      ACCEPTED                 AGE\n" +
		"ns          bad    a.example.com,b.example.com   ns/gw/http   False/UnsupportedValue   3h\n"
	if b.String() != want {
		t.Errorf("routes:\n%s\nwant:\n%s", b.String(), want)
	}
	b.Reset()
	lb := &model.LoadBalancer{Name: "gw", Provider: "haproxy", CreatedAt: created,
		Sources: []model.Source{{Kind: model.KindGateway, Namespace: "ns", Name: "gw"}}}
	if err := PrintTable(&b, []*model.LoadBalancer{lb}, now); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "SOURCE") || !strings.Contains(b.String(), "Gateway/ns/gw") {
		t.Errorf("load balancers:\n%s", b.String())
	}
	b.Reset()
	lb.Placement.Active = "n1"
	lb.Status = model.Status{Nodes: []model.NodeStatus{{Node: "n1", MembersUp: 1, Members: 2, RequestsPerSecond: 35, ErrorShare: 0.046}}}
	if err := PrintTable(&b, []*model.LoadBalancer{lb}, now); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(b.String(), "\n")
	if f := strings.Fields(lines[0]); !slices.Equal(f[8:11], []string{"MEMBERS", "REQ/S", "5XX"}) {
		t.Errorf("header %q", lines[0])
	}
	if f := strings.Fields(lines[1]); !slices.Equal(f[8:11], []string{"1/2", "35", "4.6%"}) {
		t.Errorf("row %q, want members 1/2, 35 req/s, 4.6%% 5xx", lines[1])
	}
}
