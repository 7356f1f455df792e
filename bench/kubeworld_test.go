package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"pier.dev/pier/internal/echo"
	"pier.dev/pier/internal/lab"
	"pier.dev/pier/test/kubeapi"
)

// The Kubernetes-mode world of TestKubeScale (kubescale_test.go): a real
// etcd and kube-apiserver (test/kubeapi), pier's CRD and RBAC from
// deploy/, two `pier controller` replicas electing a leader, and one
// `pier agent` per node, each a process of its own talking to the API
// server as the ServiceAccount rbac.yaml gives it.
//
//	this namespace: etcd, kube-apiserver, 2 × pier controller, the idle
//	                agents, the echo backends at 10.93.0.1 and .2, the
//	                relay 10.93.0.1:R → kube-apiserver
//	  ks<pid>-sw br0 ── n0 10.93.0.11  pier agent, HAProxy
//	                 ── n1 10.93.0.12  pier agent, HAProxy  …
//
// The HAProxy nodes (n0, n1, …) are lab namespaces (internal/lab): each
// agent runs its own HAProxy processes there, and the VIP and FIP pools
// are local on every node's lo, so each node's HAProxy binds every
// address it serves without colliding with its peer's. The controllers'
// --node-selector places load balancers on these nodes only. The idle
// nodes' agents run here, with nothing placed on them: they start no
// HAProxy (an agent starts one with its first load balancer), and their
// API traffic (the LoadBalancer watch, the Lease informer, the heartbeat,
// the cordon watch) is that of an agent on a node pier does not use.
//
// No kubelet and no kube-controller-manager run: the Nodes are written
// Ready once and nothing marks them otherwise; the EndpointSlices are
// written by the benchmark, as the EndpointSlice controller would.
var (
	kubeLabSubnet  = netip.MustParsePrefix("10.93.0.0/24")
	kubeFlipSecond = netip.MustParseAddr("10.93.0.2") // the second flip member, beside the host link's .1
	kubeVIPPool    = netip.MustParsePrefix("10.94.0.0/16")
	kubeFIPPool    = netip.MustParsePrefix("10.95.0.0/16")
)

const (
	kubeLeaseNS     = "pier-system"
	kubeHAProxyNode = "pier.dev/bench-haproxy" // label of the nodes the controllers place on
	kubeAgentPort   = 8083
	kubeNamespaces  = 50 // the Ingresses present spread over team-00 … team-49
)

// kubeWorld is one run's installation.
type kubeWorld struct {
	t       *testing.T
	dir     string
	srv     *kubeapi.Server
	counter *requestCounter // the benchmark's own requests
	cfg     *rest.Config    // admin, counted
	cs      kubernetes.Interface
	lab     *lab.Lab
	relay   *kubeapi.Proxy
	kube    map[string]string // kubeconfig by role: controller, agent (relayed), agent-direct
	idle    []string          // names of the nodes without HAProxy
	rate    []string          // --kube-api-qps/--kube-api-burst for every pier process, or none

	appPort, freshPort, flipPort int

	mu          sync.Mutex
	controllers []*kubeProc
	agents      []*kubeProc
	states      []string
}

