package faults

import (
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"pier.dev/pier/test/harness"
)

// ns is the namespace of every object the tests write.
const ns = "demo"

const ingressClass = `apiVersion: networking.k8s.io/v1
kind: IngressClass
metadata: {name: pier}
spec: {controller: pier.dev/ingress-controller}
`

// pod is one endpoint: an echo backend on a loopback port.
type pod struct {
	name string
	port int
}

// backendYAML is a Service with a named port and one EndpointSlice per pod
// (a slice's ports apply to all its endpoints, and every echo backend
// listens on its own port).
func backendYAML(svc string, pods []pod) string {
	var b strings.Builder
	fmt.Fprintf(&b, `apiVersion: v1
kind: Service
metadata: {name: %s, namespace: %s}
spec:
  ports: [{name: http, port: 80}]
`, svc, ns)
	if len(pods) == 0 {
		// An empty slice keeps the Service known with no endpoints.
		fmt.Fprintf(&b, `---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: %s-empty, namespace: %s, labels: {kubernetes.io/service-name: %s}}
addressType: IPv4
ports: [{name: http, port: 1}]
endpoints: []
`, svc, ns, svc)
	}
	for _, p := range pods {
		fmt.Fprintf(&b, `---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: %s-%s, namespace: %s, labels: {kubernetes.io/service-name: %s}}
addressType: IPv4
ports: [{name: http, port: %d}]
endpoints:
  - addresses: ["127.0.0.1"]
    conditions: {ready: true}
    targetRef: {kind: Pod, name: %s}
`, svc, p.name, ns, svc, p.port, p.name)
	}
	return b.String()
}

// ingress describes an Ingress; every path is a Prefix.
type ingress struct {
	name, group, balance string
	rules                []rule
	tlsSecret            string
	tlsHosts             []string
}

type rule struct {
	host  string
	paths map[string]string // path → Service
}

func (in ingress) yaml() string {
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: %s\n  namespace: %s\n", in.name, ns)
	if in.group != "" || in.balance != "" {
		b.WriteString("  annotations:\n")
		if in.group != "" {
			fmt.Fprintf(&b, "    pier.dev/load-balancer: %s\n", in.group)
		}
		if in.balance != "" {
			fmt.Fprintf(&b, "    pier.dev/balance: %s\n", in.balance)
		}
	}
	b.WriteString("spec:\n  ingressClassName: pier\n")
	if in.tlsSecret != "" {
		fmt.Fprintf(&b, "  tls:\n    - secretName: %s\n      hosts: [%s]\n", in.tlsSecret, strings.Join(in.tlsHosts, ", "))
	}
	b.WriteString("  rules:\n")
	for _, r := range in.rules {
		fmt.Fprintf(&b, "    - host: %s\n      http:\n        paths:\n", r.host)
		paths := make([]string, 0, len(r.paths))
		for p := range r.paths {
			paths = append(paths, p)
		}
		sort.Strings(paths)
		for _, p := range paths {
			fmt.Fprintf(&b, "          - path: %s\n            pathType: Prefix\n"+
				"            backend: {service: {name: %s, port: {name: http}}}\n", p, r.paths[p])
		}
	}
	return b.String()
}

// simple is an Ingress with one host routing / to svc.
func simple(name, group, host, svc string) ingress {
	return ingress{name: name, group: group, rules: []rule{{host: host, paths: map[string]string{"/": svc}}}}
}

// tlsSecretYAML is a kubernetes.io/tls Secret with the PEM as stringData.
func tlsSecretYAML(name string, certPEM, keyPEM []byte) string {
	indent := func(b []byte) string {
		return "      " + strings.ReplaceAll(strings.TrimSpace(string(b)), "\n", "\n      ")
	}
	return fmt.Sprintf(`apiVersion: v1
kind: Secret
metadata: {name: %s, namespace: %s}
type: kubernetes.io/tls
stringData:
  tls.crt: |
%s
  tls.key: |
%s
`, name, ns, indent(certPEM), indent(keyPEM))
}

// write puts one manifest file into dir atomically (pier never reads half
// a file).
func write(t *testing.T, dir, file, content string) {
	t.Helper()
	harness.WriteFile(t, filepath.Join(dir, file), content)
}

// sharedGroupName is the display name of group "shared" of namespace ns:
// groups are per namespace unless an administrator shares them.
const sharedGroupName = "group:" + ns + "/shared"
