package files

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// BenchmarkReloadOneChanged times a reload after one small file changed,
// beside one big file of 1,000 or 3,000 Ingresses with their Services and
// slices. The big file is older than the racy window, as files present
// before a change are: a file written less than racyWindow before it was
// read is read again on every load (and only hashed, not decoded).
//
// "renamed" replaces a Service by one of another name (the snapshot is
// assembled afresh); "endpoint" changes the address of an EndpointSlice
// under the same name (the previous snapshot is patched).
func BenchmarkReloadOneChanged(b *testing.B) {
	for _, n := range []int{1000, 3000} {
		b.Run(fmt.Sprintf("ingresses=%d/renamed", n), func(b *testing.B) {
			benchReload(b, n, func(i int) string { return svcYAML(fmt.Sprint("s", i%2)) })
		})
		b.Run(fmt.Sprintf("ingresses=%d/endpoint", n), func(b *testing.B) {
			benchReload(b, n, func(i int) string {
				return fmt.Sprintf("apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\n"+
					"metadata: {name: flip, labels: {kubernetes.io/service-name: flip}}\naddressType: IPv4\n"+
					"endpoints: [{addresses: [10.0.0.%d]}]\n", 1+i%2)
			})
		})
	}
}

func benchReload(b *testing.B, n int, flip func(i int) string) {
	dir := b.TempDir()
	writeBigManifest(b, filepath.Join(dir, "00-present.yaml"), n)
	time.Sleep(racyWindow + 100*time.Millisecond)
	l := NewLoader([]string{dir}, nil)
	if _, _, _, err := l.Load(); err != nil {
		b.Fatal(err)
	}
	reads := 0
	b.ResetTimer()
	for i := range b.N {
		if err := os.WriteFile(filepath.Join(dir, "10-flip.yaml"), []byte(flip(i)), 0o644); err != nil {
			b.Fatal(err)
		}
		if _, _, changed, err := l.Load(); err != nil || !changed {
			b.Fatal("no change", err)
		}
		reads += l.reads
	}
	b.ReportMetric(float64(reads)/float64(b.N), "files-read/op")
	b.ReportMetric(float64(l.patched)/float64(b.N), "patched/op")
}

// writeBigManifest writes n Ingresses, each with its Service and
// EndpointSlice, into one file, as bench/scale_test.go does.
func writeBigManifest(tb testing.TB, path string, n int) {
	tb.Helper()
	docs := make([]string, 0, n)
	for i := range n {
		name := fmt.Sprintf("app-%05d", i)
		docs = append(docs, fmt.Sprintf(`apiVersion: v1
kind: Service
metadata: {name: %[1]s, namespace: team}
spec: {ports: [{port: 80}]}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: %[1]s-1, namespace: team, labels: {kubernetes.io/service-name: %[1]s}}
addressType: IPv4
ports: [{port: 8080}]
endpoints: [{addresses: [10.244.0.1]}]
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: %[1]s, namespace: team}
spec:
  rules:
  - host: %[1]s.example
    http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: %[1]s, port: {number: 80}}}}]}
`, name))
	}
	if err := os.WriteFile(path, []byte(strings.Join(docs, "---\n")), 0o644); err != nil {
		tb.Fatal(err)
	}
}
