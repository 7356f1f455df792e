// Package storetest is the conformance suite for store.Store: every
// implementation (the embedded bbolt one, the Kubernetes custom resource
// one) runs the same tests, so callers can rely on the interface alone.
package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/store"
)

// Wait bounds every wait for an event. Generous: CI machines are shared.
var Wait = 10 * time.Second

// Run checks newStore's stores against the store.Store contract, plus
// these choices that callers rely on and the interface comments leave open:
//
//   - PutSpec of a new object keeps a non-zero CreatedAt (translation
//     passes the source's creation time) or sets the current time, and
//     never writes status: the object reads as PENDING until a node reports.
//   - The status summary always follows the active node's report, after a
//     report and after a placement change alike.
//   - The holder (the node reporting VRRP MASTER) and its history follow
//     every report and placement change, and survive a spec write.
//   - PutSpec refuses an object without a UUID.
//   - Delete of a missing UUID returns store.ErrNotFound.
//   - Watch replays in UUID order; a write that changes nothing stored
//     sends no event; a DELETE is never folded into a later PUT.
//
// newStore returns an empty, open store and arranges (t.Cleanup) to close it.
func Run(t *testing.T, newStore func(t *testing.T) store.Store) {
	t.Helper()
	tests := []struct {
		name string
		fn   func(t *testing.T, s store.Store)
	}{
		{"GetMissing", testGetMissing},
		{"PutGetRoundTrip", testPutGetRoundTrip},
		{"GatewayFieldsRoundTrip", testGatewayFieldsRoundTrip},
		{"BackendTLSFieldsRoundTrip", testBackendTLSFieldsRoundTrip},
		{"CreatedAtDefaultsToNow", testCreatedAtDefault},
		{"PutSpecRequiresUUID", testPutSpecRequiresUUID},
		{"ListSortedByUUID", testListSorted},
		{"PutSpecKeepsStatusAndCreatedAt", testPutSpecKeepsStatus},
		{"PutNodeStatus", testPutNodeStatus},
		{"PutNodeStatusBothNodes", testPutNodeStatusBothNodes},
		{"PutNodeStatusUnplacedNode", testPutNodeStatusUnplacedNode},
		{"PlacementChangeMovesSummary", testPlacementChangeMovesSummary},
		{"HolderHistory", testHolderHistory},
		{"PutNodeStatusMissing", testPutNodeStatusMissing},
		{"Delete", testDelete},
		{"ReturnsCopies", testReturnsCopies},
		{"WatchReplayThenChanges", testWatchReplay},
		{"WatchOrdering", testWatchOrdering},
		{"WatchSlowReader", testWatchSlowReader},
		{"WatchDeleteNotLost", testWatchDeleteNotLost},
		{"WatchDeleteThenRecreate", testWatchDeleteRecreate},
		{"WatchNoOpWriteSendsNothing", testWatchNoOp},
		{"WatchEndsWithContext", testWatchEnds},
		{"WatchersGetCopies", testWatchCopies},
		{"ConcurrentWriters", testConcurrentWriters},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, newStore(t)) })
	}
	// The optional writers' contracts, for the stores that have them.
	if _, ok := newStore(t).(store.Creator); ok {
		t.Run("CreateSpec", func(t *testing.T) { testCreateSpec(t, newStore(t)) })
	}
}

// testCreateSpec: a new load balancer reads back as PutSpec's would, and
// one already stored is replaced as PutSpec replaces it, its status and
// CreatedAt kept.
func testCreateSpec(t *testing.T, s store.Store) {
	c := s.(store.Creator)
	if err := c.CreateSpec(t.Context(), Sample("")); err == nil {
		t.Fatal("CreateSpec without UUID succeeded")
	}
	if err := c.CreateSpec(t.Context(), Sample("a")); err != nil {
		t.Fatalf("CreateSpec(a): %v", err)
	}
	want := Sample("a")
	want.Status.State = model.StatePending
	assertEqual(t, "Get after CreateSpec", mustGet(t, s, "a"), want)

	report := model.NodeStatus{Node: "node-a", State: model.StateActive, SpecHash: "h",
		UpdatedAt: time.Date(2025, 7, 1, 0, 0, 0, 0, time.UTC)}
	mustReport(t, s, "a", report)
	next := Sample("a")
	next.VIP = "127.10.0.9"
	if err := c.CreateSpec(t.Context(), next); err != nil {
		t.Fatalf("CreateSpec of a stored load balancer: %v", err)
	}
	want.VIP = "127.10.0.9"
	want.Status = summary(report)
	assertEqual(t, "Get after CreateSpec of a stored one", mustGet(t, s, "a"), want)
}

