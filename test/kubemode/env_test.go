package kubemode

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"pier.dev/pier/test/kubeapi"
	"pier.dev/pier/test/nodesim"
)

const (
	className  = "pier"
	leaseNS    = "pier-system"
	activeNode = "node-a"
	echoSvc    = "echo"
	echoPort   = 80
)

// cluster is what every test shares: the control plane with pier's CRD
// and RBAC applied, the IngressClass, the simulated nodes, and one
// kubeconfig per pier identity.
type cluster struct {
	srv      *kubeapi.Server
	cs       kubernetes.Interface
	dyn      dynamic.Interface
	ctlKube  string // kubeconfig of ServiceAccount pier-system/pier-controller
	agentKub string // kubeconfig of ServiceAccount pier-system/pier-agent
	dir      string
	sim      *nodesim.Sim
}

var (
	setupOnce sync.Once
	shared    *cluster
	setupErr  error
	envCount  atomic.Int32
)

func sharedCluster(t *testing.T) *cluster {
	t.Helper()
	srv := kubeapi.Shared(t)
	setupOnce.Do(func() {
		start := time.Now()
		shared, setupErr = setUp(srv)
		t.Logf("cluster set up in %s", time.Since(start).Round(time.Millisecond))
	})
	if setupErr != nil {
		t.Fatal(setupErr)
	}
	return shared
}

func setUp(srv *kubeapi.Server) (*cluster, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := &cluster{srv: srv}
	var err error
	if c.cs, err = kubernetes.NewForConfig(srv.Config()); err != nil {
		return nil, err
	}
	if c.dyn, err = dynamic.NewForConfig(srv.Config()); err != nil {
		return nil, err
	}
	crd, err := kubeapi.RepoPath("deploy", "crd-loadbalancers.yaml")
	if err != nil {
		return nil, err
	}
	rbac, _ := kubeapi.RepoPath("deploy", "rbac.yaml")
	if err := kubeapi.ApplyFiles(ctx, srv.Config(), crd, rbac); err != nil {
		return nil, err
	}
	class := &networkingv1.IngressClass{
		ObjectMeta: metav1.ObjectMeta{Name: className},
		Spec:       networkingv1.IngressClassSpec{Controller: "pier.dev/ingress-controller"},
	}
	if _, err := c.cs.NetworkingV1().IngressClasses().Create(ctx, class, metav1.CreateOptions{}); err != nil {
		return nil, err
	}
	// Runs until the test binary exits; Pods and Nodes stay in the API.
	if c.sim, err = nodesim.Start(context.Background(), c.cs, nodesim.Options{Heartbeat: 2 * time.Second}); err != nil {
		return nil, err
	}
	c.dir = srv.Dir() // removed with the control plane: the tokens go with it
	if c.ctlKube, err = c.tokenKubeconfig(ctx, "pier-controller"); err != nil {
		return nil, err
	}
	if c.agentKub, err = c.tokenKubeconfig(ctx, "pier-agent"); err != nil {
		return nil, err
	}
	return c, nil
}

// tokenKubeconfig writes a kubeconfig holding a token of ServiceAccount
// pier-system/sa, so pier runs with exactly the permissions of rbac.yaml.
func (c *cluster) tokenKubeconfig(ctx context.Context, sa string) (string, error) {
	hour := int64(3600)
	tok, err := c.cs.CoreV1().ServiceAccounts(leaseNS).CreateToken(ctx, sa,
		&authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{ExpirationSeconds: &hour}}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("token for %s: %w", sa, err)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["test"] = &clientcmdapi.Cluster{Server: c.srv.Host(), CertificateAuthorityData: c.srv.Config().CAData}
	cfg.AuthInfos[sa] = &clientcmdapi.AuthInfo{Token: tok.Status.Token}
	cfg.Contexts["test"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: sa}
	cfg.CurrentContext = "test"
	path := filepath.Join(c.dir, sa+".kubeconfig")
	return path, clientcmd.WriteToFile(*cfg, path)
}

