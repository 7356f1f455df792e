package nodesim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"pier.dev/pier/internal/echo"
	"pier.dev/pier/test/kubeapi"
)

// TestDeploymentServedByEchoBackends: with kube-controller-manager and the
// Sim, an upstream-shaped Deployment gets Running, Ready Pods on distinct
// pod IPs, the EndpointSlice controller publishes them, each answers as
// the conformance runner expects, and a scale-down removes endpoints and
// closes their sockets.
func TestDeploymentServedByEchoBackends(t *testing.T) {
	cs := clientset(t)
	ns := namespace(t, cs, "nodesim-deploy")
	sim := startSim(t, cs, Options{Heartbeat: 500 * time.Millisecond})
	start := time.Now()
	createEcho(t, cs, ns, "foo-bar", "foo-bar-svc", 3)

	pods := waitPods(t, cs, ns, 3)
	t.Logf("3 pods ready in %s", time.Since(start).Round(time.Millisecond))
	checkPlacement(t, sim, pods)
	eps := waitEndpoints(t, cs, ns, "foo-bar-svc", 3)
	t.Logf("3 endpoints published in %s", time.Since(start).Round(time.Millisecond))
	for ip, pod := range eps {
		got := get(t, ip, 3000)
		want := echo.Response{Namespace: ns, Ingress: "foo-bar", Service: "foo-bar-svc", Pod: pod}
		if got.Namespace != want.Namespace || got.Ingress != want.Ingress || got.Service != want.Service || got.Pod != want.Pod {
			t.Errorf("GET %s: identity %+v, want %+v", ip, got, want)
		}
		checkH2C(t, ip, pod)
	}

	scale(t, cs, ns, "foo-bar", 1)
	left := waitEndpoints(t, cs, ns, "foo-bar-svc", 1)
	waitPods(t, cs, ns, 1)
	t.Logf("scaled to 1 in %s", time.Since(start).Round(time.Millisecond))
	for ip := range eps {
		if _, kept := left[ip]; kept {
			get(t, ip, 3000)
		} else {
			assertRefused(t, ip, 3000)
		}
	}
	checkNodes(t, cs, sim)
}

