//go:build linux

package cluster

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"

	"pier.dev/pier/test/harness"
	"pier.dev/pier/test/kubeapi"
)

// The pier installation of the suite: the chart's namespace, the app's,
// and the address pools on the lab's segment (the VIPs move between the
// nodes' eth0 by VRRP; the client reaches them by ARP).
const (
	pierNS       = "pier-system"
	appNS        = "demo" // the seed examples' namespace
	release      = "pier"
	internalPool = "10.97.0.128/26"
	publicPool   = "10.97.0.192/26"
	appPort      = 3000
	// crashTarget is the pair's unplanned failover bound in this suite: a
	// kill -9 of the holder's HAProxy is served again by the standby
	// within it (the lab's figure is well under; docs/failover.md).
	crashTarget = time.Second
	// podReplacedWithin bounds a deleted agent pod's replacement: its
	// handover and HAProxy's stop (5 s grace), the kubelet's teardown, the
	// new pod's start and its readiness probe (every 5 s).
	podReplacedWithin = 40 * time.Second
)

// TestClusterPierLifecycle installs pier with its Helm chart on real
// kubelet nodes and puts it through what users do to it, with traffic
// from the client namespace through the VIP of the seed's single-service
// Ingress to echo pods all along: install, a rollout to rebuilt images,
// the deletion of the active agent's pod, a drain of the active node, a
// crash of the active HAProxy, the deletion of the leading controller,
// and uninstall, which must leave the nodes as they were.
func TestClusterPierLifecycle(t *testing.T) {
	c := Shared(t)
	images := map[string]string{"agent": c.Image(t, "agent"), "controller": c.Image(t, "controller")}
	echo := c.Image(t, "echo")
	if _, err := HelmBinary(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Minute)
	defer cancel()

	before := c.footprints(ctx)
	c.Namespace(t, appNS)
	if err := c.deployApp(ctx, echo); err != nil {
		t.Fatal(err)
	}
	lc := &lifecycle{t: t, c: c, ctx: ctx, stateDir: filepath.Join(c.Dir, "pier-state")}
	t.Cleanup(func() {
		_, _ = c.Helm(context.Background(), "uninstall", release, "-n", pierNS, "--wait", "--ignore-not-found")
	})

	if !t.Run("install", func(t *testing.T) { lc.install(t, images) }) {
		t.FailNow() // nothing after it means anything without it
	}
	t.Run("rollout", lc.rollout)
	t.Run("pod deletion", lc.podDeletion)
	t.Run("node drain", lc.nodeDrain)
	t.Run("crash", lc.crash)
	t.Run("controller", lc.controllerLoss)
	t.Run("uninstall", func(t *testing.T) { lc.uninstall(t, before) })
}

// lifecycle is the state the steps of TestClusterPierLifecycle share.
type lifecycle struct {
	t        *testing.T
	c        *Cluster
	ctx      context.Context
	stateDir string
	// vip and fip of the single-service Ingress, whose traffic every step
	// counts.
	vip, fip netip.Addr
}

// values are the chart values of the suite: the images imported on the
// nodes (never pulled), VRRP on the nodes' eth0, the pools on the lab's
// segment, the API server at the relay (no kube-proxy here), and a short
// hard-stop-after so that a stopping agent's HAProxy ends in seconds.
func (lc *lifecycle) values(images map[string]string) []string {
	agentRepo, agentTag := SplitImage(images["agent"])
	ctlRepo, ctlTag := SplitImage(images["controller"])
	return []string{
		"--set", "agent.image.repository=" + agentRepo, "--set", "agent.image.tag=" + agentTag,
		"--set", "agent.image.pullPolicy=Never",
		"--set", "controller.image.repository=" + ctlRepo, "--set", "controller.image.tag=" + ctlTag,
		"--set", "controller.image.pullPolicy=Never",
		"--set", "addressing.mode=vrrp", "--set", "vrrp.interface=eth0",
		"--set", "pools.internal=" + internalPool, "--set", "pools.public=" + publicPool,
		"--set", "kubernetesAPI.host=" + lc.c.APIHost(), "--set", "kubernetesAPI.port=" + strconv.Itoa(lc.c.APIPort()),
		"--set", "agent.stateHostPath=" + lc.stateDir,
		"--set-json", `agent.extraArgs=["--hard-stop-after=10s"]`,
	}
}

