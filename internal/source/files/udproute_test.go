package files

import (
	"path/filepath"
	"strings"
	"testing"
)

// UDPRoutes are read at v1alpha2 and v1 (v1.7.0's experimental channel
// serves both), strictly.
func TestLoadUDPRoute(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "udp.yaml")
	writeFile(t, path, `apiVersion: gateway.networking.k8s.io/v1alpha2
kind: UDPRoute
metadata: {name: old, namespace: dns}
spec:
  parentRefs: [{name: gw, namespace: default, sectionName: dns}]
  rules: [{backendRefs: [{name: coredns, port: 53}]}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: UDPRoute
metadata: {name: new, namespace: dns}
spec:
  parentRefs: [{name: gw, namespace: default}]
  rules: [{name: main, backendRefs: [{name: coredns, port: 53, weight: 2}]}]
---
apiVersion: gateway.networking.k8s.io/v1alpha2
kind: UDPRoute
metadata: {name: typo}
spec:
  parentRefs: [{name: gw}]
  rules: [{backendRef: [{name: coredns, port: 53}]}]
`)
	snap, problems := mustLoad(t, path)
	if got := names(snap.UDPRoutes); strings.Join(got, ",") != "dns/new,dns/old" {
		t.Fatalf("udproutes %v", got)
	}
	if r := snap.UDPRoutes[0]; len(r.Spec.Rules) != 1 || *r.Spec.Rules[0].BackendRefs[0].Weight != 2 {
		t.Errorf("the v1 UDPRoute read as %+v", r.Spec)
	}
	checkProblems(t, problems, path, []int{3}, []string{"backendRef"})
}
