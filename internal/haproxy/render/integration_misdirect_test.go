package render

import (
	"bufio"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"pier.dev/pier/internal/model"
)

// misdirectLB is the upstream suite's HTTPRouteHTTPSListenerDetect-
// MisdirectedRequests on one TLS port: Gateway listeners without hostname
// (route example.test), second.test, *.wild.test and fourth.wild.test,
// each with a route to a pool of its own, one certificate for all.
func misdirectLB(be map[string]string) (*model.LoadBalancer, model.Certificate) {
	p := map[string]model.Pool{}
	var pools []model.Pool
	for _, name := range []string{"any", "second", "wild", "fourth"} {
		p[name] = pool(name, memberAt(be[name]))
		pools = append(pools, p[name])
	}
	suffix := model.L7Rule{Type: model.RuleHostName, Compare: model.CompareSuffix, Value: "*.wild.test"}
	cert := model.Certificate{ID: model.ID("c1"), SHA256: "1"}
	lb := newLB([]model.Listener{{Name: "https", Protocol: model.ProtocolTerminatedHTTPS, Port: 443,
		Certificates:  []model.Certificate{cert},
		ListenerHosts: []string{"", "*.wild.test", "fourth.wild.test", "second.test"},
		Policies: routes(
			toPool(p["any"], hostIs("example.test"), pathPrefix("/")),
			toPool(p["fourth"], hostIs("fourth.wild.test"), pathPrefix("/")),
			toPool(p["second"], hostIs("second.test"), pathPrefix("/")),
			toPool(p["wild"], suffix, pathPrefix("/")),
		)}}, pools...)
	return lb, cert
}

// TestIntegrationMisdirected: through a real HAProxy, a request whose Host
// belongs to another Gateway listener than its SNI chose answers 421; one
// whose SNI and Host choose the same listener is routed (or 404s) as
// before; without SNI nothing is checked.
func TestIntegrationMisdirected(t *testing.T) {
	bin := haproxyBin(t)
	if testing.Short() {
		t.Skip("starts HAProxy")
	}
	be := map[string]string{}
	for _, name := range []string{"any", "second", "wild", "fourth"} {
		be[name] = startBackend(t, name)
	}
	lb, cert := misdirectLB(be)
	addr := serveLBWithFiles(t, bin, lb, func(dir string) {
		r, err := Render(lb, lbAt(dir), nil, Options{Dir: dir, MinSlots: 4})
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, r.CrtListPath, r.CrtList)
		p, _ := lbAt(dir).Cert(cert.ID, cert.SHA256)
		writeFile(t, p, selfSigned(t, []string{"example.test", "second.test", "*.wild.test"}))
	})
	for _, tc := range []struct{ sni, host, want string }{
		{"example.test", "example.test", "any"},
		{"example.test", "second.test", "421"},
		{"example.test", "unknown.test", "404"},
		{"second.test", "second.test", "second"},
		{"SECOND.test", "second.test:443", "second"}, // case and port
		{"second.test", "example.test", "421"},
		{"second.test", "unknown.test", "421"},
		{"third.wild.test", "third.wild.test", "wild"},
		{"third.wild.test", "fifth.wild.test", "wild"},
		{"third.wild.test", "fourth.wild.test", "421"},
		{"third.wild.test", "second.test", "421"},
		{"fourth.wild.test", "fourth.wild.test", "fourth"},
		{"fourth.wild.test", "fifth.wild.test", "421"},
		{"unknown.test", "example.test", "any"},
		{"unknown.test", "unknown.test", "404"},
		{"", "second.test", "second"}, // no SNI: no listener chosen
	} {
		code, backend, err := tlsRequest(addr, tc.sni, tc.host)
		got := backend
		if code != http.StatusOK {
			got = strconv.Itoa(code)
		}
		if err != nil || got != tc.want {
			t.Errorf("SNI %q Host %q: %s (%v), want %s", tc.sni, tc.host, got, err, tc.want)
		}
	}
	// HTTP/2, offered (ALPN) on such a port: a connection reused for
	// another listener's name is what the 421 is for (RFC 9113 9.1.1).
	for _, tc := range []struct{ sni, host, want string }{
		{"second.test", "second.test", "second"},
		{"second.test", "example.test", "421"},
	} {
		tr := &http.Transport{TLSClientConfig: &tls.Config{ServerName: tc.sni, InsecureSkipVerify: true}, ForceAttemptHTTP2: true}
		req, _ := http.NewRequest("GET", "https://"+addr+"/", nil)
		req.Host = tc.host
		resp, err := (&http.Client{Transport: tr, Timeout: 5 * time.Second}).Do(req)
		if err != nil {
			t.Fatalf("HTTP/2 SNI %q Host %q: %v", tc.sni, tc.host, err)
		}
		resp.Body.Close()
		tr.CloseIdleConnections()
		got := resp.Header.Get("X-Backend")
		if resp.StatusCode != http.StatusOK {
			got = strconv.Itoa(resp.StatusCode)
		}
		if resp.ProtoMajor != 2 || got != tc.want {
			t.Errorf("HTTP/2 SNI %q Host %q: %s over %s, want %s over HTTP/2", tc.sni, tc.host, got, resp.Proto, tc.want)
		}
	}
}