// checkH2C: the Pod's echo answers h2c with prior knowledge on 3001 and
// HTTP/1.1 there with 400, as echo-basic's H2C_PORT.
func checkH2C(t *testing.T, ip, pod string) {
	t.Helper()
	url := "http://" + net.JoinHostPort(ip, "3001") + "/"
	var h2c http.Protocols
	h2c.SetUnencryptedHTTP2(true)
	client := &http.Client{Transport: &http.Transport{Protocols: &h2c}, Timeout: 5 * time.Second}
	resp, err := client.Get(url)
	if err != nil {
		t.Fatalf("h2c %s: %v", url, err)
	}
	var got echo.Response
	err = json.NewDecoder(resp.Body).Decode(&got)
	resp.Body.Close()
	if err != nil || got.Proto != "HTTP/2.0" || got.Pod != pod {
		t.Errorf("h2c %s: %+v, %v; want HTTP/2.0 from %s", url, got, err, pod)
	}
	resp, err = http.Get(url)
	if err != nil {
		t.Fatalf("HTTP/1.1 %s: %v", url, err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("HTTP/1.1 %s: status %d, want 400", url, resp.StatusCode)
	}
}

// TestStopGraceAndRestart: a Pod marked for deletion keeps serving for
// StopGrace, then its socket closes and the Pod object goes; a new Sim for
// the same Nodes adopts the running Pods on their old addresses; Stop
// leaves no goroutine and no listener behind.
func TestStopGraceAndRestart(t *testing.T) {
	cs := clientset(t)
	ns := namespace(t, cs, "nodesim-grace")
	const grace = 3 * time.Second
	sim := startSim(t, cs, Options{StopGrace: grace})
	createEcho(t, cs, ns, "grace", "grace-svc", 2)
	pods := waitPods(t, cs, ns, 2)

	victim, kept := pods[0], pods[1]
	if err := cs.CoreV1().Pods(ns).Delete(t.Context(), victim.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	deleted := time.Now()
	get(t, victim.Status.PodIP, 3000) // draining, still serving
	if p, err := cs.CoreV1().Pods(ns).Get(t.Context(), victim.Name, metav1.GetOptions{}); err != nil || p.DeletionTimestamp == nil {
		t.Errorf("victim during its grace: %v, want it still there, marked for deletion", err)
	}
	eventually(t, 30*time.Second, "victim's socket closed", func() error {
		return refused(victim.Status.PodIP, 3000)
	})
	if waited := time.Since(deleted); waited < grace-500*time.Millisecond {
		t.Errorf("backend stopped %s after the deletion, before the %s grace", waited, grace)
	}
	eventually(t, 30*time.Second, "victim deleted", func() error {
		if _, err := cs.CoreV1().Pods(ns).Get(t.Context(), victim.Name, metav1.GetOptions{}); err == nil {
			return errors.New("still there")
		}
		return nil
	})

	sim.Stop()
	assertNoLeaks(t)
	assertRefused(t, kept.Status.PodIP, 3000)

	startSim(t, cs, Options{})
	eventually(t, 30*time.Second, "kept pod served again", func() error {
		_, err := tryGet(kept.Status.PodIP, 3000)
		return err
	})
	pods = waitPods(t, cs, ns, 2) // the kept pod and the victim's replacement
	if i := slices.IndexFunc(pods, func(p corev1.Pod) bool { return p.Name == kept.Name }); i < 0 || pods[i].Status.PodIP != kept.Status.PodIP {
		t.Errorf("kept pod after restart: %v, want %s on %s", pods, kept.Name, kept.Status.PodIP)
	}
}

func clientset(t *testing.T) kubernetes.Interface {
	t.Helper()
	cs, err := kubernetes.NewForConfig(kubeapi.Shared(t).Config())
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

func startSim(t *testing.T, cs kubernetes.Interface, opts Options) *Sim {
	t.Helper()
	if testing.Verbose() {
		opts.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	sim, err := Start(t.Context(), cs, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sim.Stop)
	return sim
}

// namespace creates ns and waits for its default ServiceAccount: until it
// exists pods are refused, and the ReplicaSet controller's backoff would
// then dominate the test's time.
func namespace(t *testing.T, cs kubernetes.Interface, ns string) string {
	t.Helper()
	ctx := t.Context()
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "default service account", func() error {
		_, err := cs.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		return err
	})
	return ns
}

// createEcho creates what the upstream runner creates for one backend: a
// Deployment from its template and a Service with targetPort 3000.
func createEcho(t *testing.T, cs kubernetes.Interface, ns, ingress, service string, replicas int32) {
	t.Helper()
	labels := map[string]string{"app": ingress + "-" + service}
	probe := &corev1.Probe{
		ProbeHandler:     corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/health", Port: intstr.FromInt32(3000)}},
		PeriodSeconds:    1,
		FailureThreshold: 10,
	}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: ingress},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name:  "ingress-conformance-echo",
					Image: "registry.k8s.io/ingress-controller-conformance/echoserver",
					Env: []corev1.EnvVar{
						fieldEnv("POD_NAME", "metadata.name"),
						fieldEnv("NAMESPACE", "metadata.namespace"),
						{Name: "INGRESS_NAME", Value: ingress},
						{Name: "SERVICE_NAME", Value: service},
					},
					Ports:          []corev1.ContainerPort{{Name: "http", ContainerPort: 3000}},
					LivenessProbe:  probe,
					ReadinessProbe: probe,
				}}},
			},
		},
	}
	if _, err := cs.AppsV1().Deployments(ns).Create(t.Context(), dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: service},
		Spec: corev1.ServiceSpec{
			Selector: labels,
			Ports:    []corev1.ServicePort{{Name: "http", Port: 8080, TargetPort: intstr.FromInt32(3000)}},
		},
	}
	if _, err := cs.CoreV1().Services(ns).Create(t.Context(), svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func scale(t *testing.T, cs kubernetes.Interface, ns, name string, replicas int32) {
	t.Helper()
	// The simulator writes the Deployment's status meanwhile: a conflict
	// means read again and retry, as kubectl scale does.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		s, err := cs.AppsV1().Deployments(ns).GetScale(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		s.Spec.Replicas = replicas
		_, err = cs.AppsV1().Deployments(ns).UpdateScale(t.Context(), name, s, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// waitPods waits until ns holds exactly n Pods, all Running and Ready.
func waitPods(t *testing.T, cs kubernetes.Interface, ns string, n int) []corev1.Pod {
	t.Helper()
	var pods []corev1.Pod
	eventually(t, time.Minute, fmt.Sprintf("%d ready pods", n), func() error {
		list, err := cs.CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{})
		if err != nil {
			return err
		}
		pods = list.Items
		if len(pods) != n {
			return fmt.Errorf("%d pods", len(pods))
		}
		for _, p := range pods {
			if p.Status.Phase != corev1.PodRunning || !ready(p) || p.DeletionTimestamp != nil {
				return fmt.Errorf("pod %s: phase %s, ready %v", p.Name, p.Status.Phase, ready(p))
			}
		}
		return nil
	})
	return pods
}

func ready(p corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// checkPlacement: distinct pool addresses, round robin over both Nodes,
// hostIP the Node's.
func checkPlacement(t *testing.T, sim *Sim, pods []corev1.Pod) {
	t.Helper()
	seen := map[string]bool{}
	perNode := map[string]int{}
	for _, p := range pods {
		ip, err := netip.ParseAddr(p.Status.PodIP)
		if err != nil || !DefaultPodCIDR.Contains(ip) || seen[ip.String()] || ip == netip.MustParseAddr("10.244.0.1") {
			t.Errorf("pod %s: IP %q is not a distinct address of the pool", p.Name, p.Status.PodIP)
		}
		seen[ip.String()] = true
		perNode[p.Spec.NodeName]++
		if nodeIP, ok := sim.NodeIP(p.Spec.NodeName); !ok || p.Status.HostIP != nodeIP.String() {
			t.Errorf("pod %s on %q: hostIP %s, want the node's %s", p.Name, p.Spec.NodeName, p.Status.HostIP, nodeIP)
		}
	}
	if perNode["node-a"] == 0 || perNode["node-b"] == 0 {
		t.Errorf("pods per node %v, want both nodes used", perNode)
	}
}

// waitEndpoints waits until the Service's EndpointSlices list exactly n
// endpoints, all ready, and returns them as address → Pod name.
func waitEndpoints(t *testing.T, cs kubernetes.Interface, ns, svc string, n int) map[string]string {
	t.Helper()
	var eps map[string]string
	eventually(t, time.Minute, fmt.Sprintf("%d ready endpoints", n), func() error {
		list, err := cs.DiscoveryV1().EndpointSlices(ns).List(t.Context(), metav1.ListOptions{
			LabelSelector: discoveryv1.LabelServiceName + "=" + svc})
		if err != nil {
			return err
		}
		eps = map[string]string{}
		for _, s := range list.Items {
			if len(s.Ports) != 1 || s.Ports[0].Port == nil || *s.Ports[0].Port != 3000 {
				return fmt.Errorf("slice %s ports %v, want 3000", s.Name, s.Ports)
			}
			for _, e := range s.Endpoints {
				if e.Conditions.Ready == nil || !*e.Conditions.Ready || e.TargetRef == nil {
					return fmt.Errorf("endpoint %v not ready", e.Addresses)
				}
				eps[e.Addresses[0]] = e.TargetRef.Name
			}
		}
		if len(eps) != n {
			return fmt.Errorf("%d endpoints", len(eps))
		}
		return nil
	})
	return eps
}

func checkNodes(t *testing.T, cs kubernetes.Interface, sim *Sim) {
	t.Helper()
	for _, name := range DefaultNodes {
		node, err := cs.CoreV1().Nodes().Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ip, _ := sim.NodeIP(name)
		if node.Status.Addresses[0].Address != ip.String() || node.Status.Conditions[0].Type != corev1.NodeReady ||
			node.Status.Conditions[0].Status != corev1.ConditionTrue {
			t.Errorf("node %s: addresses %v, conditions %v", name, node.Status.Addresses, node.Status.Conditions)
		}
		lease, err := cs.CoordinationV1().Leases(leaseNamespace).Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("node %s lease: %v", name, err)
		}
		eventually(t, 10*time.Second, "lease renewed", func() error {
			again, err := cs.CoordinationV1().Leases(leaseNamespace).Get(t.Context(), name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if again.Spec.RenewTime.Equal(lease.Spec.RenewTime) {
				return errors.New("renew time unchanged")
			}
			return nil
		})
	}
}

// client sends nothing through a proxy from the environment: every
// address here is inside the namespace.
var client = &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}

func tryGet(ip string, port int) (echo.Response, error) {
	var r echo.Response
	resp, err := client.Get("http://" + net.JoinHostPort(ip, fmt.Sprint(port)) + "/probe")
	if err != nil {
		return r, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return r, err
	}
	if resp.StatusCode != http.StatusOK {
		return r, fmt.Errorf("status %s", resp.Status)
	}
	return r, json.Unmarshal(body, &r)
}

func get(t *testing.T, ip string, port int) echo.Response {
	t.Helper()
	r, err := tryGet(ip, port)
	if err != nil {
		t.Fatalf("GET %s:%d: %v", ip, port, err)
	}
	return r
}

func refused(ip string, port int) error {
	c, err := net.DialTimeout("tcp", net.JoinHostPort(ip, fmt.Sprint(port)), 2*time.Second)
	if err == nil {
		c.Close()
		return errors.New("connection accepted")
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		return fmt.Errorf("dial: %w, want connection refused", err)
	}
	return nil
}

func assertRefused(t *testing.T, ip string, port int) {
	t.Helper()
	if err := refused(ip, port); err != nil {
		t.Errorf("%s:%d: %v", ip, port, err)
	}
}

// assertNoLeaks: after Stop no goroutine runs Sim, echo or informer code
// (the Sims are the test binary's only informers).
func assertNoLeaks(t *testing.T) {
	t.Helper()
	eventually(t, 5*time.Second, "no nodesim goroutines", func() error {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		for g := range strings.SplitSeq(string(buf), "\n\n") {
			for _, mark := range []string{"nodesim.(*Sim)", "nodesim.Start", "internal/echo.", "cache.(*Reflector)"} {
				if strings.Contains(g, mark) {
					return fmt.Errorf("goroutine left:\n%s", g)
				}
			}
		}
		return nil
	})
}

func eventually(t *testing.T, wait time.Duration, what string, cond func() error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), wait)
	defer cancel()
	for {
		err := cond()
		if err == nil {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: not within %s: %v", what, wait, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