func (lc *lifecycle) install(t *testing.T, images map[string]string) {
	c, ctx := lc.c, lc.ctx
	chart, err := kubeapi.RepoPath("deploy", "chart", "pier")
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	args := append([]string{"install", release, chart, "-n", pierNS, "--create-namespace", "--wait", "--timeout", "5m"},
		lc.values(images)...)
	if out, err := c.Helm(ctx, args...); err != nil {
		lc.dumpPier(t)
		t.Fatal(err)
	} else {
		t.Logf("helm install: %s (%s)", firstLine(out), time.Since(start).Round(time.Second))
	}
	if err := c.WaitDaemonSet(ctx, pierNS, "pier-agent"); err != nil {
		lc.dumpPier(t)
		t.Fatal(err)
	}
	if err := c.WaitDeployment(ctx, pierNS, "pier-controller"); err != nil {
		lc.dumpPier(t)
		t.Fatal(err)
	}
	agents, err := c.WaitPods(ctx, pierNS, "app.kubernetes.io/component=agent", len(c.Nodes))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range agents {
		if !PodReady(&p) || p.Status.PodIP != c.Node(p.Spec.NodeName).Addr.String() {
			t.Errorf("agent pod %s on %s: ready %v, IP %s (want the node's own address: host network)",
				p.Name, p.Spec.NodeName, PodReady(&p), p.Status.PodIP)
		}
	}
	leader, err := lc.leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("controller leader: %s", leader)

	// The seed's three examples, applied as a user would (their Services
	// given a selector: here pods back them, not hand-written slices).
	if err := lc.applyExamples(ctx); err != nil {
		t.Fatal(err)
	}
	addrs := map[string][]string{}
	for _, name := range []string{"single-service", "simple-fanout", "virtual-hosting"} {
		got, err := lc.waitIngressAddresses(ctx, name)
		if err != nil {
			lc.dumpPier(t)
			t.Fatal(err)
		}
		addrs[name] = got
	}
	t.Logf("Ingress addresses: %v (%s after helm install began)", addrs, time.Since(start).Round(time.Second))
	lc.vip, lc.fip = netip.MustParseAddr(addrs["single-service"][0]), netip.MustParseAddr(addrs["single-service"][1])
	for _, probe := range []struct{ name, host, path string }{
		{"single-service", "any.example", "/anything"},
		{"simple-fanout", "", "/dev/x"},
		{"simple-fanout", "", "/qa/y"},
		{"virtual-hosting", "www.juniper.example", "/"},
		{"virtual-hosting", "www.cisco.example", "/"},
	} {
		vip := addrs[probe.name][0]
		host := probe.host
		if host == "" {
			host = vip
		}
		tr := c.StartTraffic(TrafficOptions{Addr: vip, Port: 80, Host: host, Path: probe.path, Interval: 20 * time.Millisecond})
		time.Sleep(time.Second)
		res := tr.Stop()
		if res.Requests == 0 || res.Failed() > 0 || len(res.Pods) == 0 {
			t.Errorf("%s %s%s through %s: %s", probe.name, host, probe.path, vip, res)
		}
	}
}

