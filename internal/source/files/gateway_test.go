package files

import (
	"path/filepath"
	"strings"
	"testing"
)

const gatewayDocs = `apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: pier, namespace: ignored}
spec: {controllerName: pier.dev/gateway-controller}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw}
spec:
  gatewayClassName: pier
  listeners: [{name: http, port: 80, protocol: HTTP}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: web, namespace: shop}
spec:
  parentRefs: [{name: gw, namespace: default}]
  rules: [{backendRefs: [{name: web, port: 80}]}]
---
apiVersion: v1
kind: Namespace
metadata: {name: shop, labels: {team: shop}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: typo}
spec:
  parentRefs: [{name: gw}]
  rules: [{backendRef: [{name: web, port: 80}]}]
---
apiVersion: gateway.networking.k8s.io/v1beta1
kind: HTTPRoute
metadata: {name: old}
spec: {}
`

// Gateway API documents reach the snapshot strictly decoded: cluster-scoped
// ones lose a namespace, namespaced ones default to "default", a typo and
// a version pier does not read are problems of their document only.
func TestLoadGatewayAPI(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "gw.yaml")
	writeFile(t, path, gatewayDocs)
	snap, problems := mustLoad(t, path)
	if got := names(snap.GatewayClasses); strings.Join(got, ",") != "pier" {
		t.Errorf("classes %v", got)
	}
	if got := names(snap.Gateways); strings.Join(got, ",") != "default/gw" {
		t.Errorf("gateways %v", got)
	}
	if got := names(snap.HTTPRoutes); strings.Join(got, ",") != "shop/web" {
		t.Errorf("routes %v", got)
	}
	if len(snap.Namespaces) != 1 || snap.Namespaces[0].Labels["team"] != "shop" {
		t.Errorf("namespaces %+v", snap.Namespaces)
	}
	if snap.Gateways[0].CreationTimestamp.IsZero() {
		t.Error("a Gateway without creationTimestamp must get the file's time (route precedence uses it)")
	}
	checkProblems(t, problems, path, []int{5, 6}, []string{"backendRef", "v1beta1"})
}

// A ReferenceGrant (v1beta1, the version of the v1.4 standard channel)
// reaches the snapshot; v1 is not a version pier reads yet.
func TestLoadReferenceGrant(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "grant.yaml")
	writeFile(t, path, `apiVersion: gateway.networking.k8s.io/v1beta1
kind: ReferenceGrant
metadata: {name: g, namespace: backends}
spec:
  from: [{group: gateway.networking.k8s.io, kind: HTTPRoute, namespace: shop}]
  to: [{group: "", kind: Service}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: ReferenceGrant
metadata: {name: v1}
spec: {from: [], to: []}
`)
	snap, problems := mustLoad(t, path)
	if got := names(snap.ReferenceGrants); strings.Join(got, ",") != "backends/g" {
		t.Errorf("grants %v", got)
	}
	if g := snap.ReferenceGrants[0]; len(g.Spec.From) != 1 || g.Spec.From[0].Namespace != "shop" || g.Spec.To[0].Kind != "Service" {
		t.Errorf("grant %+v", g.Spec)
	}
	checkProblems(t, problems, path, []int{2}, []string{"v1beta1"})
}

// A TCPRoute reaches the snapshot at v1alpha2 (the experimental channel
// up to v1.5) and at v1 (the standard channel since v1.6), the same
// fields either way; a typo is still a problem of its document only.
func TestLoadTCPRoute(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "tcp.yaml")
	writeFile(t, path, `apiVersion: gateway.networking.k8s.io/v1alpha2
kind: TCPRoute
metadata: {name: old, namespace: db}
spec:
  parentRefs: [{name: gw, namespace: default, sectionName: pg}]
  rules: [{backendRefs: [{name: pg, port: 5432}]}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: TCPRoute
metadata: {name: new, namespace: db}
spec:
  parentRefs: [{name: gw, namespace: default}]
  rules: [{name: main, backendRefs: [{name: pg, port: 5432, weight: 2}]}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: TCPRoute
metadata: {name: typo}
spec:
  parentRefs: [{name: gw}]
  rules: [{backendRef: [{name: pg, port: 5432}]}]
`)
	snap, problems := mustLoad(t, path)
	if got := names(snap.TCPRoutes); strings.Join(got, ",") != "db/new,db/old" {
		t.Fatalf("tcproutes %v", got)
	}
	if r := snap.TCPRoutes[0]; len(r.Spec.Rules) != 1 || *r.Spec.Rules[0].BackendRefs[0].Weight != 2 {
		t.Errorf("the v1 TCPRoute read as %+v", r.Spec)
	}
	checkProblems(t, problems, path, []int{3}, []string{"backendRef"})
}