// env is one test's world: its namespace with an echo backend, address
// pools no other test uses, a Lease of its own, and the pier processes it
// started, all ended by the cleanup.
type env struct {
	t *testing.T
	*cluster
	ns       string
	internal netip.Prefix
	public   netip.Prefix
	lease    string

	mu     sync.Mutex
	procs  []*proc
	states []string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	c := sharedCluster(t)
	k := int(envCount.Add(1))
	name := strings.ToLower(strings.TrimPrefix(t.Name(), "Test"))
	e := &env{
		t: t, cluster: c, ns: fmt.Sprintf("km-%s-%d", name, k), lease: fmt.Sprintf("pier-%s-%d", name, k),
		internal: netip.MustParsePrefix(fmt.Sprintf("10.250.%d.0/24", 2*k)),
		public:   netip.MustParsePrefix(fmt.Sprintf("10.250.%d.0/24", 2*k+1)),
	}
	t.Cleanup(e.teardown)
	e.createNamespace()
	e.createEcho(2)
	return e
}

// addr returns the n-th address of a pool (1 is its first usable one).
func addr(p netip.Prefix, n int) string {
	a := p.Addr()
	for range n {
		a = a.Next()
	}
	return a.String()
}

func (e *env) createNamespace() { e.createNamespaceNamed(e.ns) }

// createNamespaceNamed creates a namespace and waits for its default
// ServiceAccount (pods are refused before it exists).
func (e *env) createNamespaceNamed(name string) {
	ctx := e.t.Context()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := e.cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
	eventually(e.t, 30*time.Second, "default ServiceAccount", func() error {
		_, err := e.cs.CoreV1().ServiceAccounts(name).Get(ctx, "default", metav1.GetOptions{})
		return err
	})
}

// createEcho runs the echo backend as a Deployment behind Service "echo"
// (port 80 → 3000) and waits for its ready endpoints.
func (e *env) createEcho(replicas int32) { e.createEchoIn(e.ns, echoSvc, replicas) }

// createEchoIn runs the echo backend as Deployment and Service svc of
// namespace ns; its pods answer with SERVICE_NAME svc.
func (e *env) createEchoIn(ns, svcName string, replicas int32) {
	ctx := e.t.Context()
	labels := map[string]string{"app": svcName}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: svcName},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "echo", Image: "registry.k8s.io/ingress-controller-conformance/echoserver",
					Env:   []corev1.EnvVar{{Name: "SERVICE_NAME", Value: svcName}},
					Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 3000}},
				}}},
			},
		},
	}
	if _, err := e.cs.AppsV1().Deployments(ns).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: svcName},
		Spec: corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{
			{Name: "http", Port: echoPort, TargetPort: intstr.FromInt32(3000)},
		}},
	}
	if _, err := e.cs.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
	eventually(e.t, time.Minute, svcName+" endpoints ready", func() error {
		slices, err := e.cs.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: "kubernetes.io/service-name=" + svcName})
		if err != nil {
			return err
		}
		ready := 0
		for _, s := range slices.Items {
			for _, ep := range s.Endpoints {
				if ep.Conditions.Ready != nil && *ep.Conditions.Ready {
					ready++
				}
			}
		}
		if ready < int(replicas) {
			return fmt.Errorf("%d of %d ready", ready, replicas)
		}
		return nil
	})
}

// teardown ends the test's pier processes (controllers first, so nothing
// recreates what follows), stops the HAProxy instances the agents left
// running, deletes every LoadBalancer and the namespace.
func (e *env) teardown() {
	e.mu.Lock()
	procs, states := e.procs, e.states
	e.mu.Unlock()
	for _, p := range procs {
		if p.role == "controller" {
			if e.t.Failed() && os.Getenv("PIER_KUBEMODE_STACKS") != "" {
				p.dumpStacks()
			}
			p.kill()
		}
	}
	for _, p := range procs {
		p.stop(10 * time.Second)
	}
	for _, dir := range states {
		stopHAProxies(e.t, dir)
	}
	if e.t.Failed() {
		for _, p := range procs {
			e.t.Logf("--- %s log (%s), last lines:\n%s", p.name, p.logPath, p.tail(40))
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := e.dyn.Resource(lbResource).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		e.t.Errorf("delete load balancers: %v", err)
	}
	err := e.cs.CoreV1().Namespaces().Delete(ctx, e.ns, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		e.t.Errorf("delete namespace: %v", err)
	}
	for _, dir := range states {
		os.RemoveAll(dir)
	}
	if !e.t.Failed() {
		for _, p := range procs {
			os.Remove(p.logPath)
		}
	}
}

// eventually retries f every 100 ms until it succeeds or d passes.
func eventually(t testing.TB, d time.Duration, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s: %v", what, d, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