// rollout upgrades the release to images rebuilt under another tag: the
// DaemonSet and the Deployment roll, node by node, with no failed request.
func (lc *lifecycle) rollout(t *testing.T) {
	c, ctx := lc.c, lc.ctx
	const tag = "rollout"
	next := map[string]string{}
	for _, role := range []string{"agent", "controller"} {
		path, err := BuildImage(role, tag)
		if err != nil {
			t.Fatal(err)
		}
		names, err := c.ImportImage(path)
		if err != nil {
			t.Fatal(err)
		}
		next[role] = names[0]
	}
	chart, err := kubeapi.RepoPath("deploy", "chart", "pier")
	if err != nil {
		t.Fatal(err)
	}
	tr := lc.traffic()
	start := time.Now()
	args := append([]string{"upgrade", release, chart, "-n", pierNS, "--wait", "--timeout", "8m"}, lc.values(next)...)
	_, err = c.Helm(ctx, args...)
	if err == nil {
		err = c.WaitDaemonSet(ctx, pierNS, "pier-agent")
	}
	if err == nil {
		err = c.WaitDeployment(ctx, pierNS, "pier-controller")
	}
	time.Sleep(2 * time.Second)
	res := tr.Stop()
	if err != nil {
		lc.dumpPier(t)
		t.Fatal(err)
	}
	t.Logf("rollout to %v in %s: %s", next, time.Since(start).Round(time.Second), res)
	lc.expectNoFailure(t, "the rollout", res)
	pods, err := c.Clientset.CoreV1().Pods(pierNS).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil {
			continue
		}
		role := p.Labels["app.kubernetes.io/component"]
		if img := p.Spec.Containers[0].Image; img != next[role] {
			t.Errorf("pod %s (%s) runs %s after the upgrade, want %s", p.Name, role, img, next[role])
		}
	}
}

// podDeletion deletes the pod of the agent that holds the VIP, as
// `kubectl delete pod` does: its addresses go to the standby first.
func (lc *lifecycle) podDeletion(t *testing.T) {
	c, ctx := lc.c, lc.ctx
	holder := lc.holder(t)
	pod, err := c.PodOn(ctx, pierNS, "app.kubernetes.io/component=agent", holder)
	if err != nil {
		t.Fatal(err)
	}
	logs := c.FollowPodLog(pierNS, pod.Name, 60)
	tr := lc.traffic()
	time.Sleep(time.Second)
	start := time.Now()
	if err := c.Clientset.CoreV1().Pods(pierNS).Delete(ctx, pod.Name, metav1.DeleteOptions{}); err != nil {
		tr.Stop()
		t.Fatal(err)
	}
	moved := lc.waitHolderNot(holder, 30*time.Second)
	err = lc.waitPodReplaced(ctx, pod)
	if err == nil {
		err = c.WaitDaemonSet(ctx, pierNS, "pier-agent")
	}
	time.Sleep(2 * time.Second)
	res := tr.Stop()
	if err != nil {
		lc.dumpPier(t)
		t.Fatal(err)
	}
	t.Logf("deleted agent pod %s on %s: the VIP left it after %s, a new pod Ready after %s; %s",
		pod.Name, holder, moved.Sub(start).Round(time.Millisecond), time.Since(start).Round(time.Second), res)
	last := logs()
	lc.expectNoFailure(t, "the pod deletion", res)
	// The stop is bounded by the handover's 5 s grace: a pod whose HAProxy
	// master cannot signal its workers (no KILL capability) waits for
	// HAProxy's stop timeout, a minute, and so does every rollout's step.
	if took := time.Since(start); took > podReplacedWithin {
		t.Errorf("the agent pod on %s was replaced and Ready %s after its deletion, want within %s; its last lines:\n%s",
			holder, took.Round(time.Second), podReplacedWithin, last)
	}
}

// nodeDrain drains the node that holds the VIP, as `kubectl drain
// --ignore-daemonsets` does: the agent stays (it tolerates the cordon),
// hands its addresses over, and the node's other pods are evicted.
func (lc *lifecycle) nodeDrain(t *testing.T) {
	c, ctx := lc.c, lc.ctx
	holder := lc.holder(t)
	tr := lc.traffic()
	time.Sleep(time.Second)
	start := time.Now()
	err := c.Drain(ctx, holder)
	moved := lc.waitHolderNot(holder, 30*time.Second)
	if err == nil {
		// The echo pods evicted from the node run on the other one again.
		err = c.WaitDeployment(ctx, appNS, "echo")
	}
	time.Sleep(2 * time.Second)
	res := tr.Stop()
	if uerr := c.Cordon(context.Background(), holder, false); uerr != nil && err == nil {
		err = uerr
	}
	if err != nil {
		lc.dumpPier(t)
		t.Fatal(err)
	}
	t.Logf("drained %s: the VIP left it after %s; %s", holder, moved.Sub(start).Round(time.Millisecond), res)
	lc.expectNoFailure(t, "the drain", res)
	if err := c.WaitDeployment(ctx, pierNS, "pier-controller"); err != nil {
		t.Fatal(err)
	}
}