// Sample returns a LoadBalancer with every part of the model filled in, so
// that a round trip that drops a field shows.
func Sample(uuid string) *model.LoadBalancer {
	return &model.LoadBalancer{
		UUID:         uuid,
		Name:         "default/" + uuid,
		Provider:     model.ProviderHAProxy,
		VIP:          "127.10.0.1",
		FIP:          "127.20.0.1",
		RequestedFIP: "127.20.0.1",
		Placement: model.Placement{Active: "node-a", Standby: "node-b", RouterID: 42,
			ActiveAddress: "192.0.2.1", StandbyAddress: "2001:db8::2"},
		Sources: []model.Source{{Kind: "Ingress", Namespace: "default", Name: uuid, UID: "uid-" + uuid}},
		Listeners: []model.Listener{{
			Name: model.DefaultHTTPSListenerName, Protocol: model.ProtocolTerminatedHTTPS, Port: 443,
			DefaultPoolID: "p1",
			Certificates: []model.Certificate{{ID: "c1", Namespace: "default", Secret: "tls",
				Hosts: []string{"a.example"}, SHA256: "ab", NotAfter: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)}},
			Policies: []model.L7Policy{{ID: "l1", Position: 1, Action: model.ActionRedirectToPool, PoolID: "p1",
				Rules: []model.L7Rule{{Type: model.RulePath, Compare: model.CompareStartsWith, Value: "/api"}},
				Options: &model.PolicyOptions{HTTPSRedirect: true, RedirectURL: "https://b.example/", RedirectCode: 308,
					AllowSources: []string{"10.0.0.0/8"}, DenySources: []string{"10.6.0.0/16"}, MaxBodyBytes: 1 << 33,
					RedirectPrefix: "https://c.example", AppRoot: "/app", UpstreamHost: "in.example", RewritePath: "/v2/", StripPrefix: "/v1", RewriteRegex: "/api/v[0-9]+/(.*)", ForwardedPrefix: "/v2",
					CORS: &model.CORS{AllowOrigins: []string{"https://a.example"}, AllowMethods: []string{"GET"},
						AllowHeaders: []string{"X-A"}, ExposeHeaders: []string{"X-E"}, EchoRequestMethod: true, EchoRequestHeaders: true, RefuseOtherPreflights: true, AllowCredentials: true, MaxAgeSeconds: 600},
					BasicAuth: &model.BasicAuth{Realm: "Staff only", Namespace: "default", Secret: "users",
						Type: "auth-map", SHA256: "cd"},
					RateLimit:      &model.RateLimit{RequestsPerSecond: 5, RequestsPerMinute: 100, Connections: 2},
					DefaultBackend: &model.DefaultBackend{PoolID: "p1", RoutePoolID: "p0"},
					CustomErrors: &model.CustomErrors{PoolID: "p1", Codes: []int{404, 503}, Namespace: "default",
						Ingress: "web", Service: "web", ServicePort: "http"},
					ExternalAuth: &model.ExternalAuth{PoolID: "p1", Host: "auth.default.svc", Path: "/auth", Method: "GET",
						SigninURL: "https://login.example/start", ResponseHeaders: []string{"X-User"}},
					Canary: &model.Canary{PoolID: "p1", Weight: 10, WeightTotal: 100, Header: "X-Canary", HeaderValue: "v2", HeaderPattern: "^v[23]$",
						Cookie: "canary", Source: model.Source{Kind: "Ingress", Namespace: "default", Name: "canary"}},
					Redirect: &model.Redirect{Scheme: "https", Host: "d.example", Port: 8443, FullPath: "/to", Code: 301,
						PrefixRewrite: &model.PrefixRewrite{Prefix: "/a", Replacement: "/b"}},
					RequestHeaders:  []model.HeaderOp{{Op: model.HeaderRemove, Name: "X-A"}, {Op: model.HeaderSet, Name: "X-B", Value: "v"}},
					ResponseHeaders: []model.HeaderOp{{Op: model.HeaderAdd, Name: "X-C", Value: "w"}},
					PrefixRewrite:   &model.PrefixRewrite{Prefix: "/p", Replacement: ""}}}},
		}},
		Pools: []model.Pool{{ID: "p1", Name: "default_svc_80", Namespace: "default", Service: "svc", Port: "80",
			Algorithm: "roundrobin", HealthCheck: true, ConnectTimeout: 5 * time.Second, ServerTimeout: 90 * time.Second,
			Affinity: &model.CookieAffinity{Name: "route", Path: "/app", MaxAgeSeconds: 3600, MaxLifeSeconds: 7200, MaxIdleSeconds: 600, SameSite: "Lax", Secure: model.CookieSecureAlways},
			Tries:    2, ServiceUpstream: true, RetryStatuses: []int{502, 503}, RetryTimeout: true,
			Protocol: model.BackendGRPCS,
			Members:  []model.Member{{Address: "10.1.0.5", Port: 8080, Weight: 1, Target: "pod-1"}}}},
		CreatedAt: time.Date(2025, 6, 7, 8, 9, 10, 0, time.UTC),
	}
}

