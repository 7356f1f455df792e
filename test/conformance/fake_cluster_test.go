package conformance

import (
	"context"
	"fmt"
	"sync"

	networkingv1 "k8s.io/api/networking/v1"
)

// recordingCluster is a Cluster that does nothing but record calls and
// answer IngressStatus from a script, for testing the step layer.
type recordingCluster struct {
	mu sync.Mutex

	httpPort, httpsPort int
	// status answers IngressStatus calls in turn; the last one repeats.
	status []statusAnswer
	calls  int

	namespaces []string
	deleted    []string
	backends   []string // "ns/ingress/service/port/replicas"
	scaled     []string // "ns/ingress/service/replicas"
	secrets    []string // "ns/name"
	ingresses  []*networkingv1.Ingress
}

type statusAnswer struct {
	lbs []networkingv1.IngressLoadBalancerIngress
	err error
}

func ip(addr string) statusAnswer {
	return statusAnswer{lbs: []networkingv1.IngressLoadBalancerIngress{{IP: addr}}}
}

func (c *recordingCluster) NewNamespace(context.Context) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ns := fmt.Sprintf("ns-%d", len(c.namespaces)+1)
	c.namespaces = append(c.namespaces, ns)
	return ns, nil
}

func (c *recordingCluster) DeleteNamespace(_ context.Context, ns string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.deleted = append(c.deleted, ns)
	return nil
}

func (c *recordingCluster) CreateBackend(_ context.Context, ns, ing, svc string, port networkingv1.ServiceBackendPort, replicas int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := port.Name
	if p == "" {
		p = fmt.Sprint(port.Number)
	}
	c.backends = append(c.backends, fmt.Sprintf("%s/%s/%s/%s/%d", ns, ing, svc, p, replicas))
	return nil
}

func (c *recordingCluster) ScaleBackend(_ context.Context, ns, ing, svc string, replicas int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.scaled = append(c.scaled, fmt.Sprintf("%s/%s/%s/%d", ns, ing, svc, replicas))
	return nil
}

func (c *recordingCluster) CreateTLSSecret(_ context.Context, ns, name string, _, _ []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.secrets = append(c.secrets, ns+"/"+name)
	return nil
}

func (c *recordingCluster) CreateIngress(_ context.Context, ns string, ing *networkingv1.Ingress) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ing.Namespace != ns {
		return fmt.Errorf("ingress namespace %q, created in %q", ing.Namespace, ns)
	}
	c.ingresses = append(c.ingresses, ing.DeepCopy())
	return nil
}

func (c *recordingCluster) IngressStatus(context.Context, string, string) ([]networkingv1.IngressLoadBalancerIngress, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.status) == 0 {
		return nil, nil
	}
	a := c.status[min(c.calls, len(c.status)-1)]
	c.calls++
	return a.lbs, a.err
}

func (c *recordingCluster) Ports() (int, int) { return c.httpPort, c.httpsPort }
