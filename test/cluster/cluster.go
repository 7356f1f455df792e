//go:build linux

package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"pier.dev/pier/internal/lab"
	"pier.dev/pier/test/kubeapi"
)

const (
	// dirPrefix starts the cluster's folder in /tmp: short, since
	// containerd's sockets live below it.
	dirPrefix = "pc-"
	// labPrefix names the lab: pcsw, pcn0, pcn1, pcc and the host link
	// pchost. Fixed names, so one cluster run at a time per machine.
	labPrefix = "pc"
	nodeCount = 2
	// readyTimeout bounds the wait for every node to be Ready after the
	// kubelets start (about 10 s here).
	readyTimeout = 2 * time.Minute
)

// Subnet is the lab's segment. Not lab.DefaultSubnet (10.99.0.0/24): the
// kubepair suite and internal/lab's tests put that subnet's .1 on a host
// link in the root namespace too, and go test runs packages in parallel;
// two host links with one subnet would route each other's replies.
// test/kubeapi's serving certificate is valid for this subnet's .1.
var Subnet = netip.MustParsePrefix("10.97.0.0/24")

// PodCIDR is node i's pod range, 10.98.i.0/24.
func PodCIDR(i int) netip.Prefix {
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 98, byte(i), 0}), 24)
}

// Controllers are the kube-controller-manager controllers the cluster
// runs: workloads (Deployments, ReplicaSets, DaemonSets), Services'
// EndpointSlices (and Endpoints), ServiceAccounts and their legacy token
// Secrets, kube-root-ca.crt in every namespace (projected token volumes
// mount it), namespaces, garbage collection, PodDisruptionBudgets (the
// eviction API checks them) and node lifecycle (NotReady taints and the
// eviction of pods from a lost node), and pod GC (terminated pods on
// gone nodes).
var Controllers = []string{
	"deployment-controller", "replicaset-controller", "daemonset-controller",
	"endpointslice-controller", "endpoints-controller",
	"serviceaccount-controller", "serviceaccount-token-controller",
	"root-ca-certificate-publisher-controller",
	"namespace-controller", "garbage-collector-controller",
	"disruption-controller", "node-lifecycle-controller", "taint-eviction-controller",
	"pod-garbage-collector-controller",
}

// Cluster is the running cluster. Its methods are safe for concurrent use.
type Cluster struct {
	Server *kubeapi.Server
	Lab    *lab.Lab
	// Relay is the API server's relay on the host link, which kubelets
	// and pods dial (Cut and Restore make an API outage for the nodes).
	Relay  *kubeapi.Proxy
	Nodes  []*Node
	Client *lab.Host // the lab's client namespace, pcc
	// Clientset is an admin client, direct to the API server.
	Clientset kubernetes.Interface
	// Dir is the cluster's folder, /tmp/pc-…
	Dir string

	log     *slog.Logger
	kubelet string
	sched   *kubeapi.Component

	mu     sync.Mutex
	images map[string]string // role → reference, imported on every node
}

// Start builds the whole cluster and returns once every node is Ready. On
// error it has removed what it made. It first sweeps what a killed run
// left behind, and refuses to run beside a live one.
func Start(ctx context.Context, log *slog.Logger) (*Cluster, error) {
	if log == nil {
		log = slog.Default()
	}
	if missing := Missing(); missing != "" {
		return nil, errors.New("cluster: missing " + missing)
	}
	pause, err := ImageArchive("pause")
	if err != nil {
		return nil, err
	}
	if err := sweep(labOptions(), nodeNames()); err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	c := &Cluster{log: log, images: map[string]string{}}
	c.kubelet = filepath.Join(filepath.Dir(os.Getenv("PIER_KUBE_APISERVER")), "kubelet")
	if c.Dir, err = os.MkdirTemp("", dirPrefix); err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	if err := os.WriteFile(filepath.Join(c.Dir, ownerFile), []byte(strconv.Itoa(os.Getpid())), 0o600); err != nil {
		os.RemoveAll(c.Dir)
		return nil, fmt.Errorf("cluster: %w", err)
	}
	if err := c.start(ctx, pause); err != nil {
		c.Stop(true)
		return nil, fmt.Errorf("cluster: %w", err)
	}
	return c, nil
}