// GatewaySample is Sample with what HTTPRoutes add: a header and a query
// rule (Key), a FIXED_RESPONSE policy, a pool's fail share, a split of
// pools, a pool's request header changes, the Gateway listener
// hostnames of a shared port and strict SNI. Apart from
// Sample so that the pages drawn from Sample stay as they are.
func GatewaySample(uuid string) *model.LoadBalancer {
	lb := Sample(uuid)
	l := &lb.Listeners[0]
	l.Policies[0].Rules = append(l.Policies[0].Rules,
		model.L7Rule{Type: model.RuleHeader, Compare: model.CompareEqualTo, Key: "x-a", Value: "1"},
		model.L7Rule{Type: model.RuleQuery, Compare: model.CompareEqualTo, Key: "q", Value: "2"})
	l.Policies = append(l.Policies, model.L7Policy{ID: "l2", Position: 2, Action: model.ActionFixedResponse, StatusCode: 500,
		Rules: []model.L7Rule{{Type: model.RulePath, Compare: model.CompareStartsWith, Value: "/broken"}}})
	lb.Pools[0].FailWeight, lb.Pools[0].FailTotal = 1, 4
	l.ListenerHosts = []string{"", "*.wild.example", "a.example"}
	l.StrictSNI = true
	lb.Pools[0].RequestHeaders = []model.HeaderOp{{Op: model.HeaderSet, Name: "Backend", Value: "v1"}, {Op: model.HeaderRemove, Name: "X-R"}}
	// Both only to carry both through the store: render refuses a pool
	// with the two.
	lb.Pools[0].RewritePath, lb.Pools[0].PrefixRewrite = "/full", &model.PrefixRewrite{Prefix: "/prefix", Replacement: "/rewritten"}
	l.Policies[0].Options.Split = &model.Split{Pools: []model.PoolShare{{PoolID: "p1", Weight: 3}, {PoolID: "p0", Weight: 1}}, FailWeight: 2}
	return lb
}

func testGatewayFieldsRoundTrip(t *testing.T, s store.Store) {
	mustPut(t, s, GatewaySample("g"))
	want := GatewaySample("g")
	want.Status.State = model.StatePending
	assertEqual(t, "Get after PutSpec", mustGet(t, s, "g"), want)
}

