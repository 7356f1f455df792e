package render

import (
	"strconv"
	"testing"
	"time"

	"pier.dev/pier/internal/haproxy/layout"

	"pier.dev/pier/internal/model"
)

// Fixtures: the seed's three Contrail cases, the conformance suite's host
// and path rules, and the edge cases of the renderer.

const (
	fixtureUUID = "5f0c6a9e-0d7e-4b1a-9c51-2b7c1e0a4d10"
	fixtureDir  = "/var/lib/pier/haproxy/" + fixtureUUID
)

func fixtureOptions() Options { return Options{Dir: fixtureDir, Users: fixtureUsers} }

// fixtureAt is the fixtures' load balancer folder.
var fixtureAt = layout.LB{UUID: fixtureUUID, Dir: fixtureDir}

// mustRender renders lb in the fixtures' folder with history prev.
func mustRender(t *testing.T, lb *model.LoadBalancer, prev Slots) *Result {
	t.Helper()
	r, err := Render(lb, layout.LB{UUID: lb.UUID, Dir: fixtureDir}, prev, fixtureOptions())
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func lbAt(dir string) layout.LB        { return layout.LB{UUID: fixtureUUID, Dir: dir} }
func procAt(dir string) layout.Process { return layout.Process{Dir: dir} }

func newLB(listeners []model.Listener, pools ...model.Pool) *model.LoadBalancer {
	return &model.LoadBalancer{
		UUID: fixtureUUID, Name: "ns/ingress", Provider: model.ProviderHAProxy,
		VIP: "10.96.0.10", FIP: "203.0.113.10",
		Listeners: listeners, Pools: pools,
		CreatedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
	}
}

func pool(svc string, members ...model.Member) model.Pool {
	return model.Pool{
		ID: model.ID("ns", svc, "8080"), Name: "ns_" + svc + "_8080", Namespace: "ns", Service: svc,
		Port: "8080", Algorithm: "ROUND_ROBIN", HealthCheck: true, Members: members,
	}
}

func member(addr string, port int) model.Member {
	return model.Member{Address: addr, Port: port, Weight: 1, Target: "pod-" + addr}
}

func hostIs(h string) model.L7Rule {
	return model.L7Rule{Type: model.RuleHostName, Compare: model.CompareEqualTo, Value: h}
}

func hostWild(h string) model.L7Rule {
	return model.L7Rule{Type: model.RuleHostName, Compare: model.CompareWildcard, Value: h}
}

func pathIs(p string) model.L7Rule {
	return model.L7Rule{Type: model.RulePath, Compare: model.CompareEqualTo, Value: p}
}

func pathPrefix(p string) model.L7Rule {
	return model.L7Rule{Type: model.RulePath, Compare: model.CompareStartsWith, Value: p}
}

// routes numbers policies by their order.
func routes(ps ...model.L7Policy) []model.L7Policy {
	for i := range ps {
		ps[i].Position = i + 1
		ps[i].ID = model.ID("policy", strconv.Itoa(i+1), ps[i].PoolID)
	}
	return ps
}

func toPool(p model.Pool, rules ...model.L7Rule) model.L7Policy {
	return model.L7Policy{Action: model.ActionRedirectToPool, PoolID: p.ID, Rules: rules,
		Source: model.Source{Kind: "Ingress", Namespace: "ns", Name: "ing"}}
}

func reject(rules ...model.L7Rule) model.L7Policy {
	return model.L7Policy{Action: model.ActionReject, Rules: rules}
}

func httpListener(def string, ps []model.L7Policy) model.Listener {
	return model.Listener{Name: model.DefaultHTTPListenerName, Protocol: model.ProtocolHTTP, Port: 80, DefaultPoolID: def, Policies: ps}
}

type fixture struct {
	name string
	lb   *model.LoadBalancer
}

func fixtures() []fixture {
	web1 := pool("webservice-1", member("10.47.255.238", 80))
	web2 := pool("webservice-2", member("10.47.255.236", 80))
	wild, foobar := pool("wildcard-foo-com", member("10.244.0.5", 3000)), pool("foo-bar-com", member("10.244.0.6", 3000))
	exact, fooPrefix := pool("foo-exact", member("10.244.1.1", 3000)), pool("foo-prefix", member("10.244.1.2", 3000))
	abPrefix, aPrefix := pool("aaa-slash-bbb-prefix", member("10.244.1.3", 3000)), pool("aaa-prefix", member("10.244.1.4", 3000))
	empty := pool("empty")
	big := pool("big")
	big.Algorithm, big.HealthCheck = "LEAST_CONNECTIONS", false
	for i := 20; i > 0; i-- { // reversed on purpose: output is sorted
		big.Members = append(big.Members, member("10.244.2."+strconv.Itoa(i), 8080))
	}
	noFIP := newLB([]model.Listener{httpListener(web1.ID, nil)}, web1)
	noFIP.FIP, noFIP.VIP = "", "fd00::10"

	tlsPolicies := func() []model.L7Policy {
		return routes(toPool(foobar, hostIs("foo.bar.com"), pathPrefix("/")), toPool(wild, hostWild("*.foo.com"), pathPrefix("/")))
	}
	tls := newLB([]model.Listener{
		httpListener("", tlsPolicies()),
		{Name: model.DefaultHTTPSListenerName, Protocol: model.ProtocolTerminatedHTTPS, Port: 443, Policies: tlsPolicies(),
			Certificates: []model.Certificate{
				{ID: model.ID("cert", "conformance-tls"), Namespace: "ns", Secret: "conformance-tls", Hosts: []string{"foo.bar.com"}, SHA256: "aa"},
				{ID: model.ID("cert", "wild-tls"), Namespace: "ns", Secret: "wild-tls", Hosts: []string{"*.foo.com", "foo.com"}, SHA256: "bb"},
			}},
	}, foobar, wild)

	return []fixture{
		{"single-service", newLB([]model.Listener{httpListener(web1.ID, nil)}, web1)},
		{"simple-fanout", newLB([]model.Listener{httpListener("", routes(
			toPool(web1, pathPrefix("/dev")), toPool(web2, pathPrefix("/qa"))))}, web1, web2)},
		{"virtual-hosting", newLB([]model.Listener{httpListener(web1.ID, routes(
			toPool(web1, hostIs("www.juniper.net"), pathPrefix("/")), toPool(web2, hostIs("www.cisco.com"), pathPrefix("/"))))}, web1, web2)},
		{"tls-two-certs", tls},
		{"gateway-client-validation", clientValidationFixture(foobar, wild)},
		{"wildcard-host", newLB([]model.Listener{httpListener("", routes(
			toPool(foobar, hostIs("foo.bar.com"), pathPrefix("/")), toPool(wild, hostWild("*.foo.com"), pathPrefix("/"))))}, wild, foobar)},
		{"exact-prefix-mix", newLB([]model.Listener{httpListener("", routes(
			toPool(exact, hostIs("mixed-path-rules"), pathIs("/foo")),
			toPool(abPrefix, hostIs("prefix-path-rules"), pathPrefix("/aaa/bbb")),
			toPool(fooPrefix, hostIs("mixed-path-rules"), pathPrefix("/foo")),
			toPool(aPrefix, hostIs("prefix-path-rules"), pathPrefix("/aaa/")),
		))}, exact, fooPrefix, abPrefix, aPrefix)},
		{"reject-policy", newLB([]model.Listener{httpListener(web1.ID, routes(
			toPool(web2, pathIs("/admin/health")), reject(pathPrefix("/admin"))))}, web1, web2)},
		{"empty-pool", newLB([]model.Listener{httpListener(empty.ID, nil)}, empty)},
		{"pool-20-members", newLB([]model.Listener{httpListener(big.ID, nil)}, big)},
		{"no-fip-ipv6", noFIP},
		{"annotations", annotated(web1, web2, false)},
		{"annotations-acl", annotated(web1, web2, true)},
		{"annotations-cors", corsFixture(web1, web2)},
		{"affinity", affinityFixture(web1, web2)},
		{"backend-protocol", protocolFixture(web1, web2)},
		{"rewrite-target", rewriteFixture(web1, web2)},
		{"basic-auth", authFixture(web1, web2)},
		{"rate-limit", rateLimitFixture(web1, web2)},
		{"upstream-tries", triesFixture(web1, web2)},
		{"forwarded-prefix", prefixFixture(web1, web2)},
		{"canary", canaryFixture(web1, web2)},
		{"default-backend", fallbackFixture(pool("empty"), web1, web2)},
		{"rewrite-strip", stripFixture(web1, web2)},
		{"regex-paths", regexFixture(web1, web2, exact, fooPrefix, false)},
		{"regex-paths-acl", regexFixture(web1, web2, exact, fooPrefix, true)},
		{"external-auth", extAuthFixture(web1, web2, pool("oauth2-proxy", member("10.0.0.9", 4180)))},
		{"upstream-tls", upstreamTLSFixture(web1, web2)},
		{"ssl-passthrough", passthroughFixture(web1, web2, true)},
		{"ssl-passthrough-only", passthroughFixture(web1, web2, false)},
		{"tls-passthrough-sni", sniFixture(web1, web2)},
		{"tls-decrypt-mixed", decryptFixture(web1, web2)},
		{"gateway-tcp", tcpFixture(web1, web2)},
		{"gateway-matches", matchFixture(matchPools(func(string) string { return "10.244.3.1:8080" }))},
		{"gateway-matches-acl", unorderableFixture()},
		{"gateway-filters", gatewayFiltersFixture(web1, web2)},
		{"gateway-rule-settings", ruleSettingsFixture(web1, web2)},
		{"gateway-cors", gatewayCORSFixture(web1, web2)},
		{"gateway-backend-headers", splitFixture(web1, web2)},
		{"gateway-backend-rewrite", poolRewriteFixture(web1, web2)},
		{"ingress-headers", ingressHeadersFixture()},
		{"custom-errors", customErrorsFixture(web1, pool("error-pages", member("10.0.0.9", 8080)))},
	}
}

// annotated: policies with ingress-nginx options beside one
// without, sharing a pool; unsorted renders the ACL rules instead of maps.
func annotated(web1, web2 model.Pool, unsorted bool) *model.LoadBalancer {
	web2.ConnectTimeout, web2.ServerTimeout = 5*time.Second, 90*time.Second
	with := func(p model.L7Policy, o model.PolicyOptions) model.L7Policy { p.Options = &o; return p }
	ps := []model.L7Policy{
		with(toPool(web1, hostIs("secure.example"), pathPrefix("/")), model.PolicyOptions{HTTPSRedirect: true}),
		with(toPool(web1, hostIs("old.example"), pathPrefix("/")),
			model.PolicyOptions{RedirectURL: "https://new.example/a%20b?x=1&y=$HOME", RedirectCode: 308}),
		with(toPool(web2, hostIs("office.example"), pathPrefix("/")),
			model.PolicyOptions{AllowSources: []string{"10.0.0.0/8", "192.168.0.0/16"}, DenySources: []string{"10.6.6.0/24"}}),
		with(toPool(web2, hostIs("upload.example"), pathPrefix("/")), model.PolicyOptions{MaxBodyBytes: 8 << 20}),
		with(toPool(web2, hostIs("app.example"), pathPrefix("/")), model.PolicyOptions{AppRoot: "/app1", UpstreamHost: "app.internal"}),
		toPool(web2, hostIs("plain.example"), pathPrefix("/")),
	}
	if unsorted {
		ps = append([]model.L7Policy{toPool(web1, pathPrefix("/"))}, ps...)
	}
	return newLB([]model.Listener{httpListener("", routes(ps...))}, web1, web2)
}

// corsFixture: enable-cors with any origin (ingress-nginx's defaults) and
// with exact origins, beside a policy without options.
func corsFixture(web1, web2 model.Pool) *model.LoadBalancer {
	with := func(p model.L7Policy, o model.PolicyOptions) model.L7Policy { p.Options = &o; return p }
	return newLB([]model.Listener{httpListener("", routes(
		with(toPool(web1, hostIs("any.example"), pathPrefix("/")), model.PolicyOptions{CORS: &model.CORS{
			AllowOrigins: []string{"*"}, AllowMethods: []string{"GET", "PUT", "POST", "DELETE", "PATCH", "OPTIONS"},
			AllowHeaders: []string{"DNT", "Keep-Alive", "User-Agent", "X-Requested-With", "If-Modified-Since",
				"Cache-Control", "Content-Type", "Range", "Authorization"},
			AllowCredentials: true, MaxAgeSeconds: 1728000}}),
		with(toPool(web2, hostIs("api.example"), pathPrefix("/")), model.PolicyOptions{CORS: &model.CORS{
			AllowOrigins: []string{"http://localhost:3000", "https://app.example"}, AllowMethods: []string{"GET", "POST"},
			AllowHeaders: []string{"Content-Type"}, MaxAgeSeconds: 600}}),
		toPool(web2, hostIs("plain.example"), pathPrefix("/")),
	))}, web1, web2)
}

// affinityFixture: one pool with every cookie setting, one with the
// defaults' cookie, one without.
func affinityFixture(web1, web2 model.Pool) *model.LoadBalancer {
	web1.Affinity = &model.CookieAffinity{Name: "route_id", Path: "/app", MaxAgeSeconds: 3600, SameSite: "Lax"}
	web2.Affinity = &model.CookieAffinity{Name: "INGRESSCOOKIE"}
	web3 := pool("webservice-3", member("10.47.255.237", 80))
	return newLB([]model.Listener{httpListener("", routes(
		toPool(web1, hostIs("a.example"), pathPrefix("/")),
		toPool(web2, hostIs("b.example"), pathPrefix("/")),
		toPool(web3, hostIs("c.example"), pathPrefix("/")),
	))}, web1, web2, web3)
}

// protocolFixture: one pool per backend-protocol, HTTP (the default)
// included.
func protocolFixture(web1, web2 model.Pool) *model.LoadBalancer {
	web1.Protocol = model.BackendHTTPS
	web2.Protocol = model.BackendGRPC
	web3 := pool("webservice-3", member("10.47.255.237", 443))
	web3.Protocol = model.BackendGRPCS
	web4 := pool("webservice-4", member("10.47.255.239", 80))
	return newLB([]model.Listener{httpListener("", routes(
		toPool(web1, hostIs("https.example"), pathPrefix("/")),
		toPool(web2, hostIs("grpc.example"), pathPrefix("/")),
		toPool(web3, hostIs("grpcs.example"), pathPrefix("/")),
		toPool(web4, hostIs("http.example"), pathPrefix("/")),
	))}, web1, web2, web3, web4)
}

// rewriteFixture: rewrite-target on an Exact and a Prefix path (one
// profile per path, the path being part of the options), beside a route
// of the same host without it, in translation's order (map lookups).
func rewriteFixture(web1, web2 model.Pool) *model.LoadBalancer {
	with := func(p model.L7Policy, o model.PolicyOptions) model.L7Policy { p.Options = &o; return p }
	return newLB([]model.Listener{httpListener("", routes(
		with(toPool(web1, hostIs("app.example"), pathIs("/old/login")), model.PolicyOptions{RewritePath: "/api/v1.2/login"}),
		with(toPool(web1, hostIs("app.example"), pathPrefix("/foo")), model.PolicyOptions{RewritePath: "/"}),
		toPool(web2, hostIs("app.example"), pathPrefix("/")),
	))}, web1, web2)
}