func labOptions() lab.Options {
	return lab.Options{Prefix: labPrefix, Nodes: nodeCount, Client: true, HostLink: true, Subnet: Subnet}
}

func nodeNames() []string {
	var out []string
	for i := range nodeCount {
		out = append(out, labPrefix+"n"+strconv.Itoa(i))
	}
	return out
}

func (c *Cluster) start(ctx context.Context, pauseArchive string) error {
	var err error
	c.Server, err = kubeapi.Start(ctx, kubeapi.Options{ControllerManager: true, Controllers: Controllers, Logger: c.log})
	if err != nil {
		return err
	}
	if c.Clientset, err = kubernetes.NewForConfig(c.Server.Config()); err != nil {
		return err
	}
	if c.Lab, err = lab.Build(labOptions()); err != nil {
		return err
	}
	c.Client = c.Lab.Client
	if c.Relay, err = c.Server.StartProxy(net.JoinHostPort(c.Lab.HostAddr.String(), "0")); err != nil {
		return err
	}
	for i, h := range c.Lab.Nodes {
		n := &Node{Name: h.NS, Host: h, Addr: h.Addr, PodCIDR: PodCIDR(i), Dir: filepath.Join(c.Dir, h.Name)}
		n.Socket = n.path("c.sock")
		c.Nodes = append(c.Nodes, n)
	}
	if err := c.routes(); err != nil {
		return err
	}
	if err := c.nodeRBAC(ctx); err != nil {
		return err
	}
	if c.sched, err = c.Server.StartScheduler(ctx); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	for _, n := range c.Nodes {
		if err := n.writeConfigs(c); err != nil {
			return fmt.Errorf("%s: %w", n.Name, err)
		}
		if err := n.startContainerd(ctx); err != nil {
			return err
		}
		names, err := n.importImage(ctx, pauseArchive)
		if err != nil {
			return err
		}
		if _, err := n.Ctr(ctx, "images", "tag", "--force", names[0], pauseRef); err != nil {
			return err
		}
		if err := n.startKubelet(c.kubelet); err != nil {
			return err
		}
	}
	return c.waitReady(ctx)
}

// routes: forwarding on in the nodes (cni0 ↔ eth0), and each pod CIDR
// routed via its node from the other nodes, the client and the root
// namespace. The root namespace's routes are on the host link, so they go
// with it (lab.Remove, or the switch namespace's deletion by the sweep);
// pods need them to reach the relay, whose replies would otherwise follow
// the root namespace's default route.
func (c *Cluster) routes() error {
	var cmds [][]string
	for _, n := range c.Nodes {
		cmds = append(cmds, []string{"ip", "netns", "exec", n.Name, "sysctl", "-qw", "net.ipv4.ip_forward=1"})
		for _, o := range c.Nodes {
			if o != n {
				cmds = append(cmds, []string{"ip", "-n", n.Name, "route", "add", o.PodCIDR.String(), "via", o.Addr.String(), "dev", "eth0"})
			}
		}
		cmds = append(cmds,
			[]string{"ip", "-n", c.Client.NS, "route", "add", n.PodCIDR.String(), "via", n.Addr.String(), "dev", "eth0"},
			[]string{"ip", "route", "add", n.PodCIDR.String(), "via", n.Addr.String(), "dev", c.Lab.HostLink})
	}
	for _, argv := range cmds {
		if out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput(); err != nil {
			return fmt.Errorf("%s: %w: %s", strings.Join(argv, " "), err, strings.TrimSpace(string(out)))
		}
	}
	return nil
}

// nodeRBAC binds the system:node ClusterRole to the system:nodes group.
// The API server authorizes with RBAC alone (no Node authorizer), and
// that role's default binding has no subjects.
func (c *Cluster) nodeRBAC(ctx context.Context) error {
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "pier-cluster:nodes"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "system:node"},
		Subjects:   []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "Group", Name: "system:nodes"}},
	}
	_, err := c.Clientset.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// waitReady waits until every node's Node object is Ready.
