// Package conformance runs the Kubernetes Ingress conformance scenarios
// (kubernetes-sigs/ingress-controller-conformance, the .feature files kept
// unedited under shared/conformance/features) against pier.
//
// The step definitions reproduce the upstream runner's semantics and talk to
// the world only through a Cluster, so the same steps run against `pier run`
// and manifests on disk (FilesCluster) and against a Kubernetes API server
// with `pier controller` and `pier agent` (KubeCluster, run by
// ./kube's TestConformanceKubernetes). The files entry point is
// TestConformance:
//
//	PIER_CONFORMANCE=1 go test ./test/conformance -run TestConformance -v -timeout 30m
//
// Without PIER_CONFORMANCE=1 it skips, which is not a pass. PIER_BIN names
// the pier binary (else ./cmd/pier is built); PIER_CONFORMANCE_FEATURES
// (comma-separated files or folders, file:line allowed) replaces
// ../shared/conformance/features; PIER_CONFORMANCE_STATUS_TIMEOUT (60s),
// PIER_CONFORMANCE_ABSENT_TIMEOUT (10s), PIER_CONFORMANCE_POLL_INTERVAL (1s)
// and PIER_CONFORMANCE_SCALE_SETTLE (60s, as upstream) set the waits;
// PIER_CONFORMANCE_FORMAT the godog formats;
// PIER_CONFORMANCE_STOP_ON_FAILURE=1 stops at the first failed scenario;
// PIER_CONFORMANCE_KEEP=1 keeps the work folder (kept anyway on failure).
package conformance

import (
	"context"
	"fmt"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// Cluster is what the steps need from the environment pier runs in. Methods
// are called from one scenario at a time.
type Cluster interface {
	// NewNamespace returns a fresh namespace name for one scenario.
	NewNamespace(ctx context.Context) (string, error)
	// DeleteNamespace removes everything created in ns (the upstream
	// runner deletes the scenario's namespace after each scenario).
	DeleteNamespace(ctx context.Context, ns string) error
	// CreateBackend makes the equivalent of a Deployment
	// "<ingress>-<service>" with `replicas` echo pods and a Service
	// "<service>" (port = the Ingress port number, or DefaultNamedPort
	// named after the Ingress port name; target port EchoPort), and returns
	// once `replicas` endpoints are ready.
	CreateBackend(ctx context.Context, ns, ingressName, serviceName string, port networkingv1.ServiceBackendPort, replicas int) error
	// ScaleBackend changes the replica count of a backend CreateBackend
	// made and returns once that many endpoints are ready.
	ScaleBackend(ctx context.Context, ns, ingressName, serviceName string, replicas int) error
	// CreateTLSSecret stores a kubernetes.io/tls Secret.
	CreateTLSSecret(ctx context.Context, ns, name string, certPEM, keyPEM []byte) error
	// CreateIngress creates ing in ns as given (class included).
	CreateIngress(ctx context.Context, ns string, ing *networkingv1.Ingress) error
	// IngressStatus returns status.loadBalancer.ingress. It returns
	// (nil, nil) while the Ingress has no address, including while the
	// controller does not know it yet.
	IngressStatus(ctx context.Context, ns, name string) ([]networkingv1.IngressLoadBalancerIngress, error)
	// Ports are the ports requests go to on an Ingress address for plain
	// HTTP and for HTTPS: 80 and 443 on a real cluster.
	Ports() (httpPort, httpsPort int)
}

const (
	// IngressClass is the class the suite gives Ingresses that name none
	// (upstream flag --ingress-class, default "conformance"). Creating the
	// IngressClass is the cluster admin's job, not the scenarios'.
	IngressClass = "conformance"
	// IngressController is the controller name of pier's IngressClass.
	IngressController = "pier.dev/ingress-controller"
	// EchoPort is the echo container port Services target.
	EchoPort = 3000
	// DefaultNamedPort is the Service port used when the Ingress names
	// its backend port instead of numbering it.
	DefaultNamedPort = 8080
)

// backendRef is one Service an Ingress sends traffic to.
type backendRef struct {
	Service string
	Port    networkingv1.ServiceBackendPort
}

// backendServices lists the Services ing refers to, default backend first,
// then rules and paths in order. A Service named twice is listed once, with
// the port of its first mention: upstream keeps the first Deployment it
// makes for a name and skips the rest.
func backendServices(ing *networkingv1.Ingress) []backendRef {
	var refs []backendRef
	seen := map[string]bool{}
	add := func(b *networkingv1.IngressBackend) {
		if b == nil || b.Service == nil || seen[b.Service.Name] {
			return
		}
		seen[b.Service.Name] = true
		refs = append(refs, backendRef{Service: b.Service.Name, Port: b.Service.Port})
	}
	add(ing.Spec.DefaultBackend)
	for _, rule := range ing.Spec.Rules {
		if rule.HTTP == nil {
			continue
		}
		for i := range rule.HTTP.Paths {
			add(&rule.HTTP.Paths[i].Backend)
		}
	}
	return refs
}

// ingressFromSpec builds the Ingress of "an Ingress resource named X with
// this spec": the doc string is only the spec.
func ingressFromSpec(name, ns, spec string) (*networkingv1.Ingress, error) {
	if err := checkNamespace(ns); err != nil {
		return nil, err
	}
	ing := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
	if err := yaml.Unmarshal([]byte(spec), &ing.Spec); err != nil {
		return nil, fmt.Errorf("deserializing Ingress spec: %w", err)
	}
	defaultClass(ing)
	return ing, nil
}

// ingressFromManifest builds the Ingress of a doc string holding a whole
// Ingress manifest; the scenario's namespace replaces any given one.
func ingressFromManifest(ns, manifest string) (*networkingv1.Ingress, error) {
	if err := checkNamespace(ns); err != nil {
		return nil, err
	}
	ing := &networkingv1.Ingress{}
	if err := yaml.Unmarshal([]byte(manifest), ing); err != nil {
		return nil, fmt.Errorf("deserializing Ingress manifest: %w", err)
	}
	if ing.Name == "" {
		return nil, fmt.Errorf("ingress manifest has no metadata.name")
	}
	ing.Namespace = ns
	defaultClass(ing)
	return ing, nil
}

// defaultClass sets the suite's class on an Ingress that names none; an
// explicit class (ingress_class uses an invalid one) is kept.
func defaultClass(ing *networkingv1.Ingress) {
	if ing.Spec.IngressClassName == nil {
		class := IngressClass
		ing.Spec.IngressClassName = &class
	}
}

func checkNamespace(ns string) error {
	if ns == "" || ns == metav1.NamespaceDefault {
		return fmt.Errorf("ingress definitions in the default namespace are not allowed (%q): create a namespace first", ns)
	}
	return nil
}

// firstAddress picks the address requests go to: the first IP or hostname
// in status order, an entry's IP before its hostname, as upstream does.
func firstAddress(lbs []networkingv1.IngressLoadBalancerIngress) string {
	for _, lb := range lbs {
		if lb.IP != "" {
			return lb.IP
		}
		if lb.Hostname != "" {
			return lb.Hostname
		}
	}
	return ""
}
