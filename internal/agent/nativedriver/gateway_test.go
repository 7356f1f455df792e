package nativedriver

import (
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"pier.dev/pier/internal/agent/driver"
	"pier.dev/pier/internal/agent/splitdriver"
	"pier.dev/pier/internal/goldenfile"
	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/nft"
)

// TestGatewayUDPGolden: the UDP part of a Gateway (HTTP and TCP on 53 for
// HAProxy, UDP on 53 and 514 here) is the table's services on the
// Gateway's VIP and FIP for the UDP keys only, the listener without a
// route among the rejected ones: HAProxy keeps every TCP port.
func TestGatewayUDPGolden(t *testing.T) {
	lb := &model.LoadBalancer{
		UUID: "9a7d2c2e-0000-4000-8000-0000000000aa", Name: "gateway:demo/web", Provider: model.ProviderHAProxy,
		VIP: "10.97.0.1", FIP: "10.97.1.1",
		Listeners: []model.Listener{
			{Name: "http-8080", Protocol: model.ProtocolHTTP, Port: 8080, DefaultPoolID: "web"},
			{Name: "tcp-53", Protocol: model.ProtocolTCP, Port: 53, DefaultPoolID: "dns-tcp"},
			{Name: "udp-53", Protocol: model.ProtocolUDP, Port: 53, DefaultPoolID: "dns-udp"},
			{Name: "udp-514", Protocol: model.ProtocolUDP, Port: 514},
		},
		Pools: []model.Pool{
			{ID: "dns-tcp", TCP: true, Members: []model.Member{{Address: "10.1.0.1", Port: 53}}},
			{ID: "dns-udp", Members: []model.Member{{Address: "10.1.0.1", Port: 5353}, {Address: "10.1.0.2", Port: 5353}}},
			{ID: "web", Members: []model.Member{{Address: "10.1.0.3", Port: 80}}},
		},
	}
	_, part := splitdriver.Parts(lb)
	svcs, err := services(part)
	if err != nil {
		t.Fatal(err)
	}
	got, _, err := nft.Render(nil, svcs)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(got), "tcp . 53") || strings.Contains(string(got), "8080") {
		t.Fatalf("the UDP part takes a TCP port:\n%s", got)
	}
	goldenfile.Check(t, filepath.Join("testdata", "gateway-udp.nft"), got, "go test ./internal/agent/nativedriver -run TestGatewayUDPGolden")
}

// TestGatewayUDPWeightedGolden: a UDP listener whose UDPRoute splits
// 70/30/0 over Services (one pool, its members weighted by their
// Service's share: 35, 35 and 30) and another whose second Service has
// no endpoint (its 30 of 100 refused) are weighted services of the
// table.
func TestGatewayUDPWeightedGolden(t *testing.T) {
	lb := &model.LoadBalancer{
		UUID: "9a7d2c2e-0000-4000-8000-0000000000ab", Name: "gateway:demo/udp", Provider: model.ProviderHAProxy,
		VIP: "10.97.0.2", FIP: "10.97.1.2",
		Listeners: []model.Listener{
			{Name: "udp-8080", Protocol: model.ProtocolUDP, Port: 8080, DefaultPoolID: "split"},
			{Name: "udp-8081", Protocol: model.ProtocolUDP, Port: 8081, DefaultPoolID: "half"},
		},
		Pools: []model.Pool{
			{ID: "split", Members: []model.Member{{Address: "10.1.0.1", Port: 8080, Weight: 35},
				{Address: "10.1.0.2", Port: 8080, Weight: 35}, {Address: "10.1.0.3", Port: 8080, Weight: 30}}},
			{ID: "half", FailWeight: 30, FailTotal: 100, Members: []model.Member{{Address: "10.1.0.1", Port: 8080, Weight: 70}}},
		},
	}
	_, part := splitdriver.Parts(lb)
	svcs, err := services(part)
	if err != nil {
		t.Fatal(err)
	}
	got, _, err := nft.Render(nil, svcs)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(got), "numgen random mod 20 map") || !strings.Contains(string(got), "numgen random mod 10 < 3 goto no_endpoints") {
		t.Fatalf("the weights or the refused share are not in the table:\n%s", got)
	}
	goldenfile.Check(t, filepath.Join("testdata", "gateway-udp-weighted.nft"), got, "go test ./internal/agent/nativedriver -run TestGatewayUDPWeightedGolden")

	for name, bad := range map[string]func(p *model.Pool){
		"fail share of its whole":  func(p *model.Pool) { p.FailWeight, p.FailTotal = 100, 100 },
		"fail share without total": func(p *model.Pool) { p.FailWeight, p.FailTotal = 1, 0 },
		"negative fail share":      func(p *model.Pool) { p.FailWeight, p.FailTotal = -1, 10 },
		"negative member weight":   func(p *model.Pool) { p.Members[0].Weight = -1 },
	} {
		lb := *part
		lb.Pools = []model.Pool{part.Pools[1]}
		lb.Pools[0].Members = slices.Clone(lb.Pools[0].Members)
		lb.Listeners = []model.Listener{part.Listeners[1]}
		bad(&lb.Pools[0])
		if _, err := services(&lb); !errors.Is(err, driver.ErrRejected) {
			t.Errorf("%s: %v, want a rejection", name, err)
		}
	}
}
