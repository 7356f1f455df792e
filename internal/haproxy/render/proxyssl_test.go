package render

import (
	"bytes"
	"strings"
	"testing"

	"pier.dev/pier/internal/model"
)

const (
	caDigest     = "1111111111111111aaaaaaaaaaaaaaaa1111111111111111aaaaaaaaaaaaaaaa"
	clientDigest = "2222222222222222bbbbbbbbbbbbbbbb2222222222222222bbbbbbbbbbbbbbbb"
)

func upstreamFixture(proto model.BackendProtocol, u *model.UpstreamTLS) *model.LoadBalancer {
	lb := planFixture(member("10.0.0.1", 8443))
	lb.Pools[0].Protocol, lb.Pools[0].UpstreamTLS = proto, u
	return lb
}

// serverLines are the fragment's server lines of a used slot.
func serverLines(r *Result) string {
	var out []string
	for _, l := range bytes.Split(r.Fragment, []byte("\n")) {
		if bytes.HasPrefix(l, serverLine) && !bytes.Contains(l, []byte("disabled")) {
			out = append(out, strings.TrimSpace(string(l)))
		}
	}
	return strings.Join(out, "\n")
}

// The server words of proxy-ssl-*: verification with the staged CA and
// the name, SNI (health checks too), the staged client certificate; a
// user's name reaches the line only as a validated host.
func TestUpstreamTLSWords(t *testing.T) {
	dir := fixtureDir + "/certs/"
	for _, tc := range []struct {
		proto model.BackendProtocol
		u     *model.UpstreamTLS
		want  string
	}{
		{model.BackendHTTPS, &model.UpstreamTLS{Verify: true, SNI: true, Name: "api.internal", CASHA256: caDigest, ClientSHA256: clientDigest},
			"ssl verify required ca-file " + dir + "ca-1111111111111111.pem verifyhost 'api.internal' sni str(api.internal) check-sni 'api.internal' crt " + dir + "client-2222222222222222.pem"},
		{model.BackendGRPCS, &model.UpstreamTLS{Verify: true, Name: "web.ns.svc", CASHA256: caDigest},
			"ssl verify required ca-file " + dir + "ca-1111111111111111.pem verifyhost 'web.ns.svc' alpn h2"},
		{model.BackendHTTPS, &model.UpstreamTLS{SNI: true, Name: "api.internal"}, "ssl verify none sni str(api.internal) check-sni 'api.internal'"},
		{model.BackendHTTPS, &model.UpstreamTLS{ClientSHA256: clientDigest}, "ssl verify none crt " + dir + "client-2222222222222222.pem"},
		{model.BackendHTTPS, nil, "ssl verify none"},
		// A BackendTLSPolicy's one subjectAltName is checked, its hostname sent.
		{model.BackendHTTPS, &model.UpstreamTLS{Verify: true, SNI: true, Name: "abc.example.com", VerifyHost: "san.example.com", CASHA256: caDigest},
			"ssl verify required ca-file " + dir + "ca-1111111111111111.pem verifyhost 'san.example.com' sni str(abc.example.com) check-sni 'abc.example.com'"},
	} {
		r := mustRender(t, upstreamFixture(tc.proto, tc.u), nil)
		if got := serverLines(r); !strings.Contains(got, "weight 1 "+tc.want+" check") {
			t.Errorf("%+v:\n got %s\nwant ... %s check ...", tc.u, got, tc.want)
		}
	}
	for name, u := range map[string]*model.UpstreamTLS{
		"verify without CA":   {Verify: true, Name: "api.internal"},
		"verify without name": {Verify: true, CASHA256: caDigest},
		"name injection":      {SNI: true, Name: "api.internal) crt /etc/shadow"},
		"quote":               {Verify: true, Name: "a'b", CASHA256: caDigest},
		"digest":              {Verify: true, Name: "a.b", CASHA256: "../../etc"},
		"verifyhost":          {Verify: true, Name: "a.b", VerifyHost: "x y", CASHA256: caDigest},
	} {
		if _, err := Render(upstreamFixture(model.BackendHTTPS, u), lbAt(fixtureDir), nil, Options{Dir: fixtureDir}); err == nil {
			t.Errorf("%s: rendered", name)
		}
	}
	if _, err := Render(upstreamFixture("", &model.UpstreamTLS{SNI: true, Name: "a.b"}), lbAt(fixtureDir), nil, Options{Dir: fixtureDir}); err == nil {
		t.Error("upstream TLS on a plain HTTP pool rendered")
	}
}

