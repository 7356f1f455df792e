package translate

import (
	"fmt"
	"reflect"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"pier.dev/pier/internal/annotation"
	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/source"
)

// GatewaysForTest is gatewayapi.Translate, set by gatewayapi_test.go.
var GatewaysForTest func(*source.Snapshot, Options) *Result

// fullTranslate is the pipeline's translation: Ingresses, native
// Services and Gateways, merged.
func fullTranslate(snap *source.Snapshot, opts Options) *Result {
	res := Ingresses(snap, opts)
	res.Merge(Services(snap, opts))
	res.Merge(GatewaysForTest(snap, opts))
	return res
}

// endpointFixture: web is shared by two load balancers of their own, a
// group (which also has a default backend, errors) and an Ingress with
// only a default backend; api has a named port; up serves through its
// ClusterIP (service-upstream); dns is a native Service.
func endpointFixture(t *testing.T) *source.Snapshot {
	t.Helper()
	rule := func(host, svc, port string) string {
		return `
  - host: ` + host + `
    http:
      paths:
      - path: /
        pathType: Prefix
        backend: {service: {name: ` + svc + `, port: ` + port + `}}`
	}
	ing := func(name string, age int, annotations, spec string) *networkingv1.Ingress {
		return ingressYAML(t, "shop", age, "metadata:\n  name: "+name+"\n  annotations: {"+annotations+"}\nspec:\n"+spec+"\n")
	}
	group := annotation.LoadBalancer + ": shared"
	snap := &source.Snapshot{
		IngressClasses: []*networkingv1.IngressClass{ourClass("pier", true)},
		Ingresses: []*networkingv1.Ingress{
			ing("a", 0, "", "  rules:"+rule("a.example", "web", "{number: 80}")+rule("api.example", "api", "{name: http}")),
			ing("b", 1, "", "  rules:"+rule("b.example", "web", "{number: 80}")),
			ing("g1", 2, group, "  rules:"+rule("g1.example", "web", "{number: 80}")),
			ing("g2", 3, group, "  defaultBackend: {service: {name: errors, port: {number: 80}}}\n  rules:"+
				rule("g2.example", "api", "{name: http}")),
			ing("d", 4, "", "  defaultBackend: {service: {name: web, port: {number: 80}}}"),
			ing("u", 5, annotation.NginxPrefix+"service-upstream: \"true\"", "  rules:"+rule("u.example", "up", "{number: 80}")),
		},
		Services: []*corev1.Service{
			serviceYAML(t, "metadata: {name: web}\nspec: {clusterIP: 10.96.0.1, ports: [{port: 80, protocol: TCP}]}"),
			serviceYAML(t, "metadata: {name: api}\nspec: {clusterIP: 10.96.0.2, ports: [{name: http, port: 8080, protocol: TCP}]}"),
			serviceYAML(t, "metadata: {name: errors}\nspec: {clusterIP: 10.96.0.3, ports: [{port: 80, protocol: TCP}]}"),
			serviceYAML(t, "metadata: {name: up}\nspec: {clusterIP: 10.96.0.4, ports: [{port: 80, protocol: TCP}]}"),
			serviceYAML(t, dnsSvc),
		},
	}
	for _, s := range []struct{ svc, port, addr string }{
		{"web", "", "10.244.1.1"}, {"api", "http", "10.244.2.1"}, {"errors", "", "10.244.3.1"},
		{"up", "", "10.244.4.1"}, {"dns", "dns-tcp", "10.244.0.2"},
	} {
		snap.EndpointSlices = append(snap.EndpointSlices, endpointSlice(t, s.svc, s.port, s.addr))
	}
	snap.EndpointSlices = append(snap.EndpointSlices, sliceYAML(t, dnsSlice))
	return snap
}

// endpointSlice is a slice of svc with one ready endpoint at addr, port
// 3000 named port.
func endpointSlice(t *testing.T, svc, port, addrs string) *discoveryv1.EndpointSlice {
	t.Helper()
	return sliceYAML(t, `
metadata: {name: `+svc+`-1, labels: {kubernetes.io/service-name: `+svc+`}}
addressType: IPv4
ports: [{name: "`+port+`", port: 3000, protocol: TCP}]
endpoints: [{addresses: [`+addrs+`], targetRef: {kind: Pod, name: `+svc+`-pod}}]
`)
}

// withSlice returns a copy of snap whose slice of the same name as es is es.
func withSlice(snap *source.Snapshot, es *discoveryv1.EndpointSlice) *source.Snapshot {
	next := *snap
	next.EndpointSlices = nil
	for _, old := range snap.EndpointSlices {
		if old.Name == es.Name {
			old = es
		}
		next.EndpointSlices = append(next.EndpointSlices, old)
	}
	return &next
}

