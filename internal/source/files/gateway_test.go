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