// crash kills the holder's HAProxy with SIGKILL, found through its
// agent's container cgroup: the standby serves again within crashTarget.
func (lc *lifecycle) crash(t *testing.T) {
	c, ctx := lc.c, lc.ctx
	holder := lc.holder(t)
	pod, err := c.PodOn(ctx, pierNS, "app.kubernetes.io/component=agent", holder)
	if err != nil {
		t.Fatal(err)
	}
	pids, err := PodContainerPids(pod, "agent")
	if err != nil {
		t.Fatal(err)
	}
	haproxy := ProcessesNamed(pids, "haproxy")
	if len(haproxy) == 0 {
		t.Fatalf("no haproxy among the processes of %s's agent container: %v", holder, pids)
	}
	tr := lc.traffic()
	time.Sleep(time.Second)
	fault := time.Now()
	for _, pid := range haproxy {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	moved := lc.waitHolderNot(holder, 10*time.Second)
	time.Sleep(3 * time.Second)
	res := tr.Stop()
	failed := harness.Failed(res.Samples, fault, time.Now())
	recovered, ok := recoveredAfter(res.Samples, fault)
	t.Logf("kill -9 of %d haproxy processes in %s's agent container: the VIP left it after %s, served again %s after the kill; %s",
		len(haproxy), holder, moved.Sub(fault).Round(time.Millisecond), recovered.Round(time.Millisecond), res)
	switch {
	case !ok:
		t.Errorf("not served again after the crash: %s", res)
	case recovered > crashTarget:
		t.Errorf("served again %s after the crash, target %s", recovered, crashTarget)
	}
	if n := len(failed); n > 0 && failedBefore(failed, fault.Add(crashTarget)) != n {
		t.Errorf("%d of %d failed requests came after the failover window", n-failedBefore(failed, fault.Add(crashTarget)), n)
	}
	if restarts := podRestarts(ctx, c, pod); restarts != 0 {
		t.Logf("the agent container restarted %d times after its HAProxy was killed", restarts)
	}
}

// controllerLoss deletes the leading controller pod: another replica
// leads, status keeps being written (a new Ingress gets its addresses),
// and no address moves.
func (lc *lifecycle) controllerLoss(t *testing.T) {
	c, ctx := lc.c, lc.ctx
	leader, err := lc.leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	pod := leaderPod(leader)
	before, err := lc.ingressAddresses(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tr := lc.traffic()
	start := time.Now()
	if err := c.Clientset.CoreV1().Pods(pierNS).Delete(ctx, pod, metav1.DeleteOptions{}); err != nil {
		tr.Stop()
		t.Fatal(err)
	}
	var next string
	err = poll(ctx, "a new controller leader", func() (bool, string, error) {
		id, err := lc.leader(ctx)
		next = id
		return err == nil && leaderPod(id) != pod, id, nil
	})
	if err != nil {
		tr.Stop()
		t.Fatal(err)
	}
	took := time.Since(start)
	ing := lc.exampleIngress("after-leader-change", "after.example")
	if _, err := c.Clientset.NetworkingV1().Ingresses(appNS).Create(ctx, ing, metav1.CreateOptions{}); err != nil {
		tr.Stop()
		t.Fatal(err)
	}
	got, err := lc.waitIngressAddresses(ctx, ing.Name)
	res := tr.Stop()
	if err != nil {
		lc.dumpPier(t)
		t.Fatal(err)
	}
	t.Logf("deleted the leader %s: %s leads after %s; a new Ingress got %v; %s", pod, next, took.Round(time.Second), got, res)
	lc.expectNoFailure(t, "the leader's loss", res)
	after, err := lc.ingressAddresses(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for name, addrs := range before {
		if !slices.Equal(after[name], addrs) {
			t.Errorf("Ingress %s was %v, now %v: nothing may be re-addressed", name, addrs, after[name])
		}
	}
}

// uninstall removes the release: what pier made on the nodes (its
// nftables tables, the addresses it held, its routes, its state folders)
// must be gone, the nodes as they were before the install.
func (lc *lifecycle) uninstall(t *testing.T, before map[string][]string) {
	c, ctx := lc.c, lc.ctx
	during := c.footprints(ctx)
	if _, err := c.Helm(ctx, "uninstall", release, "-n", pierNS, "--wait", "--timeout", "3m"); err != nil {
		t.Fatal(err)
	}
	err := poll(ctx, "the agent pods gone", func() (bool, string, error) {
		pods, err := c.Clientset.CoreV1().Pods(pierNS).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "", err
		}
		return len(pods.Items) == 0, fmt.Sprintf("%d pods", len(pods.Items)), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	after := c.footprints(ctx)
	for _, n := range c.Nodes {
		t.Logf("%s: before the install %v; installed %v; after the uninstall %v", n.Name, before[n.Name], during[n.Name], after[n.Name])
		if !slices.Equal(after[n.Name], before[n.Name]) {
			t.Errorf("%s after the uninstall: %v, want what was there before the install: %v", n.Name, after[n.Name], before[n.Name])
		}
	}
	entries, _ := os.ReadDir(lc.stateDir)
	var left []string
	for _, e := range entries {
		sub, _ := os.ReadDir(filepath.Join(lc.stateDir, e.Name()))
		for _, s := range sub {
			left = append(left, filepath.Join(e.Name(), s.Name()))
		}
	}
	if len(left) > 0 {
		t.Errorf("state left under the agents' host path %s: %v", lc.stateDir, left)
	}
}

// traffic runs requests to the single-service Ingress's VIP.
func (lc *lifecycle) traffic() *Traffic {
	return lc.c.StartTraffic(TrafficOptions{Addr: lc.vip.String(), Port: 80, Host: "app.example", Path: "/", Interval: 10 * time.Millisecond})
}

func (lc *lifecycle) expectNoFailure(t *testing.T, what string, res TrafficResult) {
	t.Helper()
	if res.Requests == 0 {
		t.Errorf("no request ran during %s", what)
	}
	if f := res.Failed(); f > 0 {
		var failed []string
		for _, s := range res.Samples {
			if !s.OK && len(failed) < 5 {
				failed = append(failed, fmt.Sprintf("%s %s+%s: %s", s.Client, s.Start.Format("15:04:05.000"),
					s.End.Sub(s.Start).Round(time.Millisecond), s.Err))
			}
		}
		t.Errorf("%d of %d requests failed during %s: %s; the first: %s", f, res.Requests, what, res, strings.Join(failed, "; "))
	}
}

// holder is the node whose eth0 holds the VIP now.
func (lc *lifecycle) holder(t *testing.T) string {
	t.Helper()
	var holders []string
	for _, n := range lc.c.Nodes {
		if n.Host.Has(lc.vip) {
			holders = append(holders, n.Name)
		}
	}
	if len(holders) != 1 {
		t.Fatalf("VIP %s held by %v, want one node", lc.vip, holders)
	}
	return holders[0]
}

// waitHolderNot waits until another node than from holds the VIP and
// returns when; the zero time if none did within limit.
func (lc *lifecycle) waitHolderNot(from string, limit time.Duration) time.Time {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		for _, n := range lc.c.Nodes {
			if n.Name != from && n.Host.Has(lc.vip) {
				return time.Now()
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	return time.Time{}
}

func (lc *lifecycle) waitPodReplaced(ctx context.Context, old *corev1.Pod) error {
	return poll(ctx, "agent pod on "+old.Spec.NodeName+" replaced", func() (bool, string, error) {
		p, err := lc.c.PodOn(ctx, pierNS, "app.kubernetes.io/component=agent", old.Spec.NodeName)
		if err != nil {
			return false, err.Error(), nil
		}
		return p.UID != old.UID && PodReady(p), p.Name, nil
	})
}

// leader is the holder identity of the controller's leader-election Lease.
func (lc *lifecycle) leader(ctx context.Context) (string, error) {
	var id string
	err := poll(ctx, "a controller leader", func() (bool, string, error) {
		l, err := lc.c.Clientset.CoordinationV1().Leases(pierNS).Get(ctx, "pier-controller", metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" {
			return false, "no holder", nil
		}
		id = *l.Spec.HolderIdentity
		return true, "", nil
	})
	return id, err
}

// leaderPod is the pod name in a leader identity (the pod's name, then a
// unique suffix after an underscore).
func leaderPod(identity string) string {
	name, _, _ := strings.Cut(identity, "_")
	return name
}

func (lc *lifecycle) waitIngressAddresses(ctx context.Context, name string) ([]string, error) {
	var got []string
	err := poll(ctx, "Ingress "+name+" has its VIP and FIP", func() (bool, string, error) {
		ing, err := lc.c.Clientset.NetworkingV1().Ingresses(appNS).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		got = nil
		for _, a := range ing.Status.LoadBalancer.Ingress {
			got = append(got, a.IP)
		}
		return len(got) == 2 && inPool(got[0], internalPool) && inPool(got[1], publicPool), fmt.Sprint(got), nil
	})
	return got, err
}

func (lc *lifecycle) ingressAddresses(ctx context.Context) (map[string][]string, error) {
	list, err := lc.c.Clientset.NetworkingV1().Ingresses(appNS).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	out := map[string][]string{}
	for _, ing := range list.Items {
		for _, a := range ing.Status.LoadBalancer.Ingress {
			out[ing.Name] = append(out[ing.Name], a.IP)
		}
	}
	return out, nil
}

func inPool(addr, pool string) bool {
	a, err := netip.ParseAddr(addr)
	return err == nil && netip.MustParsePrefix(pool).Contains(a)
}

// deployApp runs the echo pods the examples' Services select: two, one
// per node where the scheduler can, kept at one at least by a
// PodDisruptionBudget so that a drain evicts them one at a time.
func (c *Cluster) deployApp(ctx context.Context, image string) error {
	labels := map[string]string{"app": "echo"}
	// An app that keeps serving a moment after SIGTERM, as a preStop sleep
	// makes any app: an evicted pod's endpoint reaches HAProxy through the
	// EndpointSlice controller, the API server and pier, while the kubelet
	// tears the pod's network down as soon as its process has ended; a
	// drain that also evicts pier's leading controller widens that gap.
	echo := echoContainer(c, image, appPort)
	echo.Args = append(echo.Args, "--shutdown-delay=3s")
	two, grace := int32(2), int64(10)
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "echo", Namespace: appNS},
		Spec: appsv1.DeploymentSpec{
			Replicas: &two,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					TerminationGracePeriodSeconds: &grace,
					Containers:                    []corev1.Container{echo},
					Affinity: &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
						PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{
							Weight: 100,
							PodAffinityTerm: corev1.PodAffinityTerm{
								LabelSelector: &metav1.LabelSelector{MatchLabels: labels}, TopologyKey: corev1.LabelHostname,
							},
						}},
					}},
				},
			},
		},
	}
	if _, err := c.Clientset.AppsV1().Deployments(appNS).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		return err
	}
	one := intstr.FromInt32(1)
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "echo", Namespace: appNS},
		Spec:       policyv1.PodDisruptionBudgetSpec{MinAvailable: &one, Selector: &metav1.LabelSelector{MatchLabels: labels}},
	}
	if _, err := c.Clientset.PolicyV1().PodDisruptionBudgets(appNS).Create(ctx, pdb, metav1.CreateOptions{}); err != nil {
		return err
	}
	return c.WaitDeployment(ctx, appNS, "echo")
}

