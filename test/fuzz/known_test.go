package fuzz

import (
	"os"
	"path/filepath"
	"testing"

	"pier.dev/pier/internal/source/files"
	"pier.dev/pier/internal/translate"
)

// Regression tests for holes found while fuzzing, outside this package.
// A skipped one is still open; remove its Skip with the fix.

// loadManifest runs one manifest through files.Load and translation.
func loadManifest(t *testing.T, doc string) *translate.Result {
	t.Helper()
	path := filepath.Join(t.TempDir(), "in.yaml")
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	snap, _, err := files.Load([]string{path})
	if err != nil {
		t.Fatal(err)
	}
	opts := translateOptions()
	opts.TakeClassless = true
	return translate.Ingresses(snap, opts)
}

// TestAnnotationKeyEscapedInField: files.Load does not validate
// annotation keys as the apiserver does, so an unknown pier.dev/ key may
// hold a line feed or a bidi override; translation once wrote it raw
// into Problem.Field, from where it reached Events and logs raw.
func TestAnnotationKeyEscapedInField(t *testing.T) {
	res := loadManifest(t, "apiVersion: networking.k8s.io/v1\nkind: Ingress\n"+
		"metadata: {name: a, annotations: {\"pier.dev/x\\n\\u202e\": v}}\n"+
		"spec: {defaultBackend: {service: {name: web, port: {number: 80}}}}\n")
	checkProblems(t, res.Problems)
}

// TestKnownUnrenderableMember is a regression test: translation used to
// keep endpoint addresses that netip parses but the renderer refuses
// (0.0.0.0, 224.0.0.1), so the whole LoadBalancer stopped rendering, and
// through a pier.dev/load-balancer group one tenant's EndpointSlice took
// down every tenant of the group. Such endpoints are now skipped.
func TestKnownUnrenderableMember(t *testing.T) {
	res := loadManifest(t, `apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: a, annotations: {pier.dev/load-balancer: g}}
spec: {defaultBackend: {service: {name: web, port: {number: 80}}}}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: b, namespace: other, annotations: {pier.dev/load-balancer: g}}
spec: {rules: [{host: b.example, http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}]}}]}
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: other}
spec: {ports: [{port: 80}]}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: web-1, namespace: other, labels: {kubernetes.io/service-name: web}}
addressType: IPv4
ports: [{port: 8080}]
endpoints: [{addresses: ["0.0.0.0", "224.0.0.1", "10.1.0.1"]}]
`)
	for uuid, r := range renderAll(res) {
		if r.err != nil {
			t.Fatalf("load balancer %s does not render: %v", uuid, r.err)
		}
	}
}
