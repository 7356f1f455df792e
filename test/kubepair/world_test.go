//go:build linux

package kubepair

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"pier.dev/pier/internal/lab"
	"pier.dev/pier/test/harness"
	"pier.dev/pier/test/kubeapi"
)

const (
	className = "pier"
	leaseNS   = "pier-system"
	appNS     = "kp-demo"
	ingName   = "ha"
	host      = "ha.example"
	echoPort  = 9001
	agentPort = 9180 // the agents' API, on their node's address
	// The pools are on the lab's segment: a VIP moves between the nodes'
	// eth0 and the client reaches it by ARP, as on a real L2 segment.
	internalPool = "10.99.0.128/26"
	publicPool   = "10.99.0.192/26"
)

// Heartbeats: a restarted agent is back well within the timeout, so the
// controller moves nothing; the API outage of apiOutageWithKill outlasts
// it, so the controller sees every agent silent at once.
const (
	hbInterval = time.Second
	hbTimeout  = 6 * time.Second
)

// world is the cluster, the lab and the pier processes of the test.
type world struct {
	t      *testing.T
	bin    string
	dir    string
	srv    *kubeapi.Server
	cs     kubernetes.Interface
	dyn    dynamic.Interface
	lab    *lab.Lab
	relay  *kubeapi.Proxy
	ctl    *proc
	agents map[string]*proc  // by node name
	states map[string]string // node → agent state folder
	nodes  map[string]*lab.Host
	kube   map[string]string // identity → kubeconfig
	echo   *exec.Cmd
	// routerASN, when not 0, runs the pair with BGP instead of VRRP: the
	// client host is the gateway router (bird, AS routerASN) and the
	// agents (AS nodeASN) peer with it (bgp_test.go).
	routerASN uint32
	bird      *bird
	// gateway: the app is a Gateway and an HTTPRoute (gateway_test.go).
	gateway bool
	// ecmp: the app is a native Service of type LoadBalancer placed on
	// every node (--native-ecmp), advertised by each with equal
	// preference (--bgp-ecmp), the router spreading the flows
	// (ecmp_test.go); nodeCount nodes instead of two.
	ecmp      bool
	nodeCount int
	flows     *flowServer
}

// need returns the pier binary, or skips (fails under CI) when something
// the test needs is missing.
func need(t *testing.T) string {
	t.Helper()
	return harness.NeedLab(t, "kubepair", "haproxy", "keepalived", "nft")
}

// newWorld builds everything and returns once the Ingress is placed on
// both nodes. Cleanups stop the processes and remove the lab whatever
// happens; the API objects go with the control plane (kubeapi.Main).
func newWorld(t *testing.T) *world { return newWorldOf(t, worldOptions{}) }

// newWorldWith builds a world whose addresses move with BGP, the client
// host routing with AS routerASN, or with VRRP when routerASN is 0.
func newWorldWith(t *testing.T, routerASN uint32) *world {
	return newWorldOf(t, worldOptions{routerASN: routerASN})
}

// worldOptions: routerASN as for newWorldWith; gateway serves the app
// through a Gateway and an HTTPRoute instead of an Ingress.
type worldOptions struct {
	routerASN uint32
	gateway   bool
	ecmp      bool
	nodes     int // 0: two
}

func newWorldOf(t *testing.T, o worldOptions) *world {
	t.Helper()
	w := &world{t: t, bin: need(t), agents: map[string]*proc{}, states: map[string]string{},
		nodes: map[string]*lab.Host{}, kube: map[string]string{}, routerASN: o.routerASN, gateway: o.gateway,
		ecmp: o.ecmp, nodeCount: max(o.nodes, 2)}
	routerASN := o.routerASN
	w.srv = kubeapi.Shared(t)
	w.dir = t.TempDir()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	w.must(w.connect(ctx))
	w.must(w.buildLab())
	// After buildLab: cleanups run last-registered first, so processes
	// stop before the lab goes.
	t.Cleanup(w.teardown)
	if routerASN != 0 {
		w.must(w.startBird())
	}
	w.relay = w.srv.NewProxyAt(t, net.JoinHostPort(w.lab.HostAddr.String(), "0"))
	w.must(w.identities(ctx))
	w.must(w.createNodes(ctx))
	w.must(w.createApp(ctx))
	w.must(w.startEcho())
	for _, h := range w.lab.Nodes {
		w.must(w.startAgent(h.Name))
	}
	w.must(w.startController())
	return w
}