// applyExamples applies examples/*.yaml but the IngressClass (the chart
// made it): the seed's Ingresses as they are, their Services with a
// selector of the echo pods, and none of the hand-written EndpointSlices,
// which the EndpointSlice controller writes here.
func (lc *lifecycle) applyExamples(ctx context.Context) error {
	paths, err := filepath.Glob(filepath.Join(must(kubeapi.RepoPath("examples")), "*.yaml"))
	if err != nil {
		return err
	}
	objs, err := kubeapi.ReadManifests(paths...)
	if err != nil {
		return err
	}
	var keep []*unstructured.Unstructured
	for _, o := range objs {
		switch o.GetKind() {
		case "Ingress":
			keep = append(keep, o)
		case "Service":
			if err := selectEcho(o); err != nil {
				return err
			}
			keep = append(keep, o)
		}
	}
	return lc.c.Apply(ctx, keep...)
}

// selectEcho points a Service at the echo pods: its selector, and every
// port's target the pods' port.
func selectEcho(svc *unstructured.Unstructured) error {
	if err := unstructured.SetNestedStringMap(svc.Object, map[string]string{"app": "echo"}, "spec", "selector"); err != nil {
		return err
	}
	ports, _, err := unstructured.NestedSlice(svc.Object, "spec", "ports")
	if err != nil {
		return err
	}
	for _, p := range ports {
		p.(map[string]any)["targetPort"] = int64(appPort)
	}
	return unstructured.SetNestedSlice(svc.Object, ports, "spec", "ports")
}