// BackendTLSSample is Sample with what ingress-nginx's proxy-ssl-* and
// ssl-passthrough add: a pool's UpstreamTLS, a TCP pool and a listener's
// passthrough hosts. The CRD store's schema must carry each field, or
// the API server drops or refuses it.
func BackendTLSSample(uuid string) *model.LoadBalancer {
	lb := Sample(uuid)
	lb.Pools[0].Protocol = model.BackendHTTPS
	lb.Pools[0].UpstreamTLS = &model.UpstreamTLS{Verify: true, Name: "svc.default.svc", SNI: true,
		Namespace: "default", Secret: "backend-ca", CASHA256: strings.Repeat("a", 64), ClientSHA256: strings.Repeat("b", 64)}
	lb.Pools = append(lb.Pools, model.Pool{ID: "p2", Name: "default_tls_443", Namespace: "default", Service: "tls", Port: "443",
		Algorithm: "roundrobin", TCP: true, Members: []model.Member{{Address: "10.1.0.6", Port: 8443, Weight: 1, Target: "pod-2"}}})
	lb.Listeners[0].Passthrough = []model.PassthroughRoute{{Host: "tls.example", PoolID: "p2",
		Source: model.Source{Kind: "Ingress", Namespace: "default", Name: "tls"}}}
	return lb
}

func testBackendTLSFieldsRoundTrip(t *testing.T, s store.Store) {
	mustPut(t, s, BackendTLSSample("t"))
	want := BackendTLSSample("t")
	want.Status.State = model.StatePending
	assertEqual(t, "Get after PutSpec", mustGet(t, s, "t"), want)
}

func testGetMissing(t *testing.T, s store.Store) {
	_, err := s.Get(t.Context(), "missing")
	if !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Get(missing) error = %v, want store.ErrNotFound", err)
	}
}

func testPutGetRoundTrip(t *testing.T, s store.Store) {
	in := Sample("a")
	mustPut(t, s, in)
	want := Sample("a")
	want.Status.State = model.StatePending
	assertEqual(t, "Get after PutSpec", mustGet(t, s, "a"), want)
}

func testCreatedAtDefault(t *testing.T, s store.Store) {
	in := Sample("a")
	in.CreatedAt = time.Time{}
	before := time.Now().Add(-time.Second)
	mustPut(t, s, in)
	after := time.Now().Add(time.Second)
	got := mustGet(t, s, "a").CreatedAt
	if got.Before(before) || got.After(after) {
		t.Fatalf("CreatedAt = %v, want between %v and %v", got, before, after)
	}
}

func testPutSpecRequiresUUID(t *testing.T, s store.Store) {
	if err := s.PutSpec(t.Context(), Sample("")); err == nil {
		t.Fatal("PutSpec without UUID succeeded")
	}
}

func testListSorted(t *testing.T, s store.Store) {
	lbs, err := s.List(t.Context())
	if err != nil || len(lbs) != 0 {
		t.Fatalf("List of empty store = %d items, %v; want 0, nil", len(lbs), err)
	}
	for _, id := range []string{"c", "a", "b"} {
		mustPut(t, s, Sample(id))
	}
	lbs, err = s.List(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if got := uuids(lbs); fmt.Sprint(got) != "[a b c]" {
		t.Fatalf("List order = %v, want [a b c]", got)
	}
}

func testPutSpecKeepsStatus(t *testing.T, s store.Store) {
	mustPut(t, s, Sample("a"))
	report := model.NodeStatus{Node: "node-a", State: model.StateActive, SpecHash: "h",
		UpdatedAt: time.Date(2025, 7, 1, 0, 0, 0, 0, time.UTC)}
	mustReport(t, s, "a", report)
	next := Sample("a")
	next.VIP = "127.10.0.9"
	next.CreatedAt = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	next.Status = model.Status{State: model.StateError, Message: "controller must not win"}
	mustPut(t, s, next)

	want := Sample("a")
	want.VIP = "127.10.0.9"
	want.Status = summary(report)
	assertEqual(t, "Get after second PutSpec", mustGet(t, s, "a"), want)
}

// summary is the Status of a LoadBalancer whose active node made report
// and whose standby has not reported.
func summary(report model.NodeStatus, others ...model.NodeStatus) model.Status {
	nodes := append([]model.NodeStatus{report}, others...)
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].Node < nodes[j].Node })
	return model.Status{State: report.State, SpecHash: report.SpecHash, ConfigHash: report.ConfigHash,
		Message: report.Message, Node: report.Node, UpdatedAt: report.UpdatedAt, Nodes: nodes}
}

