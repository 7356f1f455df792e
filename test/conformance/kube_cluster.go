package conformance

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// KubeConfig configures a KubeCluster.
type KubeConfig struct {
	// Admin is the configuration of the user running the suite: a cluster
	// admin (creates the IngressClass, namespaces, workloads, Ingresses).
	Admin *rest.Config
	// PierBin is the pier binary run as `pier controller` and `pier agent`.
	PierBin string
	// Dir is the working directory; it gets logs/ and one short state
	// folder per agent.
	Dir string
	// ControllerKubeconfig and AgentKubeconfig are the identities pier's
	// processes run with (the ServiceAccounts of deploy/rbac.yaml).
	ControllerKubeconfig, AgentKubeconfig string
	// InternalPool is --internal-pool (the VIPs requests go to).
	InternalPool string
	// LeaseNamespace is --lease-namespace; it must exist.
	LeaseNamespace string
	// NodeSelector is --node-selector: the nodes that may run HAProxy;
	// empty for every Ready node whose agent heartbeats.
	NodeSelector string
	// AgentNodes are the nodes a `pier agent` runs for, one process each.
	AgentNodes []string
	// StartTimeout bounds the wait for pier's health endpoints (2 min).
	StartTimeout time.Duration
	// EndpointsTimeout bounds the wait for a backend's endpoints (5 min,
	// as upstream).
	EndpointsTimeout time.Duration
	// DrainTimeout bounds the wait, on Close, for the namespaces, the
	// LoadBalancers and their HAProxy processes to be gone (3 min).
	DrainTimeout time.Duration
	// StopGrace is how long a pier process gets after SIGTERM (20 s).
	StopGrace time.Duration
}

// KubeCluster is the Cluster of a Kubernetes API server: every object is
// created through the API as the upstream runner creates it, pods are run
// by whatever plays the kubelet, and pier runs as `pier controller` plus
// one `pier agent` per node in AgentNodes. Requests go to ports 80 and 443
// of the address in the Ingress status.
type KubeCluster struct {
	cfg     KubeConfig
	client  kubernetes.Interface
	dynamic dynamic.Interface
	logs    string

	mu         sync.Mutex
	procs      []*pierProcess
	namespaces map[string]bool // created here; true once deleted
}

var _ Cluster = (*KubeCluster)(nil)

// NewKubeCluster checks cfg and makes the clients; Start runs pier.
func NewKubeCluster(cfg KubeConfig) (*KubeCluster, error) {
	if cfg.Admin == nil || cfg.PierBin == "" || cfg.Dir == "" || len(cfg.AgentNodes) == 0 {
		return nil, errors.New("kube cluster: Admin, PierBin, Dir and AgentNodes are required")
	}
	setDefault(&cfg.StartTimeout, 2*time.Minute)
	setDefault(&cfg.EndpointsTimeout, 5*time.Minute)
	setDefault(&cfg.DrainTimeout, 3*time.Minute)
	setDefault(&cfg.StopGrace, 20*time.Second)
	client, err := kubernetes.NewForConfig(cfg.Admin)
	if err != nil {
		return nil, fmt.Errorf("kube cluster: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg.Admin)
	if err != nil {
		return nil, fmt.Errorf("kube cluster: %w", err)
	}
	c := &KubeCluster{cfg: cfg, client: client, dynamic: dyn, logs: filepath.Join(cfg.Dir, "logs"), namespaces: map[string]bool{}}
	if err := os.MkdirAll(c.logs, 0o755); err != nil {
		return nil, fmt.Errorf("kube cluster: %w", err)
	}
	return c, nil
}

func setDefault(d *time.Duration, def time.Duration) {
	if *d == 0 {
		*d = def
	}
}

// Start creates the suite's IngressClass, as a cluster admin would, then
// starts pier's controller and agents and waits for their health endpoints.
func (c *KubeCluster) Start(ctx context.Context) error {
	class := &networkingv1.IngressClass{
		ObjectMeta: metav1.ObjectMeta{Name: IngressClass},
		Spec:       networkingv1.IngressClassSpec{Controller: IngressController},
	}
	_, err := c.client.NetworkingV1().IngressClasses().Create(ctx, class, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating IngressClass %s: %w", IngressClass, err)
	}
	if err := c.startController(); err != nil {
		return err
	}
	for _, node := range c.cfg.AgentNodes {
		if err := c.startAgent(node); err != nil {
			return err
		}
	}
	return c.waitHealthy(ctx)
}

// Ports implements Cluster: the Ingress address is served on 80 and 443.
func (c *KubeCluster) Ports() (int, int) { return 80, 443 }

// NewNamespace implements Cluster as upstream does (GenerateName
// "ingress-conformance-", labelled), then waits for the namespace's
// default ServiceAccount: until the controller makes it, pods are refused
// and the ReplicaSet controller backs off.
func (c *KubeCluster) NewNamespace(ctx context.Context) (string, error) {
	ns, err := c.client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		GenerateName: "ingress-conformance-",
		Labels:       map[string]string{"app.kubernetes.io/name": "ingress-conformance"},
	}}, metav1.CreateOptions{})
	if err != nil {
		return "", err
	}
	c.mu.Lock()
	c.namespaces[ns.Name] = false
	c.mu.Unlock()
	err = poll(ctx, 200*time.Millisecond, time.Minute, func() (bool, error) {
		_, err := c.client.CoreV1().ServiceAccounts(ns.Name).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
	if err != nil {
		return "", fmt.Errorf("namespace %s: no default ServiceAccount: %w", ns.Name, err)
	}
	return ns.Name, nil
}

// DeleteNamespace implements Cluster as upstream does: grace period 0,
// background propagation, no wait (Close waits for all of them).
func (c *KubeCluster) DeleteNamespace(ctx context.Context, ns string) error {
	grace := int64(0)
	background := metav1.DeletePropagationBackground
	err := c.client.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{
		GracePeriodSeconds: &grace, PropagationPolicy: &background,
	})
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	c.mu.Lock()
	c.namespaces[ns] = true
	c.mu.Unlock()
	return nil
}