func (w *world) must(err error) {
	w.t.Helper()
	if err != nil {
		w.t.Fatal(err)
	}
}

// connect applies pier's CRD and RBAC and the IngressClass.
func (w *world) connect(ctx context.Context) error {
	var err error
	if w.cs, err = kubernetes.NewForConfig(w.srv.Config()); err != nil {
		return err
	}
	if w.dyn, err = dynamic.NewForConfig(w.srv.Config()); err != nil {
		return err
	}
	crd, err := kubeapi.RepoPath("deploy", "crd-loadbalancers.yaml")
	if err != nil {
		return err
	}
	rbac, err := kubeapi.RepoPath("deploy", "rbac.yaml")
	if err != nil {
		return err
	}
	if err := kubeapi.ApplyFiles(ctx, w.srv.Config(), crd, rbac); err != nil {
		return err
	}
	class := &networkingv1.IngressClass{
		ObjectMeta: metav1.ObjectMeta{Name: className},
		Spec:       networkingv1.IngressClassSpec{Controller: "pier.dev/ingress-controller"},
	}
	// An earlier world of this process made it already.
	if _, err = w.cs.NetworkingV1().IngressClasses().Create(ctx, class, metav1.CreateOptions{}); apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

func (w *world) buildLab() error {
	lab.RemoveStale("kp")
	l, err := lab.Build(lab.Options{Prefix: "kp" + strconv.Itoa(os.Getpid()) + "-", Nodes: max(w.nodeCount, 2), Client: true, Pods: true, HostLink: true})
	if err != nil {
		return err
	}
	w.lab = l
	w.t.Cleanup(l.Remove)
	for _, h := range l.Nodes {
		w.nodes[h.Name] = h
	}
	return nil
}

// identities writes a kubeconfig per pier ServiceAccount of rbac.yaml:
// the controller's dials the API server, the agents' the relay on the
// host link, keeping 127.0.0.1 as the name the certificate is checked
// against.
func (w *world) identities(ctx context.Context) error {
	direct := w.srv.Host()
	relayed := "https://" + w.relay.Addr()
	for sa, server := range map[string]string{"pier-controller": direct, "pier-agent": relayed} {
		hour := int64(3600)
		tok, err := w.cs.CoreV1().ServiceAccounts(leaseNS).CreateToken(ctx, sa,
			&authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{ExpirationSeconds: &hour}}, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("token for %s: %w", sa, err)
		}
		cfg := clientcmdapi.NewConfig()
		cfg.Clusters["test"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: w.srv.Config().CAData,
			TLSServerName: "127.0.0.1"}
		cfg.AuthInfos[sa] = &clientcmdapi.AuthInfo{Token: tok.Status.Token}
		cfg.Contexts["test"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: sa}
		cfg.CurrentContext = "test"
		path := filepath.Join(w.dir, sa+".kubeconfig")
		if err := clientcmd.WriteToFile(*cfg, path); err != nil {
			return err
		}
		w.kube[sa] = path
	}
	return nil
}

// createNodes creates Nodes n0 and n1, Ready, with their lab address as
// InternalIP (the VRRP peers' unicast addresses come from it). Nothing
// else writes them: no kubelet, no node lifecycle controller.
func (w *world) createNodes(ctx context.Context) error {
	for _, h := range w.lab.Nodes {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: h.Name, Labels: map[string]string{"kubernetes.io/hostname": h.Name}}}
		n, err := w.cs.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("create node %s: %w", h.Name, err)
		}
		now := metav1.Now()
		n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: h.Addr.String()}}
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue,
			LastHeartbeatTime: now, LastTransitionTime: now, Reason: "KubeletReady"}}
		if _, err := w.cs.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("node %s status: %w", h.Name, err)
		}
	}
	return nil
}