// TestEndpointMembersEqualsFullTranslate: for endpoint changes of Services
// used by several load balancers, by a group, as a default backend, with
// a named port, or through the ClusterIP, the incremental result equals a
// full translation of the new snapshot; load balancers that do not use
// the changed Service are the previous result's own.
func TestEndpointMembersEqualsFullTranslate(t *testing.T) {
	opts := DefaultOptions()
	base := endpointFixture(t)
	prev := fullTranslate(base, opts)
	if len(prev.Problems) != 0 {
		t.Fatalf("fixture has problems: %v", prev.Problems)
	}
	tests := []struct {
		name    string
		slice   *discoveryv1.EndpointSlice
		changed string
		touched int // load balancers whose members change
	}{
		{"shared by two load balancers, a group and a default backend", endpointSlice(t, "web", "", "10.244.1.7, 10.244.1.8"), "shop/web", 4},
		{"named port", endpointSlice(t, "api", "http", "10.244.2.9"), "shop/api", 2},
		{"a group's default backend", endpointSlice(t, "errors", "", "10.244.3.9"), "shop/errors", 1},
		{"no endpoint left", endpointSlice(t, "web", "", ""), "shop/web", 4},
		{"a port the Service does not have", endpointSlice(t, "api", "grpc", "10.244.2.9"), "shop/api", 2},
		{"service-upstream: the ClusterIP stays", endpointSlice(t, "up", "", "10.244.4.9"), "shop/up", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			next := withSlice(base, tt.slice)
			got, patched, ok := EndpointMembers(prev, nil, nil, next, map[string]bool{tt.changed: true}, opts)
			if !ok {
				t.Fatal("EndpointMembers refused a change of members only")
			}
			// With the pool index, only the load balancers it names are
			// looked at: the same result.
			indexed, indexedPatched, ok := EndpointMembers(prev, IndexPools(prev), nil, next, map[string]bool{tt.changed: true}, opts)
			if !ok || !reflect.DeepEqual(indexed, got) || !reflect.DeepEqual(indexedPatched, patched) {
				t.Fatalf("with the pool index: ok %v, result differs: %v, patched %d, want %d",
					ok, !reflect.DeepEqual(indexed, got), len(indexedPatched), len(patched))
			}
			// With the endpoint index, built for next or moved along from
			// base, the changed Services' objects are found without a
			// pass: the same result again.
			moved := IndexEndpoints(base)
			moved.Update(base, next)
			for name, objects := range map[string]*EndpointIndex{"built": IndexEndpoints(next), "moved": moved} {
				viaIndex, viaIndexPatched, ok := EndpointMembers(prev, IndexPools(prev), objects, next, map[string]bool{tt.changed: true}, opts)
				if !ok || !reflect.DeepEqual(viaIndex, got) || !reflect.DeepEqual(viaIndexPatched, patched) {
					t.Fatalf("with the endpoint index (%s): ok %v, result differs: %v, patched %d, want %d",
						name, ok, !reflect.DeepEqual(viaIndex, got), len(viaIndexPatched), len(patched))
				}
			}
			want := fullTranslate(next, opts)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("incremental result differs from a full translation:\n got %s\nwant %s", describeResult(got), describeResult(want))
			}
			var touched []*model.LoadBalancer
			for i, lb := range got.LoadBalancers {
				if lb != prev.LoadBalancers[i] {
					touched = append(touched, lb)
				}
			}
			if len(touched) != tt.touched {
				t.Errorf("%d load balancers copied, want %d", len(touched), tt.touched)
			}
			if !slices.Equal(patched, touched) {
				t.Errorf("patched lists %d load balancers, %d were copied", len(patched), len(touched))
			}
			if !reflect.DeepEqual(prev, fullTranslate(endpointFixture(t), opts)) {
				t.Error("EndpointMembers changed the previous result")
			}
		})
	}
}