// newKubeWorld starts the control plane, the lab with haproxyNodes node
// namespaces and the backends. Nothing of pier runs yet.
func newKubeWorld(t *testing.T, haproxyNodes, idleNodes int, rate []string) *kubeWorld {
	t.Helper()
	w := &kubeWorld{t: t, dir: t.TempDir(), kube: map[string]string{}, rate: rate, counter: newRequestCounter()}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	opts := kubeapi.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if os.Getenv("PIER_BENCH_KUBE_AUDIT") == "1" {
		opts.AuditPolicy = loadBalancerStatusAudit
	}
	srv, err := kubeapi.Start(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	w.srv = srv
	t.Cleanup(srv.Stop)
	w.cfg = srv.Config()
	w.cfg.Wrap(w.counter.wrap)
	if w.cs, err = kubernetes.NewForConfig(w.cfg); err != nil {
		t.Fatal(err)
	}
	w.must(w.install(ctx))
	w.must(w.buildLab(haproxyNodes))
	t.Cleanup(w.teardown) // after the lab's cleanup is registered: runs first
	w.relay, err = srv.StartProxy(net.JoinHostPort(w.lab.HostAddr.String(), "0"))
	w.must(err)
	t.Cleanup(w.relay.Close)
	w.must(w.identities(ctx))
	for i := range idleNodes {
		w.idle = append(w.idle, fmt.Sprintf("idle-%02d", i))
	}
	w.must(w.createNodes(ctx))
	w.startBackends()
	return w
}

// loadBalancerStatusAudit records every write of a LoadBalancer's status
// with the object sent (its resourceVersion, the nodes' reports) and the
// code answered: PIER_BENCH_KUBE_AUDIT=1 turns it on to follow a report
// that did not stay in the status. It slows the API server a little.
const loadBalancerStatusAudit = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Request
  verbs: ["update", "patch"]
  resources:
  - group: pier.dev
    resources: ["loadbalancers/status"]
- level: None
`

func (w *kubeWorld) must(err error) {
	w.t.Helper()
	if err != nil {
		w.t.Fatal(err)
	}
}

// install applies pier's CRD and RBAC (deploy/) and the IngressClass.
func (w *kubeWorld) install(ctx context.Context) error {
	crd, err := kubeapi.RepoPath("deploy", "crd-loadbalancers.yaml")
	if err != nil {
		return err
	}
	rbac, err := kubeapi.RepoPath("deploy", "rbac.yaml")
	if err != nil {
		return err
	}
	if err := kubeapi.ApplyFiles(ctx, w.cfg, crd, rbac); err != nil {
		return err
	}
	_, err = w.cs.NetworkingV1().IngressClasses().Create(ctx, IngressClass(), metav1.CreateOptions{})
	return err
}

// buildLab makes the HAProxy nodes' namespaces, with both address pools
// local on each node's lo, and the second flip member's address on the
// host link.
func (w *kubeWorld) buildLab(nodes int) error {
	lab.RemoveStale("ks")
	l, err := lab.Build(lab.Options{Prefix: "ks" + strconv.Itoa(os.Getpid()) + "-", Nodes: nodes, HostLink: true, Subnet: kubeLabSubnet})
	if err != nil {
		return err
	}
	w.lab = l
	w.t.Cleanup(l.Remove)
	for _, h := range l.Nodes {
		for _, p := range []netip.Prefix{kubeVIPPool, kubeFIPPool} {
			// A prefix on lo makes every address in it local: the node's
			// HAProxy binds them, and a client in the node reaches them.
			onLo := netip.PrefixFrom(p.Addr().Next(), p.Bits()).String()
			if out, err := exec.Command("ip", "-n", h.NS, "addr", "add", onLo, "dev", "lo").CombinedOutput(); err != nil {
				return fmt.Errorf("%s: address %s on lo: %v: %s", h.NS, onLo, err, out)
			}
		}
	}
	second := netip.PrefixFrom(kubeFlipSecond, 32).String()
	if out, err := exec.Command("ip", "addr", "add", second, "dev", l.HostLink).CombinedOutput(); err != nil {
		return fmt.Errorf("address %s on %s: %v: %s", second, l.HostLink, err, out)
	}
	return nil
}

// identities writes the kubeconfigs of pier's ServiceAccounts: the
// controllers' and the idle agents' dial the API server, the HAProxy
// nodes' agents the relay on the host link (keeping 127.0.0.1 as the
// name the serving certificate is checked against).
func (w *kubeWorld) identities(ctx context.Context) error {
	for _, id := range []struct{ role, sa, server string }{
		{"controller", "pier-controller", w.srv.Host()},
		{"agent", "pier-agent", "https://" + w.relay.Addr()},
		{"agent-direct", "pier-agent", w.srv.Host()},
	} {
		hours := int64(4 * 3600)
		tok, err := w.cs.CoreV1().ServiceAccounts(kubeLeaseNS).CreateToken(ctx, id.sa,
			&authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{ExpirationSeconds: &hours}}, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("token for %s: %w", id.sa, err)
		}
		cfg := clientcmdapi.NewConfig()
		cfg.Clusters["bench"] = &clientcmdapi.Cluster{Server: id.server, CertificateAuthorityData: w.srv.Config().CAData,
			TLSServerName: "127.0.0.1"}
		cfg.AuthInfos[id.sa] = &clientcmdapi.AuthInfo{Token: tok.Status.Token}
		cfg.Contexts["bench"] = &clientcmdapi.Context{Cluster: "bench", AuthInfo: id.sa}
		cfg.CurrentContext = "bench"
		path := filepath.Join(w.dir, id.role+".kubeconfig")
		if err := clientcmd.WriteToFile(*cfg, path); err != nil {
			return err
		}
		w.kube[id.role] = path
	}
	return nil
}

// createNodes writes every Node once, Ready: the lab nodes with their
// address and the label the controllers select, the idle ones without.
func (w *kubeWorld) createNodes(ctx context.Context) error {
	type node struct {
		name, addr string
		haproxy    bool
	}
	var nodes []node
	for _, h := range w.lab.Nodes {
		nodes = append(nodes, node{h.Name, h.Addr.String(), true})
	}
	for i, name := range w.idle {
		nodes = append(nodes, node{name, fmt.Sprintf("10.93.1.%d", i+1), false})
	}
	for _, n := range nodes {
		labels := map[string]string{corev1.LabelHostname: n.name}
		if n.haproxy {
			labels[kubeHAProxyNode] = "true"
		}
		obj, err := w.cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.name, Labels: labels}}, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("create node %s: %w", n.name, err)
		}
		now := metav1.Now()
		obj.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: n.addr}}
		obj.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue,
			LastHeartbeatTime: now, LastTransitionTime: now, Reason: "KubeletReady"}}
		if _, err := w.cs.CoreV1().Nodes().UpdateStatus(ctx, obj, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("node %s status: %w", n.name, err)
		}
	}
	return nil
}

// startBackends runs the echo servers on the host link: one for every
// Ingress present, one for the new ones, and the two flip members on one
// port at .1 and .2.
func (w *kubeWorld) startBackends() {
	host := w.lab.HostAddr
	w.appPort = w.serveEcho(netip.AddrPortFrom(host, 0), echo.Config{Namespace: "team", Service: "app", Pod: "app-pod"})
	w.freshPort = w.serveEcho(netip.AddrPortFrom(host, 0), echo.Config{Namespace: kubeFreshNS, Service: "fresh", Pod: "fresh-pod"})
	w.flipPort = w.serveEcho(netip.AddrPortFrom(host, 0), echo.Config{Namespace: flipNS, Service: "flip", Pod: flipMembers[0].pod})
	w.serveEcho(netip.AddrPortFrom(kubeFlipSecond, uint16(w.flipPort)), echo.Config{Namespace: flipNS, Service: "flip", Pod: flipMembers[1].pod})
}

func (w *kubeWorld) serveEcho(at netip.AddrPort, cfg echo.Config) int {
	l, err := net.Listen("tcp", at.String())
	if err != nil {
		w.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = echo.Serve(ctx, l, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	}()
	w.t.Cleanup(func() { cancel(); <-done })
	return l.Addr().(*net.TCPAddr).Port
}

// flipAddr is flip member i's address.
func (w *kubeWorld) flipAddr(i int) string {
	if i == 0 {
		return w.lab.HostAddr.String()
	}
	return kubeFlipSecond.String()
}

// ---- the pier processes

// startAgents starts one agent per node: in its namespace on the HAProxy
// nodes, here on the idle ones.
func (w *kubeWorld) startAgents() {
	for _, h := range w.lab.Nodes {
		api := netip.AddrPortFrom(h.Addr, kubeAgentPort).String()
		argv := append([]string{"ip", "netns", "exec", h.NS, pierBin(w.t), "agent", "--kubeconfig", w.kube["agent"]},
			w.agentArgs(h.Name, api)...)
		w.addAgent(startKubeProc(w.t, w.dir, "agent-"+h.Name, api, argv...))
	}
	for _, name := range w.idle {
		api := freeLocalAddr(w.t)
		argv := append([]string{pierBin(w.t), "agent", "--kubeconfig", w.kube["agent-direct"]}, w.agentArgs(name, api)...)
		w.addAgent(startKubeProc(w.t, w.dir, "agent-"+name, api, argv...))
	}
}

func (w *kubeWorld) agentArgs(node, api string) []string {
	state, err := os.MkdirTemp("", "ks") // short: HAProxy's socket paths must fit in 108 bytes
	w.must(err)
	w.mu.Lock()
	w.states = append(w.states, state)
	w.mu.Unlock()
	return append([]string{"--node", node, "--state-dir", state, "--api-addr", api,
		"--lease-namespace", kubeLeaseNS, "--log-level", "info"}, w.rate...)
}

func (w *kubeWorld) addAgent(p *kubeProc) {
	w.mu.Lock()
	w.agents = append(w.agents, p)
	w.mu.Unlock()
}

// startControllers starts the two controller replicas; a Lease elects
// the one that writes.
func (w *kubeWorld) startControllers(maxIngresses int) {
	for i := 1; i <= 2; i++ {
		api := freeLocalAddr(w.t)
		argv := append([]string{pierBin(w.t), "controller", "--kubeconfig", w.kube["controller"], "--api-addr", api,
			"--identity", fmt.Sprintf("ctl-%d", i), "--internal-pool", kubeVIPPool.String(), "--public-pool", kubeFIPPool.String(),
			"--node-selector", kubeHAProxyNode + "=true", "--lease-namespace", kubeLeaseNS,
			"--max-ingresses", strconv.Itoa(maxIngresses), "--log-level", "info"}, w.rate...)
		p := startKubeProc(w.t, w.dir, fmt.Sprintf("controller-%d", i), api, argv...)
		w.mu.Lock()
		w.controllers = append(w.controllers, p)
		w.mu.Unlock()
	}
}

// waitUp waits for every pier process to answer on its API.
func (w *kubeWorld) waitUp() {
	w.mu.Lock()
	procs := append(append([]*kubeProc(nil), w.controllers...), w.agents...)
	w.mu.Unlock()
	for _, p := range procs {
		p.waitHTTP(w.t, "/metrics")
	}
}

// leader is the controller replica holding the leader Lease.
func (w *kubeWorld) leader(ctx context.Context) (*kubeProc, *kubeProc) {
	l, err := w.cs.CoordinationV1().Leases(kubeLeaseNS).Get(ctx, "pier-controller", metav1.GetOptions{})
	w.must(err)
	holder := ""
	if l.Spec.HolderIdentity != nil {
		holder = *l.Spec.HolderIdentity
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if holder == "ctl-2" {
		return w.controllers[1], w.controllers[0]
	}
	return w.controllers[0], w.controllers[1]
}

// teardown stops the controllers (nothing re-places), then the agents;
// the lab's removal, which runs after, ends the HAProxy processes they
// leave.
func (w *kubeWorld) teardown() {
	w.mu.Lock()
	procs := append(append([]*kubeProc(nil), w.controllers...), w.agents...)
	states := w.states
	w.mu.Unlock()
	for _, p := range procs {
		p.stop(10 * time.Second)
	}
	if w.t.Failed() {
		for _, p := range procs {
			w.t.Logf("--- %s log (%s), last lines:\n%s", p.name, p.logPath, p.tail(20))
		}
	}
	// The logs go beside the results when the run failed or
	// PIER_BENCH_KUBE_KEEP_LOGS=1 asks for them.
	if out := os.Getenv("PIER_BENCH_OUT"); out != "" && (w.t.Failed() || os.Getenv("PIER_BENCH_KUBE_KEEP_LOGS") == "1") {
		keep := filepath.Join(out, "kube-logs-"+strings.ReplaceAll(w.t.Name(), "/", "-"))
		if err := os.MkdirAll(keep, 0o755); err == nil {
			for _, p := range procs {
				if b, err := os.ReadFile(p.logPath); err == nil {
					_ = os.WriteFile(filepath.Join(keep, filepath.Base(p.logPath)), b, 0o644)
				}
			}
			if b, err := os.ReadFile(w.srv.AuditLog()); err == nil {
				_ = os.WriteFile(filepath.Join(keep, "audit.log"), b, 0o644)
			}
			w.t.Logf("pier's logs kept in %s", keep)
		}
	}
	for _, dir := range states {
		os.RemoveAll(dir)
	}
}

// ---- objects

const (
	kubeFreshNS = "fresh"
)

// createObjects creates n Ingresses in kubeNamespaces namespaces, each
// with its Service and EndpointSlice (the app backend), and the flip
// Service and Ingress, with workers in parallel. It returns the names
// (namespace/name) of every Ingress of pier's class.
func (w *kubeWorld) createObjects(ctx context.Context, n int) []string {
	namespaces := []string{flipNS, kubeFreshNS}
	for i := range kubeNamespaces {
		namespaces = append(namespaces, fmt.Sprintf("team-%02d", i))
	}
	for _, ns := range namespaces {
		_, err := w.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		w.must(err)
	}
	svc, _ := Backend(flipNS, "flip", int32(w.flipPort))
	es := flipSlice(w.flipPort, 0).(*discoveryv1.EndpointSlice)
	es.Endpoints[0].Addresses = []string{w.flipAddr(0)}
	w.must(w.createBackend(ctx, svc, es))
	w.must(w.createIngress(ctx, Ingress(flipNS, "flip", 0, Rule(flipHost, Prefix("/", "flip")))))
	names := []string{flipNS + "/flip"}

	jobs := make(chan int)
	errs := make(chan error, 1)
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for i := range jobs {
				ns, name := fmt.Sprintf("team-%02d", i%kubeNamespaces), fmt.Sprintf("app-%05d", i)
				svc, es := Backend(ns, name, int32(w.appPort), w.lab.HostAddr.String())
				err := w.createBackend(ctx, svc, es)
				if err == nil {
					err = w.createIngress(ctx, Ingress(ns, name, i, Rule(name+".bench.example", Prefix("/", name))))
				}
				if err != nil {
					select {
					case errs <- err:
					default:
					}
				}
			}
		})
	}
	for i := range n {
		jobs <- i
		names = append(names, fmt.Sprintf("team-%02d/app-%05d", i%kubeNamespaces, i))
	}
	close(jobs)
	wg.Wait()
	select {
	case err := <-errs:
		w.t.Fatal(err)
	default:
	}
	return names
}

func (w *kubeWorld) createBackend(ctx context.Context, svc *corev1.Service, es *discoveryv1.EndpointSlice) error {
	svc, es = svc.DeepCopy(), es.DeepCopy()
	svc.TypeMeta, es.TypeMeta = metav1.TypeMeta{}, metav1.TypeMeta{}
	if _, err := w.cs.CoreV1().Services(svc.Namespace).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create service %s/%s: %w", svc.Namespace, svc.Name, err)
	}
	if _, err := w.cs.DiscoveryV1().EndpointSlices(es.Namespace).Create(ctx, es, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create endpointslice %s/%s: %w", es.Namespace, es.Name, err)
	}
	return nil
}

func (w *kubeWorld) createIngress(ctx context.Context, ing *networkingv1.Ingress) error {
	ing = ing.DeepCopy()
	ing.TypeMeta, ing.CreationTimestamp = metav1.TypeMeta{}, metav1.Time{}
	if _, err := w.cs.NetworkingV1().Ingresses(ing.Namespace).Create(ctx, ing, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create ingress %s/%s: %w", ing.Namespace, ing.Name, err)
	}
	return nil
}

// ---- processes

// kubeProc is one pier process of the world, logging to a file.
type kubeProc struct {
	name    string
	api     string // host:port of its HTTP API
	logPath string
	cmd     *exec.Cmd
	done    chan struct{}
}

func startKubeProc(t *testing.T, dir, name, api string, argv ...string) *kubeProc {
	t.Helper()
	logPath := filepath.Join(dir, name+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	p := &kubeProc{name: name, api: api, logPath: logPath, done: make(chan struct{})}
	p.cmd = exec.Command(argv[0], argv[1:]...)
	p.cmd.Stdout, p.cmd.Stderr = logFile, logFile
	// Its own group (a ^C reaches the test first); killed with the test.
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		logFile.Close()
		t.Fatal(err)
	}
	go func() { _ = p.cmd.Wait(); logFile.Close(); close(p.done) }()
	return p
}

func (p *kubeProc) pid() int { return p.cmd.Process.Pid }

func (p *kubeProc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// waitHTTP waits until the process answers path on its API.
func (p *kubeProc) waitHTTP(t *testing.T, path string) {
	t.Helper()
	client := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if resp, err := client.Get("http://" + p.api + path); err == nil {
			resp.Body.Close()
			return
		}
		if p.exited() {
			t.Fatalf("%s exited during start-up:\n%s", p.name, p.tail(30))
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s: no answer on %s within 60 s\n%s", p.name, path, p.tail(30))
}

// stop sends SIGTERM and waits up to grace, then kills.
func (p *kubeProc) stop(grace time.Duration) {
	if p.exited() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

func (p *kubeProc) tail(n int) string {
	b, _ := os.ReadFile(p.logPath)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func freeLocalAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// pierBin is $PIER_BIN, the pier binary bench/run.sh builds.
func pierBin(t *testing.T) string {
	t.Helper()
	bin := os.Getenv("PIER_BIN")
	if bin == "" {
		t.Fatal("PIER_BIN is not set: bench/run.sh sets it")
	}
	return bin
}