// tlsRequest sends GET / with Host over TLS with the given SNI (none when
// empty) and returns the status and the backend that answered.
func tlsRequest(addr, sni, host string) (int, string, error) {
	cfg := &tls.Config{ServerName: sni, InsecureSkipVerify: true}
	if sni == "" {
		cfg.ServerName = ""
	}
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, cfg)
	if err != nil {
		return 0, "", err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	io.WriteString(conn, "GET / HTTP/1.1\r\nHost: "+host+"\r\nConnection: close\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, resp.Header.Get("X-Backend"), nil
}

// The 421 rules grow with the listeners of the port, not with its
// routes, read the validated hostnames only, and are left out of a
// listener without ListenerHosts; hostnames that would reach the file
// unvalidated, or one alone, are refused.
func TestMisdirectLines(t *testing.T) {
	lb, _ := misdirectLB(map[string]string{"any": "10.0.0.1:80", "second": "10.0.0.2:80", "wild": "10.0.0.3:80", "fourth": "10.0.0.4:80"})
	cfg, err := Config(lb, fixtureOptions())
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"http-request set-var(txn.pier_lsni) int(0) if !{ var(txn.pier_lsni) -m found } { ssl_fc_sni,lower -m str 'fourth.wild.test' }",
		"http-request set-var(txn.pier_lsni) int(2) if !{ var(txn.pier_lsni) -m found } { ssl_fc_sni,lower -m end '.wild.test' }",
		"http-request set-var(txn.pier_lsni) int(3) if !{ var(txn.pier_lsni) -m found }\n",
		"http-request set-var(txn.pier_lhost) int(1) if !{ var(txn.pier_lhost) -m found } { var(txn.pier_host) -m str 'second.test' }",
		"http-request return status 421 content-type text/plain string 'misdirected request' if { ssl_fc_sni -m found } !{ var(txn.pier_lsni),sub(txn.pier_lhost) eq 0 }",
	} {
		if !strings.Contains(string(cfg), want) {
			t.Errorf("no %q in\n%s", want, cfg)
		}
	}
	if !strings.Contains(string(cfg), " alpn h2,http/1.1\n") {
		t.Errorf("the bind does not offer HTTP/2:\n%s", cfg)
	}
	if n := strings.Count(string(cfg), "set-var(txn.pier_lsni)"); n != 4 {
		t.Errorf("%d SNI lookups, want one per listener (4)", n)
	}

	lb.Listeners[0].ListenerHosts = []string{"a.test", "b.test"} // no listener without hostname
	cfg, err = Config(lb, fixtureOptions())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(cfg), "set-var(txn.pier_lhost) int(-1) if !{ var(txn.pier_lhost) -m found }") {
		t.Errorf("no -1 for a host no listener matches:\n%s", cfg)
	}
	lb.Listeners[0].ListenerHosts = nil
	if cfg, _ = Config(lb, fixtureOptions()); strings.Contains(string(cfg), "421") || strings.Contains(string(cfg), "alpn h2") {
		t.Errorf("421 rule or HTTP/2 without listener hosts:\n%s", cfg)
	}
	for _, bad := range [][]string{{"a.test", "x' || true"}, {"a.test", "*"}, {"a.test"}, {"a.test", "a.test"}} {
		lb.Listeners[0].ListenerHosts = bad
		if _, err := Config(lb, fixtureOptions()); err == nil {
			t.Errorf("listener hosts %q rendered", bad)
		} else if !strings.Contains(err.Error(), "listener host") {
			t.Errorf("listener hosts %q: %v", bad, err)
		}
	}
}
