package nativedriver

import (
	"path/filepath"
	"strings"
	"testing"

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
