package render

import (
	"strings"
	"testing"

	"pier.dev/pier/internal/encode"
	"pier.dev/pier/internal/model"
)

// TestRefusals: a spec that breaks a rule is refused whole, with a message
// naming the problem, and nothing is rendered. The model is re-validated
// here even though translation validated it: the store may be a custom
// resource edited by hand.
func TestRefusals(t *testing.T) {
	base := func() *model.LoadBalancer { return planFixture(members(2)...) }
	for _, tc := range []struct {
		name string
		mod  func(lb *model.LoadBalancer, o *Options)
		want string
	}{
		{"newline in path", func(lb *model.LoadBalancer, _ *Options) {
			lb.Listeners[0].Policies[0].Rules = []model.L7Rule{pathIs("/a\n    http-request return status 200 string pwned\n#")}
		}, "control"},
		{"quote in host", func(lb *model.LoadBalancer, _ *Options) { lb.Listeners[0].Policies[0].Rules[0].Value = "a'b" }, "dns1123"},
		{"upper-case host", func(lb *model.LoadBalancer, _ *Options) { lb.Listeners[0].Policies[0].Rules[0].Value = "A.example" }, "lowercase"},
		{"wildcard as exact host", func(lb *model.LoadBalancer, _ *Options) { lb.Listeners[0].Policies[0].Rules[0].Value = "*.example" }, "wildcard"},
		{"regex compare", func(lb *model.LoadBalancer, _ *Options) { lb.Listeners[0].Policies[0].Rules[0].Compare = "REGEX" }, "unsupported rule"},
		{"member address", func(lb *model.LoadBalancer, _ *Options) { lb.Pools[0].Members[0].Address = "10.0.0.1 check" }, "IP address"},
		{"member port", func(lb *model.LoadBalancer, _ *Options) { lb.Pools[0].Members[0].Port = 0 }, "port"},
		{"member weight", func(lb *model.LoadBalancer, _ *Options) { lb.Pools[0].Members[0].Weight = 1000 }, "weight"},
		{"vip", func(lb *model.LoadBalancer, _ *Options) { lb.VIP = "" }, "vip"},
		{"vip unspecified", func(lb *model.LoadBalancer, _ *Options) { lb.VIP = "0.0.0.0" }, "unspecified"},
		{"fip", func(lb *model.LoadBalancer, _ *Options) { lb.FIP = "203.0.113.1:80" }, "fip"},
		{"pool id", func(lb *model.LoadBalancer, _ *Options) { lb.Pools[0].ID = "ns_svc" }, "identifier"},
		{"missing pool", func(lb *model.LoadBalancer, _ *Options) { lb.Listeners[0].Policies[0].PoolID = "nope" }, "does not exist"},
		{"algorithm", func(lb *model.LoadBalancer, _ *Options) { lb.Pools[0].Algorithm = "roundrobin\n" }, "algorithm"},
		{"protocol", func(lb *model.LoadBalancer, _ *Options) { lb.Listeners[0].Protocol = "UDP" }, "protocol"},
		{"tcp with policies", func(lb *model.LoadBalancer, _ *Options) { lb.Listeners[0].Protocol = model.ProtocolTCP }, "no policies"},
		{"tls without cert", func(lb *model.LoadBalancer, _ *Options) { lb.Listeners[0].Protocol = model.ProtocolTerminatedHTTPS }, "without certificates"},
		{"duplicate port", func(lb *model.LoadBalancer, _ *Options) { lb.Listeners = append(lb.Listeners, lb.Listeners[0]) }, "two listeners"},
		{"no listener", func(lb *model.LoadBalancer, _ *Options) { lb.Listeners = nil }, "no listeners"},
		{"native provider", func(lb *model.LoadBalancer, _ *Options) { lb.Provider = model.ProviderNative }, "provider"},
		{"uuid", func(lb *model.LoadBalancer, _ *Options) { lb.UUID = "../x" }, "uuid"},
		{"too many rules", func(lb *model.LoadBalancer, _ *Options) {
			for range 70 {
				lb.Listeners[0].Policies[0].Rules = append(lb.Listeners[0].Policies[0].Rules, pathPrefix("/a"))
			}
		}, "at most 64"},
		{"dir with space", func(_ *model.LoadBalancer, o *Options) { o.Dir = "/var/lib/pier x" }, "file path"},
		{"relative dir", func(_ *model.LoadBalancer, o *Options) { o.Dir = "state/x" }, "file path"},
		{"long dir", func(_ *model.LoadBalancer, o *Options) { o.Dir = "/" + strings.Repeat("d", 90) }, "socket path"},
		{"user", func(_ *model.LoadBalancer, o *Options) { o.User = "root\n" }, "account"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lb, opts := base(), fixtureOptions()
			tc.mod(lb, &opts)
			cfg, err := Config(lb, opts)
			if err == nil || cfg != nil {
				t.Fatalf("rendered:\n%s", cfg)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not mention %q", err, tc.want)
			}
			// The socket path is the process's: Render never sees it.
			if _, err := Render(lb, lbAt(opts.Dir), nil, opts); err == nil && tc.name != "long dir" {
				t.Fatal("Render accepted it")
			}
			if strings.ContainsFunc(err.Error(), func(r rune) bool { return r < 0x20 || r == 0x7f }) {
				t.Fatalf("control character in error: %s", encode.Printable(err.Error()))
			}
		})
	}
}

