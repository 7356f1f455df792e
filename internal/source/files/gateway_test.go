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