// CreateTLSSecret implements Cluster.
func (c *KubeCluster) CreateTLSSecret(ctx context.Context, ns, name string, certPEM, keyPEM []byte) error {
	_, err := c.client.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{corev1.TLSCertKey: certPEM, corev1.TLSPrivateKeyKey: keyPEM},
	}, metav1.CreateOptions{})
	return err
}

// CreateIngress implements Cluster.
func (c *KubeCluster) CreateIngress(ctx context.Context, ns string, ing *networkingv1.Ingress) error {
	out := ing.DeepCopy()
	out.Namespace = ns
	out.Status = networkingv1.IngressStatus{}
	_, err := c.client.NetworkingV1().Ingresses(ns).Create(ctx, out, metav1.CreateOptions{})
	return err
}

// IngressStatus implements Cluster with a GET of the Ingress, after
// checking that every pier process still runs.
func (c *KubeCluster) IngressStatus(ctx context.Context, ns, name string) ([]networkingv1.IngressLoadBalancerIngress, error) {
	if err := c.pierAlive(); err != nil {
		return nil, err
	}
	ing, err := c.client.NetworkingV1().Ingresses(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	return ing.Status.LoadBalancer.Ingress, nil
}

// Close deletes the namespaces scenarios left, waits until every
// namespace, LoadBalancer and HAProxy process is gone (what a clean
// teardown means in Kubernetes mode), then stops pier. The error lists
// what did not go away.
func (c *KubeCluster) Close(ctx context.Context) error {
	c.mu.Lock()
	var left []string
	for ns, deleted := range c.namespaces {
		if !deleted {
			left = append(left, ns)
		}
	}
	c.mu.Unlock()
	var errs []error
	for _, ns := range left {
		if err := c.DeleteNamespace(ctx, ns); err != nil {
			errs = append(errs, fmt.Errorf("deleting namespace %s: %w", ns, err))
		}
	}
	if err := c.drain(ctx); err != nil {
		errs = append(errs, err)
	}
	c.stopPier()
	return errors.Join(errs...)
}

// poll calls cond at once and then every interval until it is done, it
// fails, or timeout passes.
func poll(ctx context.Context, interval, timeout time.Duration, cond func() (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		done, err := cond()
		if err != nil || done {
			return err
		}
		if err := sleep(ctx, interval); err != nil {
			return fmt.Errorf("not done after %s: %w", timeout, err)
		}
	}
}