func TestSlotCount(t *testing.T) {
	for _, tc := range [][3]int{{0, 16, 16}, {1, 16, 16}, {16, 16, 16}, {17, 16, 32}, {20, 16, 32}, {33, 16, 64}, {3, 1, 4}, {1, 1, 1}} {
		if got := slotCount(tc[0], tc[1]); got != tc[2] {
			t.Errorf("slotCount(%d, %d) = %d, want %d", tc[0], tc[1], got, tc[2])
		}
	}
}

func TestCrtListRefusesBadHost(t *testing.T) {
	var lb *model.LoadBalancer
	for _, f := range fixtures() {
		if f.name == "tls-two-certs" {
			lb = f.lb.Clone()
		}
	}
	lb.Listeners[1].Certificates[1].Hosts = []string{"*.foo.com", "evil.com [verify none]"}
	if out, err := CrtList(lb, fixtureOptions()); err == nil {
		t.Fatalf("rendered %s", out)
	}
}

// TestCrtListDefaultCertificate: the operator's default certificate is
// the first line and matches no name ("!*"); one anywhere else, or with
// hosts, is refused.
func TestCrtListDefaultCertificate(t *testing.T) {
	var lb *model.LoadBalancer
	for _, f := range fixtures() {
		if f.name == "tls-two-certs" {
			lb = f.lb.Clone()
		}
	}
	def := model.Certificate{ID: model.ID("default-cert", "pier", "default"), Namespace: "pier", Secret: "default", SHA256: "cc", Default: true}
	l := &lb.Listeners[1]
	l.Certificates = append([]model.Certificate{def}, l.Certificates...)
	out, err := CrtList(lb, fixtureOptions())
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 3 || !strings.HasSuffix(lines[0], "-cc.pem !*") || !strings.HasSuffix(lines[1], " foo.bar.com") {
		t.Fatalf("crt-list:\n%s", out)
	}
	l.Certificates[0], l.Certificates[1] = l.Certificates[1], l.Certificates[0]
	if out, err := CrtList(lb, fixtureOptions()); err == nil {
		t.Fatalf("a default certificate second rendered:\n%s", out)
	}
	l.Certificates[0], l.Certificates[1] = l.Certificates[1], l.Certificates[0]
	l.Certificates[0].Hosts = []string{"a.example"}
	if out, err := CrtList(lb, fixtureOptions()); err == nil {
		t.Fatalf("a default certificate with hosts rendered:\n%s", out)
	}
}

// StrictSNI (a shared load balancer whose owner has no certificate, so
// another tenant's certificate must not answer for it) adds strict-sni to
// every TLS bind, and HAProxy takes it.
func TestStrictSNI(t *testing.T) {
	var lb *model.LoadBalancer
	for _, f := range fixtures() {
		if f.name == "tls-two-certs" {
			lb = f.lb.Clone()
		}
	}
	for i := range lb.Listeners {
		lb.Listeners[i].StrictSNI = lb.Listeners[i].Protocol == model.ProtocolTerminatedHTTPS
	}
	r := mustRender(t, lb, nil)
	binds := 0
	for _, line := range strings.Split(string(r.Fragment), "\n") {
		if strings.Contains(line, " ssl crt-list ") {
			binds++
			if !strings.Contains(line, " strict-sni") {
				t.Errorf("TLS bind without strict-sni: %s", line)
			}
		}
	}
	if binds == 0 {
		t.Fatal("no TLS bind rendered")
	}
	haproxyCheck(t, r.Fragment, lb)
}