// A change of proxy-ssl-* changes server words, which the skeleton
// leaves out: it must reload.
func TestPlanUpstreamTLSReloads(t *testing.T) {
	old := upstreamFixture(model.BackendHTTPS, &model.UpstreamTLS{Verify: true, Name: "a.internal", CASHA256: caDigest})
	rotated := upstreamFixture(model.BackendHTTPS, &model.UpstreamTLS{Verify: true, Name: "a.internal", CASHA256: clientDigest})
	if p := mustPlan(t, old, rotated); !p.Reload {
		t.Errorf("CA rotation: %+v", p)
	}
	if p := mustPlan(t, old, upstreamFixture(model.BackendHTTPS, nil)); !p.Reload {
		t.Errorf("verify off: %+v", p)
	}
}

// upstreamTLSFixture: proxy-ssl-* on an HTTPS pool (verified, SNI,
// client certificate) and a GRPCS pool (verified with the default name).
func upstreamTLSFixture(web1, web2 model.Pool) *model.LoadBalancer {
	web1.Protocol, web1.UpstreamTLS = model.BackendHTTPS, &model.UpstreamTLS{Verify: true, SNI: true, Name: "api.internal",
		Namespace: "ns", Secret: "upstream", CASHA256: caDigest, ClientSHA256: clientDigest}
	web2.Protocol, web2.UpstreamTLS = model.BackendGRPCS, &model.UpstreamTLS{Verify: true, Name: "webservice-2.ns.svc",
		Namespace: "ns", Secret: "upstream", CASHA256: caDigest}
	return newLB([]model.Listener{httpListener("", routes(
		toPool(web1, hostIs("api.example"), pathPrefix("/")), toPool(web2, hostIs("grpc.example"), pathPrefix("/"))))}, web1, web2)
}

// writeUpstreamCerts writes a CA and a client certificate for each pool
// with UpstreamTLS, as the agent would.
func writeUpstreamCerts(t *testing.T, dir string, lb *model.LoadBalancer) {
	t.Helper()
	for _, p := range lb.Pools {
		u := p.UpstreamTLS
		if u == nil {
			continue
		}
		if u.CASHA256 != "" {
			path, _ := lbAt(dir).UpstreamCA(u.CASHA256)
			ca, _ := splitPEM(selfSigned(t, []string{"ca.example"}))
			writeFile(t, path, ca)
		}
		if u.ClientSHA256 != "" {
			path, _ := lbAt(dir).UpstreamClient(u.ClientSHA256)
			writeFile(t, path, selfSigned(t, []string{"client.example"}))
		}
	}
}

// passthroughFixture: ssl-passthrough of pt.example to a TCP pool, on a
// TLS listener with a certificate (withCert) or without.
func passthroughFixture(web1, web2 model.Pool, withCert bool) *model.LoadBalancer {
	pt := web2
	pt.ID, pt.Name, pt.TCP = model.ID("tcp", "ns", "webservice-2", "443"), "ns_webservice-2_443_passthrough", true
	https := model.Listener{Name: model.DefaultHTTPSListenerName, Protocol: model.ProtocolTerminatedHTTPS, Port: 443,
		Passthrough: []model.PassthroughRoute{{Host: "pt.example", PoolID: pt.ID}, {Host: "a-pt.example", PoolID: pt.ID}}}
	if withCert {
		https.Certificates = []model.Certificate{{ID: model.ID("cert", "tls"), Namespace: "ns", Secret: "tls", Hosts: []string{"web.example"}, SHA256: "aa"}}
		https.Policies = routes(toPool(web1, hostIs("web.example"), pathPrefix("/")))
	}
	return newLB([]model.Listener{httpListener("", routes(toPool(web1, hostIs("web.example"), pathPrefix("/")))), https}, web1, pt)
}

// sniFixture is a Gateway's TLS listeners beside an HTTPS one on 443:
// exact and wildcard SNIs passed through, a TLS listener's wildcard
// refused where no route serves it, an HTTPS listener's host under that
// wildcard handed to termination, and every other SNI refused.
func sniFixture(web1, web2 model.Pool) *model.LoadBalancer {
	pt := web2
	pt.ID, pt.Name, pt.TCP = model.ID("tcp", "ns", "webservice-2", "443"), "ns_webservice-2_443_tcp", true
	https := model.Listener{Name: "terminated_https-443", Protocol: model.ProtocolTerminatedHTTPS, Port: 443,
		Certificates: []model.Certificate{{ID: model.ID("cert", "tls"), Namespace: "ns", Secret: "tls", Hosts: []string{"web.example"}, SHA256: "aa"}},
		Policies:     routes(toPool(web1, hostIs("web.example"), pathPrefix("/"))),
		Passthrough: []model.PassthroughRoute{
			{Host: "pt.example", PoolID: pt.ID},
			{Host: "*.apps.example", PoolID: pt.ID},
			{Host: "*.example"},
			{Host: "web.example", Terminate: true},
			{Host: ""},
		}}
	return newLB([]model.Listener{https}, web1, pt)
}