// createApp creates the namespace, Service echo (no selector: no
// controller-manager runs) with an EndpointSlice on the pods host, and the
// Ingress.
func (w *world) createApp(ctx context.Context) error {
	// An earlier world of this process leaves the namespace (no
	// namespace controller runs to finish deleting it) and deletes the
	// rest (deleteObjects).
	_, err := w.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: appNS}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "echo"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(echoPort)}}},
	}
	if _, err := w.cs.CoreV1().Services(appNS).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		return err
	}
	ready, port, portName := true, int32(echoPort), "http"
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "echo-1", Labels: map[string]string{discoveryv1.LabelServiceName: "echo"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: &portName, Port: &port}},
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{w.lab.Pods.Addr.String()},
			Conditions: discoveryv1.EndpointConditions{Ready: &ready}}},
	}
	if _, err := w.cs.DiscoveryV1().EndpointSlices(appNS).Create(ctx, slice, metav1.CreateOptions{}); err != nil {
		return err
	}
	if w.gateway {
		return w.createGateway(ctx)
	}
	if w.ecmp {
		return w.createECMPService(ctx)
	}
	prefix, class := networkingv1.PathTypePrefix, className
	ing := &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Name: ingName},
		Spec: networkingv1.IngressSpec{IngressClassName: &class, Rules: []networkingv1.IngressRule{{
			Host: host,
			IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
				Paths: []networkingv1.HTTPIngressPath{{Path: "/", PathType: &prefix, Backend: networkingv1.IngressBackend{
					Service: &networkingv1.IngressServiceBackend{Name: "echo", Port: networkingv1.ServiceBackendPort{Number: 80}},
				}}},
			}},
		}}},
	}
	_, err = w.cs.NetworkingV1().Ingresses(appNS).Create(ctx, ing, metav1.CreateOptions{})
	return err
}

// deleteObjects removes what this world created in the API server, so
// that the next world of the process starts from nothing.
func (w *world) deleteObjects() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = w.cs.NetworkingV1().Ingresses(appNS).Delete(ctx, ingName, metav1.DeleteOptions{})
	if w.gateway {
		w.deleteGateway(ctx)
	}
	_ = w.cs.CoreV1().Services(appNS).Delete(ctx, "echo", metav1.DeleteOptions{})
	if w.ecmp {
		w.deleteECMPService(ctx)
	}
	_ = w.cs.DiscoveryV1().EndpointSlices(appNS).Delete(ctx, "echo-1", metav1.DeleteOptions{})
	for name := range w.nodes {
		_ = w.cs.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{})
		_ = w.cs.CoordinationV1().Leases(leaseNS).Delete(ctx, "pier-agent-"+name, metav1.DeleteOptions{})
	}
	lbs := schema.GroupVersionResource{Group: "pier.dev", Version: "v1alpha1", Resource: "loadbalancers"}
	_ = w.dyn.Resource(lbs).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
}

func (w *world) startEcho() error {
	if w.ecmp {
		return w.startFlowServer()
	}
	w.echo = w.lab.Pods.Command(context.WithoutCancel(w.t.Context()), w.bin, "echo",
		"--listen", netip.AddrPortFrom(w.lab.Pods.Addr, echoPort).String(),
		"--namespace", appNS, "--service", "echo", "--pod", "echo-1", "--log-level", "warn")
	return w.echo.Start()
}