func testPutNodeStatus(t *testing.T, s store.Store) {
	mustPut(t, s, Sample("a"))
	report := model.NodeStatus{Node: "node-a", State: model.StateError, Message: "haproxy -c failed",
		SpecHash: "h0", ConfigHash: "c0", MembersUp: 1, Members: 3, MembersDown: []string{"10.1.0.5:8080", "[fd00::5]:8080"},
		RequestsPerSecond: 1200, ErrorShare: 0.046,
		RecentErrors: []model.RequestError{{First: time.Date(2026, 12, 2, 3, 0, 0, 7e6, time.UTC), Last: time.Date(2026, 12, 2, 3, 14, 9, 86e6, time.UTC),
			Count: 4213, Status: 502, Method: "GET", Host: "shop.example", Path: "/cart", Namespace: "team", Route: "shop", RouteKind: "Ingress",
			Service: "web", ServicePort: "80", Member: "10.1.0.5:8080", Pod: "web-7f9c", TerminationState: "SH--",
			RequestID: "eac14d8a-2460-4362-aef6-3e20e73e5348"}, {First: time.Date(2026, 12, 2, 3, 1, 0, 0, time.UTC),
			Last: time.Date(2026, 12, 2, 3, 1, 0, 0, time.UTC), Count: 1, Status: 503, TerminationState: "SC--"}}}
	mustReport(t, s, "a", report)
	want := Sample("a")
	want.Status = summary(report)
	assertEqual(t, "Get after PutNodeStatus", mustGet(t, s, "a"), want)
}

// The standby's report is kept beside the active's and does not change the
// summary; a second report from one node replaces its first.
func testPutNodeStatusBothNodes(t *testing.T, s store.Store) {
	mustPut(t, s, Sample("a"))
	active := model.NodeStatus{Node: "node-a", State: model.StateActive, SpecHash: "h1"}
	standby := model.NodeStatus{Node: "node-b", State: model.StateError, Message: "port taken"}
	mustReport(t, s, "a", standby)
	mustReport(t, s, "a", model.NodeStatus{Node: "node-a", State: model.StatePending})
	mustReport(t, s, "a", active)
	want := Sample("a")
	want.Status = summary(active, standby)
	assertEqual(t, "Get after both nodes reported", mustGet(t, s, "a"), want)
}

func testPutNodeStatusUnplacedNode(t *testing.T, s store.Store) {
	mustPut(t, s, Sample("a"))
	if err := s.PutNodeStatus(t.Context(), "a", model.NodeStatus{Node: "node-z", State: model.StateActive}); err != nil {
		t.Fatal(err)
	}
	want := Sample("a")
	want.Status.State = model.StatePending
	assertEqual(t, "Get after a report from a node not placed", mustGet(t, s, "a"), want)
}

// Failover: when the standby becomes active, its report is the summary,
// and the report of the node that left the placement is gone.
func testPlacementChangeMovesSummary(t *testing.T, s store.Store) {
	mustPut(t, s, Sample("a"))
	oldActive := model.NodeStatus{Node: "node-a", State: model.StateActive, SpecHash: "h1"}
	standby := model.NodeStatus{Node: "node-b", State: model.StateActive, SpecHash: "h1", ConfigHash: "c1"}
	mustReport(t, s, "a", oldActive)
	mustReport(t, s, "a", standby)
	moved := Sample("a")
	moved.Placement = model.Placement{Active: "node-b", Standby: "node-c"}
	mustPut(t, s, moved)
	want := Sample("a")
	want.Placement = moved.Placement
	want.Status = summary(standby)
	assertEqual(t, "Get after the standby became active", mustGet(t, s, "a"), want)
}

