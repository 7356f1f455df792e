package render

import (
	"crypto/x509"
	"strconv"
	"strings"
	"testing"

	"pier.dev/pier/internal/model"
)

// TestIntegrationAffinitySecure: the session cookie's Secure attribute
// through a real HAProxy with an HTTP and an HTTPS listener. By default
// (ingress-nginx's) it is Secure on HTTPS responses only; Always on both,
// Never on neither; SameSite=None is Secure on both.
func TestIntegrationAffinitySecure(t *testing.T) {
	bin := haproxyBin(t)
	if testing.Short() {
		t.Skip("starts HAProxy")
	}
	sticky := func(name string, secure model.CookieSecure, sameSite string) model.Pool {
		p := pool(name, memberAt(startCookieBackend(t, name)))
		p.Affinity = &model.CookieAffinity{Name: "c_" + name, SameSite: sameSite, Secure: secure}
		return p
	}
	pools := []model.Pool{sticky("auto", "", ""), sticky("always", model.CookieSecureAlways, "Lax"),
		sticky("never", model.CookieSecureNever, ""), sticky("none", model.CookieSecureNever, "None")}
	policies := func() []model.L7Policy {
		var ps []model.L7Policy
		for _, p := range pools {
			ps = append(ps, toPool(p, hostIs(p.Service+".test"), pathPrefix("/")))
		}
		return routes(ps...)
	}
	httpPort, tlsPort := freePort(), freePort()
	lb := newLB([]model.Listener{
		{Name: "http", Protocol: model.ProtocolHTTP, Port: httpPort, Policies: policies()},
		{Name: "https", Protocol: model.ProtocolTerminatedHTTPS, Port: tlsPort, Policies: policies(),
			Certificates: []model.Certificate{{ID: model.ID("c1"), Hosts: []string{"auto.test"}, SHA256: "1"}}},
	}, pools...)
	lb.VIP, lb.FIP = "127.0.0.1", ""
	dir := t.TempDir()
	opts := Options{Dir: dir, MinSlots: 4}
	cfg, err := Config(lb, opts)
	if err != nil {
		t.Fatal(err)
	}
	r, err := Render(lb, lbAt(dir), nil, opts)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, r.CrtListPath, r.CrtList)
	for _, m := range r.Maps {
		writeFile(t, m.Path, m.Data)
	}
	roots := x509.NewCertPool()
	p, _ := lbAt(dir).Cert(lb.Listeners[1].Certificates[0].ID, "1")
	pemBytes := selfSigned(t, []string{"auto.test"})
	writeFile(t, p, pemBytes)
	roots.AppendCertsFromPEM(pemBytes)
	writeFile(t, dir+"/haproxy.conf", cfg)
	startHAProxy(t, bin, dir+"/haproxy.conf", httpPort, tlsPort)
	c := &client{t: t, http: "127.0.0.1:" + strconv.Itoa(httpPort), tls: "127.0.0.1:" + strconv.Itoa(tlsPort), roots: roots}
	for _, tc := range []struct {
		host              string
		httpSec, httpsSec bool
	}{{"auto.test", false, true}, {"always.test", true, true}, {"never.test", false, false}, {"none.test", true, true}} {
		for scheme, want := range map[string]bool{"http": tc.httpSec, "https": tc.httpsSec} {
			set := c.get(scheme, tc.host, "/").Header.Get("Set-Cookie")
			if !strings.HasPrefix(set, "c_") || strings.Contains(set, "; Secure") != want || strings.Count(set, "Secure") > 1 {
				t.Errorf("%s://%s: Set-Cookie %q, want Secure %v", scheme, tc.host, set, want)
			}
		}
	}
}
