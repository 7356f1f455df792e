package web

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fx "pier.dev/pier/internal/fixture"
	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/store/bolt"
)

const (
	hostileScript = `<script>alert(1)</script>`
	hostileImg    = `"><img src=x onerror=alert(2)>`
	hostileBidi   = "admin\u202Egnp.exe"
)

var now = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// fakeIngresses is the Ingresses a test sets.
type fakeIngresses []IngressInfo

func (f fakeIngresses) Ingresses() []IngressInfo { return f }

func ingress(ns, name string, annotations map[string]string, hosts ...string) *networkingv1.Ingress {
	ing := fx.Ingress(ns, name, "")
	ing.Annotations, ing.CreationTimestamp = annotations, metav1.NewTime(now.Add(-time.Hour))
	for _, h := range hosts {
		ing.Spec.Rules = append(ing.Spec.Rules, fx.Rule(h, fx.Path("/", networkingv1.PathTypePrefix, "svc", 80)))
	}
	return ing
}

// lb is a one-listener load balancer with one policy, one pool of n
// members, from Ingress ns/name, active on node-a and standby on node-b.
func lb(uuid, ns, name string, members int) *model.LoadBalancer {
	src := model.Source{Kind: "Ingress", Namespace: ns, Name: name}
	pool := model.Pool{ID: "p" + uuid, Name: ns + "_svc_80", Namespace: ns, Service: "svc", Port: "80",
		Algorithm: model.AlgorithmRoundRobin}
	for i := 0; i < members; i++ {
		pool.Members = append(pool.Members, model.Member{Address: "10.0.0." + string(rune('1'+i)), Port: 8080, Weight: 1, Target: name + "-pod"})
	}
	return &model.LoadBalancer{UUID: uuid, Name: ns + "/" + name, Provider: model.ProviderHAProxy,
		VIP: "127.10.0." + uuid[len(uuid)-1:], FIP: "127.20.0." + uuid[len(uuid)-1:],
		Placement: model.Placement{Active: "node-a", Standby: "node-b"}, Sources: []model.Source{src},
		Listeners: []model.Listener{{Name: "http", Protocol: model.ProtocolHTTP, Port: 80, Policies: []model.L7Policy{{
			ID: "pol" + uuid, Position: 1, Action: model.ActionRedirectToPool, PoolID: pool.ID, Source: src,
			Rules: []model.L7Rule{{Type: model.RulePath, Compare: model.CompareStartsWith, Value: "/app"}}}}}},
		Pools: []model.Pool{pool}, CreatedAt: now.Add(-90 * time.Minute)}
}

type fixture struct {
	store *bolt.Store
	h     *Handler
	srv   *httptest.Server
}

func newFixture(t *testing.T, ings fakeIngresses, lbs ...*model.LoadBalancer) *fixture {
	t.Helper()
	st, err := bolt.Open(filepath.Join(t.TempDir(), "pier.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	for _, l := range lbs {
		put(t, st, l)
	}
	f := &fixture{store: st, h: &Handler{Store: st, Now: func() time.Time { return now }}}
	if ings != nil {
		f.h.Ingresses = ings
	}
	f.srv = httptest.NewServer(f.h)
	t.Cleanup(f.srv.Close)
	return f
}

func put(t *testing.T, st *bolt.Store, l *model.LoadBalancer) {
	t.Helper()
	ctx := context.Background()
	if err := st.PutSpec(ctx, l); err != nil {
		t.Fatal(err)
	}
	for _, node := range []string{l.Placement.Active, l.Placement.Standby} {
		if node == "" {
			continue
		}
		members := 0
		for _, p := range l.Pools {
			members += len(p.Members)
		}
		r := model.NodeStatus{Node: node, State: model.StateActive, SpecHash: l.SpecHash(), ConfigHash: "c0ffee",
			Reloads: 2, RuntimeUpdates: uint64(10 + members), MembersUp: members, Members: members, UpdatedAt: now}
		if err := st.PutNodeStatus(ctx, l.UUID, r); err != nil {
			t.Fatal(err)
		}
	}
}

func get(t *testing.T, url string, hdr ...string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, string(b)
}

func mustContain(t *testing.T, what, body string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(body, w) {
			t.Errorf("%s: missing %q", what, w)
		}
	}
}