// TestEndpointMembersFallsBack: what members alone cannot express is left
// to a full translation.
func TestEndpointMembersFallsBack(t *testing.T) {
	opts := DefaultOptions()
	base := endpointFixture(t)
	prev := fullTranslate(base, opts)
	if _, _, ok := EndpointMembers(prev, nil, nil, withSlice(base, endpointSlice(t, "dns", "dns-tcp", "10.244.0.9")),
		map[string]bool{"shop/dns": true}, opts); ok {
		t.Error("a native Service's endpoints were patched")
	}
	if _, _, ok := EndpointMembers(prev, nil, nil, withSlice(base, endpointSlice(t, "web", "", "127.0.0.1")),
		map[string]bool{"shop/web": true}, opts); ok {
		t.Error("a refused endpoint (its warning) was patched")
	}
	routed := withSlice(base, endpointSlice(t, "web", "", "10.244.1.9"))
	routed.HTTPRoutes = []*gwv1.HTTPRoute{{Spec: gwv1.HTTPRouteSpec{Rules: []gwv1.HTTPRouteRule{{
		BackendRefs: []gwv1.HTTPBackendRef{{BackendRef: gwv1.BackendRef{BackendObjectReference: gwv1.BackendObjectReference{
			Name: "web", Namespace: ptrTo(gwv1.Namespace("shop"))}}}}}}}}}
	if _, _, ok := EndpointMembers(prev, nil, nil, routed, map[string]bool{"shop/web": true}, opts); ok {
		t.Error("a Service an HTTPRoute names was patched")
	}
	if _, _, ok := EndpointMembers(nil, nil, nil, base, map[string]bool{"shop/web": true}, opts); ok {
		t.Error("patched without a previous result")
	}
}

func describeResult(r *Result) string {
	s := ""
	for _, lb := range r.LoadBalancers {
		s += "\n  " + lb.Name + ":"
		for _, p := range lb.Pools {
			s += " " + p.Name + "=" + membersString(p.Members)
		}
	}
	for _, p := range r.Problems {
		s += "\n  problem " + p.Name + " " + p.Reason
	}
	return s
}

func membersString(ms []model.Member) string {
	s := "["
	for _, m := range ms {
		s += m.Address + " "
	}
	return s + "]"
}

// TestServiceSet: a few Services are compared one by one, many go in a
// map; both answer the same.
func TestServiceSet(t *testing.T) {
	for _, n := range []int{0, 1, fewServices, fewServices + 1, 50} {
		names := map[string]bool{}
		for i := range n {
			names[fmt.Sprintf("ns-%d/svc-%d", i%3, i)] = true
		}
		set := newServiceSet(names)
		if (set.many != nil) != (n > fewServices) {
			t.Errorf("%d Services: map used = %v", n, set.many != nil)
		}
		for i := range n {
			if !set.has(fmt.Sprintf("ns-%d", i%3), fmt.Sprintf("svc-%d", i)) {
				t.Errorf("%d Services: svc-%d missing", n, i)
			}
			if set.has(fmt.Sprintf("ns-%d", (i+1)%3), fmt.Sprintf("svc-%d", i)) {
				t.Errorf("%d Services: svc-%d found in another namespace", n, i)
			}
		}
		if set.has("ns-0", "svc-x") || set.has("", "") {
			t.Errorf("%d Services: found one not in the set", n)
		}
	}
}

// TestPoolIndex: each load balancer is named once per Service however
// many pools of it it has, and once for several changed Services.
func TestPoolIndex(t *testing.T) {
	pool := func(ns, svc, port string) model.Pool { return model.Pool{Namespace: ns, Service: svc, Port: port} }
	res := &Result{LoadBalancers: []*model.LoadBalancer{
		{UUID: "0", Pools: []model.Pool{pool("a", "web", "80"), pool("a", "web", "8080"), pool("a", "api", "80")}},
		{UUID: "1", Pools: []model.Pool{pool("a", "api", "80")}},
		{UUID: "2"},
		{UUID: "3", Pools: []model.Pool{pool("b", "web", "80")}},
	}}
	pools := IndexPools(res)
	for _, tc := range []struct {
		changed []string
		want    []int
	}{
		{[]string{"a/web"}, []int{0}},
		{[]string{"a/api"}, []int{0, 1}},
		{[]string{"a/web", "a/api", "b/web"}, []int{0, 1, 3}},
		{[]string{"c/none"}, nil},
	} {
		names := map[string]bool{}
		for _, n := range tc.changed {
			names[n] = true
		}
		if got := pools.of(newServiceSet(names)); !slices.Equal(got, tc.want) {
			t.Errorf("%v: places %v, want %v", tc.changed, got, tc.want)
		}
	}
	many := map[string]bool{"a/web": true}
	for i := range fewServices + 1 {
		many[fmt.Sprintf("z/svc-%d", i)] = true
	}
	if got := pools.of(newServiceSet(many)); !slices.Equal(got, []int{0}) {
		t.Errorf("many Services: places %v, want [0]", got)
	}
}
