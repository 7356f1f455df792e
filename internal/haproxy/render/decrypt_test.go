package render

import (
	"testing"

	"pier.dev/pier/internal/model"
)

// decryptFixture is a Gateway's mixed termination on 443: an HTTPS
// listener for web.example, a TLS listener passing pt.example through,
// TLS listeners in tls.mode Terminate decrypting tls.example and
// *.apps.example to a TCP pool, and every other SNI refused.
func decryptFixture(web1, web2 model.Pool) *model.LoadBalancer {
	pt := web2
	pt.ID, pt.Name, pt.TCP = model.ID("tcp", "ns", "webservice-2", "443"), "ns_webservice-2_443_tcp", true
	https := model.Listener{Name: "terminated_https-443", Protocol: model.ProtocolTerminatedHTTPS, Port: 443,
		Certificates: []model.Certificate{{ID: model.ID("cert", "tls"), Namespace: "ns", Secret: "tls", Hosts: []string{"web.example"}, SHA256: "aa"}},
		DecryptCertificates: []model.Certificate{
			{ID: model.ID("cert", "decrypt"), Namespace: "ns", Secret: "decrypt", Hosts: []string{"tls.example"}, SHA256: "bb"},
			{ID: model.ID("cert", "apps"), Namespace: "ns", Secret: "apps", Hosts: []string{"*.apps.example"}, SHA256: "cc"},
		},
		Policies: routes(toPool(web1, hostIs("web.example"), pathPrefix("/"))),
		Passthrough: []model.PassthroughRoute{
			{Host: "pt.example", PoolID: pt.ID},
			{Host: "tls.example", PoolID: pt.ID, Decrypt: true},
			{Host: "*.apps.example", PoolID: pt.ID, Decrypt: true},
			{Host: "web.example", Terminate: true},
			{Host: ""},
		}}
	return newLB([]model.Listener{https}, web1, pt)
}

// What render refuses around decryption: a decrypted host goes to a TCP
// pool with a certificate to decrypt with, and decrypt certificates
// belong to a TLS listener.
func TestDecryptRefused(t *testing.T) {
	web1 := pool("webservice-1", member("10.47.255.238", 80))
	web2 := pool("webservice-2", member("10.47.255.236", 80))
	for name, edit := range map[string]func(lb *model.LoadBalancer){
		"to no pool":         func(lb *model.LoadBalancer) { lb.Listeners[0].Passthrough[1].PoolID = "" },
		"to an HTTP pool":    func(lb *model.LoadBalancer) { lb.Listeners[0].Passthrough[1].PoolID = web1.ID },
		"and terminated":     func(lb *model.LoadBalancer) { lb.Listeners[0].Passthrough[1].Terminate = true },
		"no certificates":    func(lb *model.LoadBalancer) { lb.Listeners[0].DecryptCertificates = nil },
		"bad certificate id": func(lb *model.LoadBalancer) { lb.Listeners[0].DecryptCertificates[0].ID = "../x" },
		"on a TCP listener": func(lb *model.LoadBalancer) {
			lb.Listeners = append(lb.Listeners, model.Listener{Name: "tcp", Protocol: model.ProtocolTCP, Port: 9000,
				DecryptCertificates: lb.Listeners[0].DecryptCertificates})
		},
		"on an HTTP listener": func(lb *model.LoadBalancer) {
			lb.Listeners = append(lb.Listeners, model.Listener{Name: "http", Protocol: model.ProtocolHTTP, Port: 80,
				DecryptCertificates: lb.Listeners[0].DecryptCertificates})
		},
	} {
		lb := decryptFixture(web1, web2)
		if _, err := Render(lb, lbAt(fixtureDir), nil, Options{Dir: fixtureDir}); err != nil {
			t.Fatalf("fixture: %v", err)
		}
		edit(lb)
		if _, err := Render(lb, lbAt(fixtureDir), nil, Options{Dir: fixtureDir}); err == nil {
			t.Errorf("%s: rendered", name)
		}
	}
}

// A decrypted host added, or a decrypt certificate changed, reloads.
func TestPlanDecryptReloads(t *testing.T) {
	web1 := pool("webservice-1", member("10.47.255.238", 80))
	web2 := pool("webservice-2", member("10.47.255.236", 80))
	old := decryptFixture(web1, web2)
	next := old.Clone()
	next.Listeners[0].Passthrough[0].Decrypt = true
	if p := mustPlan(t, old, next); !p.Reload {
		t.Errorf("decrypted: plan %+v", p)
	}
	next = old.Clone()
	next.Listeners[0].DecryptCertificates[0].SHA256 = "dd"
	if p := mustPlan(t, old, next); !p.Reload {
		t.Errorf("certificate: plan %+v", p)
	}
}