// rows returns the overview's table rows (server-rendered: what a
// browser with JavaScript off shows).
func rows(body string) []string {
	return regexp.MustCompile(`(?s)<tr class="row row-[A-Z]+">.*?</tr>`).FindAllString(body, -1)
}

func TestOverviewWithoutJavaScript(t *testing.T) {
	a, b, c := lb("u1", "demo", "shop", 3), lb("u2", "demo", "blog", 1), lb("u3", "prod", "api", 0)
	c.Placement.Standby = ""
	ings := fakeIngresses{
		{Ingress: ingress("demo", "shop", nil, "shop.example")},
		{Ingress: ingress("demo", "blog", nil), Problems: []model.Problem{
			{Kind: "Ingress", Namespace: "demo", Name: "blog", Severity: model.SeverityWarning, Reason: "AnnotationIgnored", Field: "metadata.annotations", Message: "x"},
			{Kind: "Ingress", Namespace: "demo", Name: "blog", Severity: model.SeverityWarning, Reason: "Other", Message: "y"}}},
	}
	f := newFixture(t, ings, a, b, c)
	code, hdr, body := get(t, f.srv.URL+"/")
	if code != 200 || !strings.HasPrefix(hdr.Get("Content-Type"), "text/html") {
		t.Fatalf("GET /: %d %s", code, hdr.Get("Content-Type"))
	}
	rs := rows(body)
	if len(rs) != 3 {
		t.Fatalf("want 3 rows, got %d:\n%s", len(rs), body)
	}
	// Sorted by name: demo/blog, demo/shop, prod/api.
	mustContain(t, "row demo/blog", rs[0], "demo/blog", `href="/ui/lb/u2"`, `href="/ui/ingress/demo/blog"`, "127.10.0.2", "127.20.0.2",
		"node-a", "node-b", `title="as HAProxy on node-a sees them, in 1 pool">1 / 1 up<`, `<span class="bad">2</span>`, ">90m<", "haproxy",
		`2 <span class="muted">/</span> 11`)
	mustContain(t, "row demo/shop", rs[1], ">3 / 3 up<", "in 1 pool\"", `2 <span class="muted">/</span> 13`)
	mustContain(t, "row prod/api", rs[2], ">0 / 0 up<", `<span class="muted">–</span>`) // no standby
	mustContain(t, "summary", body, "3 load balancers", "3 active", "1 Ingress with problems",
		"Members up / members", // the health column says what it counts
		`<script src="/ui/static/app.js" defer></script>`)
	if code, _, _ := get(t, f.srv.URL+"/ui/"); code != 200 {
		t.Errorf("GET /ui/: %d", code)
	}
}