// exampleIngress is an Ingress like the seed's single-service one, on
// host, to the same Service.
func (lc *lifecycle) exampleIngress(name, host string) *networkingIngress {
	return newIngress(appNS, name, host, "webservice-1", 80)
}

func must(s string, err error) string {
	if err != nil {
		panic(err)
	}
	return s
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return line
}

// recoveredAfter is how long after fault the first request that started
// after it succeeded; harness.Recovery measures the same.
func recoveredAfter(samples []harness.Sample, fault time.Time) (time.Duration, bool) {
	return harness.Recovery(samples, fault)
}

func failedBefore(failed []harness.Sample, t time.Time) int {
	n := 0
	for _, s := range failed {
		if s.Start.Before(t) {
			n++
		}
	}
	return n
}

func podRestarts(ctx context.Context, c *Cluster, pod *corev1.Pod) int32 {
	p, err := c.Clientset.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil || apierrors.IsNotFound(err) {
		return 0
	}
	var n int32
	for _, s := range p.Status.ContainerStatuses {
		n += s.RestartCount
	}
	return n
}

// footprints lists, per node, what pier makes there: nftables tables,
// addresses on eth0 beyond the node's own, routes pier tags (linger,
// proto 211) and the node's state folder entries.
func (c *Cluster) footprints(ctx context.Context) map[string][]string {
	out := map[string][]string{}
	for _, n := range c.Nodes {
		var items []string
		run := func(prefix string, name string, args ...string) {
			b, err := n.Host.Command(ctx, name, args...).CombinedOutput()
			if err != nil {
				items = append(items, fmt.Sprintf("%s: %v %s", prefix, err, strings.TrimSpace(string(b))))
				return
			}
			for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
				if line = strings.TrimSpace(line); line != "" {
					items = append(items, prefix+" "+line)
				}
			}
		}
		run("nft", "nft", "list", "tables")
		run("route", "ip", "route", "show", "table", "all", "proto", "211")
		b, _ := n.Host.Command(ctx, "ip", "-o", "-4", "addr", "show", "dev", "eth0").CombinedOutput()
		for _, line := range strings.Split(string(b), "\n") {
			f := strings.Fields(line)
			if len(f) >= 4 && !strings.HasPrefix(f[3], n.Addr.String()+"/") {
				items = append(items, "addr "+f[3])
			}
		}
		sort.Strings(items)
		out[n.Name] = items
	}
	return out
}

// dumpPier logs the pier pods' state and log tails, for a failure.
func (lc *lifecycle) dumpPier(t *testing.T) {
	t.Helper()
	pods, err := lc.c.Clientset.CoreV1().Pods(pierNS).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Logf("pods: %v", err)
		return
	}
	for _, p := range pods.Items {
		t.Logf("pod %s on %s: phase %s, ready %v, %s", p.Name, p.Spec.NodeName, p.Status.Phase, PodReady(&p), podWaiting(&p))
		for _, cs := range p.Status.ContainerStatuses {
			t.Logf("  %s: restarts %d, state %+v", cs.Name, cs.RestartCount, cs.State)
		}
		t.Logf("  log tail:\n%s", lc.c.PodLogTail(p.Namespace, p.Name, 40))
	}
}
