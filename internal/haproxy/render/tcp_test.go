package render

import (
	"strings"
	"testing"

	"pier.dev/pier/internal/model"
)

// tcpFixture: a Gateway with an HTTP listener, a TCP listener whose
// TCPRoute splits connections between two Services with a quarter
// refused (a backendRef that does not resolve), and a TCP listener
// without a route, which refuses every connection.
func tcpFixture(web1, web2 model.Pool) *model.LoadBalancer {
	db := model.Pool{ID: model.ID("tcp", "gateway-split", "db"), Name: "ns_split_db_tcp", Namespace: "ns",
		Service: "db-a+db-b", Port: "5432+5432", Algorithm: model.AlgorithmRoundRobin, HealthCheck: true, TCP: true,
		FailWeight: 1, FailTotal: 4,
		Members: []model.Member{{Address: "10.47.255.240", Port: 5432, Weight: 256}, {Address: "10.47.255.241", Port: 5432, Weight: 128}}}
	return newLB([]model.Listener{
		httpListener("", routes(toPool(web1, hostIs("web.example"), pathPrefix("/")))),
		{Name: "tcp-5432", Protocol: model.ProtocolTCP, Port: 5432, DefaultPoolID: db.ID},
		{Name: "tcp-6379", Protocol: model.ProtocolTCP, Port: 6379},
	}, web1, web2, db)
}

func TestTCPListenerShape(t *testing.T) {
	web1 := pool("webservice-1", member("10.47.255.238", 80))
	web2 := pool("webservice-2", member("10.47.255.236", 80))
	r := mustRender(t, tcpFixture(web1, web2), nil)
	cfg := string(r.Fragment)
	for _, want := range []string{
		"frontend fe_" + fixtureUUID + "_5432 from pier_tcp\n    mode tcp\n    bind 10.96.0.10:5432 transparent\n    bind 203.0.113.10:5432 transparent\n    default_backend be_",
		"frontend fe_" + fixtureUUID + "_6379 from pier_tcp\n    mode tcp\n    bind 10.96.0.10:6379 transparent\n    bind 203.0.113.10:6379 transparent\n    tcp-request connection reject\n",
		"tcp-request content reject if { rand(4) -m int lt 1 }",
	} {
		if !strings.Contains(cfg, want) {
			t.Errorf("fragment lacks %q:\n%s", want, cfg)
		}
	}
	// Only the HTTP listener's frontend counts requests.
	if names := r.FrontendNames(); len(names) != 1 || !strings.HasSuffix(names[0], "_80") {
		t.Errorf("frontends read for requests: %v", names)
	}
	if reason := Landable(r, LandingOptions{Port: 80, Backends: 10, Slots: 8}); reason == "" {
		t.Error("a load balancer with TCP listeners landed on the HTTP landing")
	}
}

// TestTCPListenerRefused: what a TCP listener cannot carry is refused,
// never rendered.
func TestTCPListenerRefused(t *testing.T) {
	web1 := pool("webservice-1", member("10.47.255.238", 80))
	tcpPool := web1
	tcpPool.ID, tcpPool.TCP = model.ID("tcp", web1.ID), true
	for _, tc := range []struct {
		name string
		l    model.Listener
		want string
	}{
		{"http pool", model.Listener{Name: "tcp-9000", Protocol: model.ProtocolTCP, Port: 9000, DefaultPoolID: web1.ID}, "not a TCP pool"},
		{"policies", model.Listener{Name: "tcp-9000", Protocol: model.ProtocolTCP, Port: 9000, DefaultPoolID: tcpPool.ID,
			Policies: routes(toPool(tcpPool, pathPrefix("/")))}, "no policies"},
		{"certificates", model.Listener{Name: "tcp-9000", Protocol: model.ProtocolTCP, Port: 9000,
			Certificates: []model.Certificate{{ID: "c", Namespace: "ns", Secret: "s", SHA256: "aa"}}}, "no certificates"},
		{"missing pool", model.Listener{Name: "tcp-9000", Protocol: model.ProtocolTCP, Port: 9000, DefaultPoolID: "nope"}, "does not exist"},
		{"evil port", model.Listener{Name: "tcp-9000", Protocol: model.ProtocolTCP, Port: 70000}, "port"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lb := newLB([]model.Listener{tc.l}, web1, tcpPool)
			_, err := Render(lb, fixtureAt, nil, fixtureOptions())
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
	// An HTTP listener does not send requests to a TCP pool either.
	lb := newLB([]model.Listener{httpListener(tcpPool.ID, nil)}, tcpPool)
	if _, err := Render(lb, fixtureAt, nil, fixtureOptions()); err == nil {
		t.Fatal("an HTTP listener's default pool is a TCP pool, and it rendered")
	}
}