func (c *Cluster) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	for {
		notReady := c.notReady(ctx)
		if len(notReady) == 0 {
			return nil
		}
		for _, n := range c.Nodes {
			if n.kubelet.exited() {
				return fmt.Errorf("%s: kubelet exited (%v)\n%s", n.Name, n.kubelet.Err(), n.kubelet.tail(40))
			}
		}
		select {
		case <-ctx.Done():
			var tails []string
			for _, n := range c.Nodes {
				tails = append(tails, n.kubelet.tail(30))
			}
			return fmt.Errorf("nodes not Ready: %s: %w\n%s", strings.Join(notReady, ", "), ctx.Err(), strings.Join(tails, "\n"))
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// notReady names the nodes whose Node object is missing or not Ready.
func (c *Cluster) notReady(ctx context.Context) []string {
	var out []string
	for _, n := range c.Nodes {
		node, err := c.Clientset.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil || !NodeReady(node) {
			out = append(out, n.Name)
		}
	}
	return out
}

// NodeReady reports whether node's Ready condition is True.
func NodeReady(node *corev1.Node) bool {
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// Config is a fresh admin client configuration, direct to the API server.
func (c *Cluster) Config() *rest.Config { return c.Server.Config() }

// APIHost and APIPort are the relay's address as pods must dial it: set
// KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT to them in a pod
// that talks to the API server (there is no kube-proxy to make the
// kubernetes Service's ClusterIP work). The serving certificate is valid
// for APIHost.
func (c *Cluster) APIHost() string { return c.Lab.HostAddr.String() }

// APIPort: see APIHost.
func (c *Cluster) APIPort() int {
	_, port, _ := net.SplitHostPort(c.Relay.Addr())
	n, _ := strconv.Atoi(port)
	return n
}

// APIURL is https://APIHost:APIPort.
func (c *Cluster) APIURL() string {
	return "https://" + net.JoinHostPort(c.APIHost(), strconv.Itoa(c.APIPort()))
}

// Node returns the node named name (pcn0, pcn1), or nil.
func (c *Cluster) Node(name string) *Node {
	for _, n := range c.Nodes {
		if n.Name == name {
			return n
		}
	}
	return nil
}

// Stop ends everything and removes every trace: the kubelets, containerd,
// the shims and every container, mounts, cgroups, the lab, the control
// plane and the folder. keepLogs first copies the logs to a folder of
// their own (printed on stderr). Safe on a half-started cluster.
func (c *Cluster) Stop(keepLogs bool) {
	for _, n := range c.Nodes {
		n.stop()
	}
	if keepLogs {
		c.keepLogs()
	}
	for _, err := range scrub(c.Dir, nodeNames()) {
		fmt.Fprintf(os.Stderr, "cluster: clean-up: %v\n", err)
	}
	if c.Lab != nil {
		c.Lab.Remove()
	}
	c.sched.Stop()
	if c.Relay != nil {
		c.Relay.Close()
	}
	if c.Server != nil {
		c.Server.Stop()
	}
}

// keepLogs copies the nodes' and the control plane's logs to a new folder
// under /tmp.
func (c *Cluster) keepLogs() {
	var logs []string
	for _, n := range c.Nodes {
		for _, name := range []string{"containerd.log", "kubelet.log"} {
			logs = append(logs, n.path(name))
		}
	}
	if c.Server != nil {
		more, _ := filepath.Glob(filepath.Join(c.Server.Dir(), "*.log"))
		logs = append(logs, more...)
	}
	dst, err := os.MkdirTemp("", "pier-cluster-logs-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "cluster: could not keep the logs: %v\n", err)
		return
	}
	for _, src := range logs {
		data, err := os.ReadFile(src)
		if err != nil {
			continue
		}
		name := filepath.Base(src)
		if node := filepath.Base(filepath.Dir(src)); strings.HasPrefix(node, "n") {
			name = node + "-" + name
		}
		_ = os.WriteFile(filepath.Join(dst, name), data, 0o600)
	}
	fmt.Fprintf(os.Stderr, "cluster: logs kept in %s\n", dst)
}