// TestHealthFromTheHolder: with VRRP, the health and reload columns
// come from the node that holds the addresses, not from the placement's
// active node, and every node shows its role; a node whose driver counts
// no members shows the spec's count.
func TestHealthFromTheHolder(t *testing.T) {
	l, native := lb("u1", "demo", "shop", 3), lb("u2", "demo", "l4", 2)
	native.Provider = model.ProviderNative
	f := newFixture(t, nil, l)
	ctx := context.Background()
	for _, r := range []model.NodeStatus{
		{Node: "node-a", State: model.StateActive, SpecHash: l.SpecHash(), VRRP: model.VRRPFault, MembersUp: 3, Members: 3, Reloads: 9, UpdatedAt: now},
		{Node: "node-b", State: model.StateActive, SpecHash: l.SpecHash(), VRRP: model.VRRPMaster, MembersUp: 1, Members: 3, Reloads: 4, RuntimeUpdates: 6, UpdatedAt: now},
	} {
		if err := f.store.PutNodeStatus(ctx, l.UUID, r); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.store.PutSpec(ctx, native); err != nil {
		t.Fatal(err)
	}
	if err := f.store.PutNodeStatus(ctx, native.UUID, model.NodeStatus{Node: "node-a", State: model.StateActive, SpecHash: native.SpecHash(), UpdatedAt: now}); err != nil {
		t.Fatal(err)
	}
	_, _, body := get(t, f.srv.URL+"/")
	rs := rows(body)
	if len(rs) != 2 {
		t.Fatalf("%d rows", len(rs))
	}
	mustContain(t, "native row", rs[0], `title="no member health reported; in 1 pool">2 in spec<`)
	mustContain(t, "haproxy row", rs[1], `<span class="bad" title="as HAProxy on node-b sees them, in 1 pool">1 / 3 up</span>`,
		`4 <span class="muted">/</span> 6`,
		`node-a <span class="state s-ACTIVE">ACTIVE</span> <span class="role r-FAULT"`,
		`node-b <span class="state s-ACTIVE">ACTIVE</span> <span class="role r-MASTER"`)
}

// TestMembersDownAndTraffic: the serving node's report of members down
// marks them on the detail page, the others of a checked pool up, and its
// rates show in the overview and in the node's row; the standby's
// members down do not mark the members.
func TestMembersDownAndTraffic(t *testing.T) {
	l := lb("u1", "demo", "shop", 3)
	l.Pools[0].HealthCheck = true
	f := newFixture(t, nil, l)
	ctx := context.Background()
	for _, r := range []model.NodeStatus{
		{Node: "node-a", State: model.StateActive, SpecHash: l.SpecHash(), MembersUp: 2, Members: 3, MembersDown: []string{"10.0.0.2:8080"},
			RequestsPerSecond: 1200, ErrorShare: 0.0097, UpdatedAt: now},
		{Node: "node-b", State: model.StateActive, SpecHash: l.SpecHash(), MembersUp: 0, Members: 3,
			MembersDown: []string{"10.0.0.1:8080", "10.0.0.2:8080", "10.0.0.3:8080"}, UpdatedAt: now},
	} {
		if err := f.store.PutNodeStatus(ctx, l.UUID, r); err != nil {
			t.Fatal(err)
		}
	}
	_, _, body := get(t, f.srv.URL+"/")
	rs := rows(body)
	if len(rs) != 1 {
		t.Fatalf("%d rows", len(rs))
	}
	mustContain(t, "overview row", rs[0], `>2 / 3 up</span>`, `1200 req/s <span class="muted">·</span> 0.97% 5xx`)
	_, _, body = get(t, f.srv.URL+"/ui/lb/u1")
	members := regexp.MustCompile(`(?s)<tr class="member">.*?</tr>`).FindAllString(body, -1)
	if len(members) != 3 {
		t.Fatalf("%d member rows:\n%s", len(members), body)
	}
	for i, want := range []string{`<span class="ok">up</span>`, `<span class="bad">down</span>`, `<span class="ok">up</span>`} {
		mustContain(t, "member "+strconv.Itoa(i+1), members[i], want)
	}
	mustContain(t, "node rows", body, `down: <span class="addr">10.0.0.2:8080</span></div>`,
		`1200 req/s <span class="muted">·</span> 0.97% 5xx`, `0 req/s <span class="muted">·</span> 0% 5xx`)
}

// TestFailoverHistory: the detail page names the node that holds the
// addresses and lists the holder's changes newest first, as the store
// summarised them from the agents' reports.
func TestFailoverHistory(t *testing.T) {
	l := lb("u1", "demo", "shop", 2)
	f := newFixture(t, nil, l)
	ctx := context.Background()
	at := func(min int) time.Time { return now.Add(time.Duration(min) * time.Minute) }
	for _, r := range []model.NodeStatus{
		{Node: "node-a", VRRP: model.VRRPMaster, UpdatedAt: at(1)},
		{Node: "node-b", VRRP: model.VRRPBackup, UpdatedAt: at(1)},
		{Node: "node-a", VRRP: model.VRRPFault, UpdatedAt: at(7)},  // a's HAProxy died
		{Node: "node-b", VRRP: model.VRRPMaster, UpdatedAt: at(8)}, // b took over
	} {
		r.State, r.SpecHash, r.MembersUp, r.Members, r.Reloads = model.StateActive, l.SpecHash(), 1, 2, 3
		if err := f.store.PutNodeStatus(ctx, l.UUID, r); err != nil {
			t.Fatal(err)
		}
	}
	_, _, body := get(t, f.srv.URL+"/ui/lb/u1")
	mustContain(t, "detail", body, "Placement and failover history",
		"held by <b>node-b</b>",
		`<span class="role r-FAULT">FAULT</span>`, `<span class="role r-MASTER">MASTER</span>`,
		`<span class="bad">1 / 2 up</span>`, `<span class="ok">current</span>`,
		"The last 3 changes")
	changes := regexp.MustCompile(`<tr class="change"><td>([^<]*)</td><td>(.*?)</td><td>(.*?)</td></tr>`).FindAllStringSubmatch(body, -1)
	var got []string
	for _, c := range changes {
		got = append(got, c[1]+" "+c[2]+"→"+c[3])
	}
	none := `<span class="muted">none</span>`
	want := []string{"2026-01-02 03:12:05 " + none + "→node-b", "2026-01-02 03:11:05 node-a→" + none, "2026-01-02 03:05:05 " + none + "→node-a"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("history rows:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// Without VRRP (pier run) there is no holder and no history.
	f2 := newFixture(t, nil, lb("u2", "demo", "blog", 1))
	_, _, body = get(t, f2.srv.URL+"/ui/lb/u2")
	mustContain(t, "detail without VRRP", body, "No node reports VRRP MASTER: without VRRP the active node serves the addresses", "No failover recorded.")
}

func TestNodeStatesPerNode(t *testing.T) {
	l := lb("u1", "demo", "shop", 1)
	f := newFixture(t, nil, l)
	// The standby applied an older spec and failed since.
	err := f.store.PutNodeStatus(context.Background(), "u1", model.NodeStatus{Node: "node-b", State: model.StateError,
		SpecHash: "old", Message: "haproxy -c refused the config", UpdatedAt: now})
	if err != nil {
		t.Fatal(err)
	}
	_, _, body := get(t, f.srv.URL+"/")
	mustContain(t, "overview", body, `node-a <span class="state s-ACTIVE">ACTIVE</span>`, `node-b <span class="state s-ERROR">ERROR</span>`)
	_, _, body = get(t, f.srv.URL+"/ui/lb/u1")
	mustContain(t, "detail", body, "haproxy -c refused the config", `<span class="bad">no</span>`, "<td>standby</td><td>node-b</td>")
}

func TestFilters(t *testing.T) {
	a, b, c := lb("u1", "demo", "shop", 1), lb("u2", "demo", "blog", 1), lb("u3", "prod", "api", 1)
	f := newFixture(t, nil, a, b, c)
	// u3 has no report from its active node: PENDING.
	c.UUID, c.Name = "u4", "prod/pending"
	if err := f.store.PutSpec(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		query string
		want  []string
	}{
		{"", []string{"demo/blog", "demo/shop", "prod/api", "prod/pending"}},
		{"?namespace=demo", []string{"demo/blog", "demo/shop"}},
		{"?namespace=prod&state=PENDING", []string{"prod/pending"}},
		{"?state=ACTIVE", []string{"demo/blog", "demo/shop", "prod/api"}},
		{"?provider=native", nil},
		{"?namespace=nowhere", nil},
	}
	for _, tc := range cases {
		_, _, body := get(t, f.srv.URL+"/ui/"+tc.query)
		var got []string
		for _, r := range rows(body) {
			got = append(got, regexp.MustCompile(`class="lb-name">([^<]*)<`).FindStringSubmatch(r)[1])
		}
		if strings.Join(got, ",") != strings.Join(tc.want, ",") {
			t.Errorf("%q: rows %v, want %v", tc.query, got, tc.want)
		}
		if tc.query != "" && len(tc.want) < 4 && !strings.Contains(body, "of 4 match") {
			t.Errorf("%q: no match count", tc.query)
		}
	}
	_, _, body := get(t, f.srv.URL+"/ui/?namespace=demo")
	mustContain(t, "selected filter", body, `<option value="demo" selected>demo</option>`)
}

func TestPaging(t *testing.T) {
	var lbs []*model.LoadBalancer
	for i := 0; i < 2*DefaultPageSize+10; i++ {
		l := lb("u1", "demo", "x", 1)
		l.UUID, l.Name = fmt.Sprintf("u%04d", i), fmt.Sprintf("demo/x%d", 1000+i)
		lbs = append(lbs, l)
	}
	f := newFixture(t, nil, lbs...)
	_, _, body := get(t, f.srv.URL+"/")
	if n := len(rows(body)); n != DefaultPageSize {
		t.Errorf("page 1: %d rows, want %d", n, DefaultPageSize)
	}
	mustContain(t, "page 1", body, "page 1 of 3", `href="/ui/?page=2"`)
	_, _, body = get(t, f.srv.URL+"/ui/?page=3")
	if n := len(rows(body)); n != 10 {
		t.Errorf("page 3: %d rows, want 10", n)
	}
	mustContain(t, "page 3", body, "demo/x1409", `href="/ui/?page=2"`)
}
