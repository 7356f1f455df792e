package web

import (
	"bytes"
	"strings"
	"testing"

	"pier.dev/pier/internal/haproxy/render"
	"pier.dev/pier/internal/model"
	"pier.dev/pier/test/harness"
)

func TestRedactPasswords(t *testing.T) {
	conf := "frontend fe\n    http-request auth realm 'x'\n\nuserlist ul_a\n    user 'alice' password '$2y$05$abc'\n    user 'bob' password '$6$salt$hash'\n"
	got := string(redactPasswords([]byte(conf)))
	if strings.Contains(got, "$2y$") || strings.Contains(got, "$6$") || !strings.Contains(got, "    user 'bob' password <redacted>\n") ||
		!strings.HasPrefix(got, "frontend fe\n    http-request auth realm 'x'\n") {
		t.Errorf("redacted:\n%s", got)
	}
}

// A Gateway's configuration page shows HAProxy's fragment without its UDP
// listeners and their pools, which nftables serves.
func TestConfigWithoutUDP(t *testing.T) {
	lb := &model.LoadBalancer{UUID: "9a7d2c2e-0000-4000-8000-0000000000ab", Name: "gateway:demo/web", Provider: model.ProviderHAProxy,
		VIP: "10.97.0.1",
		Listeners: []model.Listener{
			{Name: "http-8080", Protocol: model.ProtocolHTTP, Port: 8080, DefaultPoolID: "web"},
			{Name: "udp-53", Protocol: model.ProtocolUDP, Port: 53, DefaultPoolID: "dnsudp"},
		},
		Pools: []model.Pool{
			{ID: "web", Name: "demo_web_80", Members: []model.Member{{Address: "10.1.0.3", Port: 80}}},
			{ID: "dnsudp", Name: "demo_coredns_udp-53", Members: []model.Member{{Address: "10.1.0.1", Port: 5353}}},
		},
	}
	conf, err := ConfigFromSpec(harness.ShortTempDir(t), render.Options{})(lb)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(conf, []byte("8080")) || bytes.Contains(conf, []byte("5353")) || bytes.Contains(conf, []byte("udp")) {
		t.Fatalf("fragment:\n%s", conf)
	}
}