// startAgent runs `pier agent` for node inside its namespace, holding
// addresses on eth0, with its API on the node's address (reached over the
// host link). A restart reuses the node's state folder: that is what
// lets it adopt HAProxy and keepalived.
func (w *world) startAgent(node string, extra ...string) error {
	h := w.nodes[node]
	state, ok := w.states[node]
	if !ok {
		// Short: HAProxy's socket paths must fit in 108 bytes.
		var err error
		if state, err = os.MkdirTemp("", "kp"); err != nil {
			return err
		}
		w.states[node] = state
	}
	api := netip.AddrPortFrom(h.Addr, agentPort).String()
	moves := []string{"--vrrp-interface", "eth0"}
	if w.routerASN != 0 {
		moves = []string{"--bgp-peer", w.lab.Client.Addr.String(), "--bgp-asn", strconv.Itoa(nodeASN),
			"--bgp-peer-asn", strconv.Itoa(int(w.routerASN)), "--bgp-next-hop", h.Addr.String(),
			"--bgp-hold-time", strconv.Itoa(bgpHoldTime)}
		if w.ecmp {
			moves = append(moves, "--bgp-ecmp")
		}
	}
	args := append([]string{"ip", "netns", "exec", h.NS, w.bin, "agent",
		"--kubeconfig", w.kube["pier-agent"], "--node", node, "--state-dir", state, "--api-addr", api}, moves...)
	args = append(args, "--lease-namespace", leaseNS,
		"--heartbeat-interval", hbInterval.String(), "--heartbeat-timeout", hbTimeout.String(),
		"--hard-stop-after", "5s", "--log-level", "debug")
	p, err := startProc(w.t, w.dir, "agent-"+node, api, append(args, extra...)...)
	if err != nil {
		return err
	}
	w.agents[node] = p
	return p.waitHTTP("/metrics", 20*time.Second)
}

// startController runs `pier controller` here (it reaches the API server
// directly), placing on every Ready node: no --node-selector.
func (w *world) startController() error {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	api := l.Addr().String()
	l.Close()
	var ecmp []string
	if w.ecmp {
		ecmp = []string{"--native-ecmp"}
	}
	p, err := startProc(w.t, w.dir, "controller", api, append([]string{w.bin, "controller",
		"--kubeconfig", w.kube["pier-controller"], "--api-addr", api, "--identity", "ctl-1",
		"--internal-pool", internalPool, "--public-pool", publicPool, "--watch-namespace", appNS,
		"--lease-namespace", leaseNS, "--lease-name", "pier-kubepair",
		"--lease-duration", "4s", "--renew-deadline", "3s", "--retry-period", "1s", "--log-level", "debug"}, ecmp...)...)
	if err != nil {
		return err
	}
	w.ctl = p
	return p.waitHTTP("/healthz", 20*time.Second)
}

// teardown stops the controller first (nothing re-places), then the
// agents and the backend; lab.Remove, which runs after, kills the HAProxy
// and keepalived they leave and deletes the namespaces.
func (w *world) teardown() {
	if w.ctl != nil {
		w.ctl.kill()
	}
	for _, p := range w.agents {
		p.stop(10 * time.Second)
	}
	if w.flows != nil {
		w.flows.close()
	}
	if w.echo != nil && w.echo.Process != nil {
		_ = w.echo.Process.Kill()
		_ = w.echo.Wait()
	}
	if w.bird != nil {
		w.bird.stop()
	}
	w.deleteObjects()
	if w.t.Failed() {
		for _, p := range append([]*proc{w.ctl}, w.agents["n0"], w.agents["n1"], w.agents["n2"]) {
			if p != nil {
				w.t.Logf("--- %s log (%s), last lines:\n%s", p.name, p.logPath, p.tail(40))
			}
		}
		w.keepLogs()
	}
	for _, dir := range w.states {
		os.RemoveAll(dir)
	}
}

// keepLogs copies the process logs out of the test's temporary folder,
// which the testing package removes.
func (w *world) keepLogs() {
	keep, err := os.MkdirTemp("", "kubepair-logs-")
	if err != nil {
		return
	}
	entries, _ := os.ReadDir(w.dir)
	for _, e := range entries {
		if filepath.Ext(e.Name()) == ".log" {
			if b, err := os.ReadFile(filepath.Join(w.dir, e.Name())); err == nil {
				_ = os.WriteFile(filepath.Join(keep, e.Name()), b, 0o644)
			}
		}
	}
	w.t.Logf("process logs kept in %s", keep)
}

// haproxyMasters returns the pids in the HAProxy pid files under node's
// state folder (one per running instance).
func (w *world) haproxyMasters(node string) []int {
	var pids []int
	_ = filepath.WalkDir(w.states[node], func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if d.Name() == "haproxy.pid" {
			if pid := readPid(path); pid > 0 {
				pids = append(pids, pid)
			}
		}
		return nil
	})
	return pids
}