// A failover written as reports, then a placement change that drops the
// holder: each change of holder is appended once (the last one dated by
// the dropped holder's last report: summaries read no clock), and a spec
// write that changes nothing else keeps them.
func testHolderHistory(t *testing.T, s store.Store) {
	mustPut(t, s, Sample("a"))
	at := time.Date(2025, 7, 1, 0, 0, 0, 0, time.UTC)
	for i, r := range []model.NodeStatus{
		{Node: "node-a", VRRP: model.VRRPMaster}, {Node: "node-b", VRRP: model.VRRPBackup},
		{Node: "node-a", VRRP: model.VRRPFault}, {Node: "node-b", VRRP: model.VRRPMaster},
		{Node: "node-b", VRRP: model.VRRPMaster, MembersUp: 1, Members: 1}, // no change of holder
	} {
		r.State, r.UpdatedAt = model.StateActive, at.Add(time.Duration(i)*time.Second)
		mustReport(t, s, "a", r)
	}
	moved := Sample("a")
	moved.Placement = model.Placement{Active: "node-a", Standby: "node-c"}
	mustPut(t, s, moved)
	mustPut(t, s, moved)
	got := mustGet(t, s, "a").Status
	want := []model.HolderChange{{At: at, To: "node-a"}, {At: at.Add(2 * time.Second), From: "node-a"},
		{At: at.Add(3 * time.Second), To: "node-b"}, {At: at.Add(4 * time.Second), From: "node-b"}}
	g, _ := json.Marshal(got.History)
	w, _ := json.Marshal(want)
	if got.Holder != "" || string(g) != string(w) {
		t.Fatalf("holder %q, history %s; want none, %s", got.Holder, g, w)
	}
}

func testPutNodeStatusMissing(t *testing.T, s store.Store) {
	err := s.PutNodeStatus(t.Context(), "missing", model.NodeStatus{Node: "node-a", State: model.StateActive})
	if !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("PutNodeStatus(missing) error = %v, want store.ErrNotFound", err)
	}
	if _, err := s.Get(t.Context(), "missing"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("PutNodeStatus(missing) created an object (Get error = %v)", err)
	}
}

func mustReport(t *testing.T, s store.Store, uuid string, report model.NodeStatus) {
	t.Helper()
	if err := s.PutNodeStatus(t.Context(), uuid, report); err != nil {
		t.Fatalf("PutNodeStatus(%s, %s): %v", uuid, report.Node, err)
	}
}

func testDelete(t *testing.T, s store.Store) {
	mustPut(t, s, Sample("a"))
	mustPut(t, s, Sample("b"))
	if err := s.Delete(t.Context(), "a"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(t.Context(), "a"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Get after Delete error = %v, want store.ErrNotFound", err)
	}
	if err := s.Delete(t.Context(), "a"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("second Delete error = %v, want store.ErrNotFound", err)
	}
	lbs, err := s.List(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if got := uuids(lbs); fmt.Sprint(got) != "[b]" {
		t.Fatalf("List after Delete = %v, want [b]", got)
	}
}

func testReturnsCopies(t *testing.T, s store.Store) {
	in := Sample("a")
	mustPut(t, s, in)
	in.Pools[0].Members[0].Address = "changed-after-put"
	got := mustGet(t, s, "a")
	got.Listeners[0].Policies[0].Rules[0].Value = "/changed-after-get"
	lbs, err := s.List(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	lbs[0].Sources[0].Name = "changed-after-list"

	want := Sample("a")
	want.Status.State = model.StatePending
	assertEqual(t, "Get after callers changed their copies", mustGet(t, s, "a"), want)
}

func mustPut(t *testing.T, s store.Store, lb *model.LoadBalancer) {
	t.Helper()
	if err := s.PutSpec(t.Context(), lb); err != nil {
		t.Fatalf("PutSpec(%s): %v", lb.UUID, err)
	}
}

func mustGet(t *testing.T, s store.Store, uuid string) *model.LoadBalancer {
	t.Helper()
	lb, err := s.Get(t.Context(), uuid)
	if err != nil {
		t.Fatalf("Get(%s): %v", uuid, err)
	}
	return lb
}

// assertEqual compares through JSON, the form both stores keep, so that
// time.Time's location and monotonic reading do not matter.
func assertEqual(t *testing.T, what string, got, want *model.LoadBalancer) {
	t.Helper()
	g, _ := json.MarshalIndent(got, "", " ")
	w, _ := json.MarshalIndent(want, "", " ")
	if string(g) != string(w) {
		t.Fatalf("%s:\ngot  %s\nwant %s", what, g, w)
	}
}

func uuids(lbs []*model.LoadBalancer) []string {
	out := make([]string, len(lbs))
	for i, lb := range lbs {
		out[i] = lb.UUID
	}
	return out
}