// A TLSRoute reaches the snapshot at v1 (the standard channel since
// v1.5), v1alpha3 and v1alpha2, the same fields each way, its version
// kept; a typo is a problem of its document only.
func TestLoadTLSRoute(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "tls.yaml")
	writeFile(t, path, `apiVersion: gateway.networking.k8s.io/v1
kind: TLSRoute
metadata: {name: a, namespace: apps}
spec:
  parentRefs: [{name: gw, namespace: default, sectionName: tls}]
  hostnames: ["*.apps.example"]
  rules: [{name: main, backendRefs: [{name: apps, port: 443, weight: 2}]}]
---
apiVersion: gateway.networking.k8s.io/v1alpha3
kind: TLSRoute
metadata: {name: b, namespace: apps}
spec:
  parentRefs: [{name: gw, namespace: default}]
  hostnames: [b.example]
  rules: [{backendRefs: [{name: b, port: 443}]}]
---
apiVersion: gateway.networking.k8s.io/v1alpha2
kind: TLSRoute
metadata: {name: c, namespace: apps}
spec:
  parentRefs: [{name: gw, namespace: default}]
  hostnames: [c.example]
  rules: [{backendRefs: [{name: c, port: 443}]}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: TLSRoute
metadata: {name: typo}
spec:
  parentRefs: [{name: gw}]
  hostname: [d.example]
  rules: [{backendRefs: [{name: d, port: 443}]}]
`)
	snap, problems := mustLoad(t, path)
	if got := names(snap.TLSRoutes); strings.Join(got, ",") != "apps/a,apps/b,apps/c" {
		t.Fatalf("tlsroutes %v", got)
	}
	if r := snap.TLSRoutes[0]; len(r.Spec.Hostnames) != 1 || r.Spec.Hostnames[0] != "*.apps.example" ||
		len(r.Spec.Rules) != 1 || *r.Spec.Rules[0].BackendRefs[0].Weight != 2 {
		t.Errorf("the v1 TLSRoute read as %+v", r.Spec)
	}
	for i, v := range []string{"v1", "v1alpha3", "v1alpha2"} {
		if got := snap.TLSRoutes[i].APIVersion; got != "gateway.networking.k8s.io/"+v {
			t.Errorf("%s read at %q, want %s", snap.TLSRoutes[i].Name, got, v)
		}
	}
	checkProblems(t, problems, path, []int{4}, []string{"hostname"})
}

// A v1 ListenerSet reaches the snapshot as pier's own type, its
// listeners' fields inline; a typo is a problem of its document only.
func TestLoadListenerSet(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "ls.yaml")
	writeFile(t, path, `apiVersion: gateway.networking.k8s.io/v1
kind: ListenerSet
metadata: {name: team, namespace: team}
spec:
  parentRef: {name: gw, namespace: default}
  listeners:
  - {name: web, port: 80, protocol: HTTP, hostname: team.example, allowedRoutes: {namespaces: {from: Same}}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: ListenerSet
metadata: {name: typo, namespace: team}
spec:
  parentRef: {name: gw, namespace: default}
  listeners:
  - {name: web, port: 80, protocol: HTTP, hostnme: team.example}
`)
	snap, problems := mustLoad(t, path)
	if got := names(snap.ListenerSets); strings.Join(got, ",") != "team/team" {
		t.Fatalf("listenersets %v", got)
	}
	ls := snap.ListenerSets[0]
	if ls.Spec.ParentRef.Name != "gw" || len(ls.Spec.Listeners) != 1 || ls.Spec.Listeners[0].Port != 80 ||
		ls.Spec.Listeners[0].Hostname == nil || *ls.Spec.Listeners[0].Hostname != "team.example" {
		t.Errorf("read as %+v", ls.Spec)
	}
	checkProblems(t, problems, path, []int{2}, []string{"hostnme"})
}
