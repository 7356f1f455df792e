//go:build linux

package cluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"pier.dev/pier/test/harness"
)

const echoPort = 3000

// echoContainer runs pier echo on port, reporting the pod's name; the API
// server's address is the relay's, as every pod that talks to it needs.
func echoContainer(c *Cluster, image string, port int) corev1.Container {
	return corev1.Container{
		Name:            "echo",
		Image:           image,
		ImagePullPolicy: corev1.PullNever,
		Args:            []string{"echo", "--listen=:" + strconv.Itoa(port)},
		Env: []corev1.EnvVar{
			{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
			{Name: "NAMESPACE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}},
			{Name: "SERVICE_NAME", Value: "echo"},
			{Name: "KUBERNETES_SERVICE_HOST", Value: c.APIHost()},
			{Name: "KUBERNETES_SERVICE_PORT", Value: strconv.Itoa(c.APIPort())},
		},
		Ports: []corev1.ContainerPort{{ContainerPort: int32(port)}},
		ReadinessProbe: &corev1.Probe{
			ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/health", Port: intstr.FromInt32(int32(port))}},
			PeriodSeconds: 1,
		},
	}
}

// TestClusterPodNetwork: a Deployment of pier echo, one pod per node
// (required anti-affinity), and a host-network echo pod on pcn0.
//   - each echo pod's IP is in its node's pod CIDR, and the client
//     namespace reaches both (routes across nodes), as does the other
//     node's namespace (node-to-node pod routes);
//   - the host-network pod reports the node's address as its IP, answers
//     on it, and its process is in the node's network namespace;
//   - a process in an echo pod's network namespace, using what the pod
//     was given (KUBERNETES_SERVICE_HOST/PORT, the projected token and
//     ca.crt as its container sees them), reaches the API server through
//     the relay, verifies its certificate and is the pod's ServiceAccount.
func TestClusterPodNetwork(t *testing.T) {
	c := Shared(t)
	image := c.Image(t, "echo")
	ns := c.Namespace(t, "pc-net")
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()

	labels := map[string]string{"app": "echo"}
	two := int32(2)
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "echo", Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: &two,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					Affinity: &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
						RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
							LabelSelector: &metav1.LabelSelector{MatchLabels: labels},
							TopologyKey:   corev1.LabelHostname,
						}},
					}},
					Containers: []corev1.Container{echoContainer(c, image, echoPort)},
				},
			},
		},
	}
	if _, err := c.Clientset.AppsV1().Deployments(ns).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	hostNode := c.Nodes[0]
	const hostPort = 3001
	hostPod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "hostnet", Namespace: ns, Labels: map[string]string{"app": "hostnet"}},
		Spec: corev1.PodSpec{
			NodeName:    hostNode.Name,
			HostNetwork: true,
			Containers:  []corev1.Container{echoContainer(c, image, hostPort)},
		},
	}
	if _, err := c.Clientset.CoreV1().Pods(ns).Create(ctx, hostPod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := c.WaitDeployment(ctx, ns, "echo"); err != nil {
		t.Fatal(err)
	}
	pods, err := c.WaitPods(ctx, ns, "app=echo", 2)
	if err != nil {
		t.Fatal(err)
	}
	hosts, err := c.WaitPods(ctx, ns, "app=hostnet", 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("echo Deployment and host-network pod Ready in %s", time.Since(start).Round(time.Millisecond))

	client := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{
		DialContext: harness.NetnsDial(c.Client.NS, 2*time.Second), DisableKeepAlives: true,
	}}
	nodesSeen := map[string]bool{}
	for _, p := range pods {
		node := c.Node(p.Spec.NodeName)
		if node == nil {
			t.Fatalf("pod %s on unknown node %q", p.Name, p.Spec.NodeName)
		}
		nodesSeen[node.Name] = true
		ip, err := netip.ParseAddr(p.Status.PodIP)
		if err != nil || !node.PodCIDR.Contains(ip) {
			t.Errorf("pod %s on %s has IP %q, want one in %s", p.Name, node.Name, p.Status.PodIP, node.PodCIDR)
			continue
		}
		expectEcho(t, client, "client", ip.String(), echoPort, p.Name)
		// From the other node's namespace: the nodes' routes to each
		// other's pod CIDR.
		for _, other := range c.Nodes {
			if other != node {
				nodeClient := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{
					DialContext: harness.NetnsDial(other.Name, 2*time.Second), DisableKeepAlives: true,
				}}
				expectEcho(t, nodeClient, other.Name, ip.String(), echoPort, p.Name)
			}
		}
	}
	if len(nodesSeen) != len(c.Nodes) {
		t.Errorf("echo pods on %v, want one on each of the %d nodes", nodesSeen, len(c.Nodes))
	}

	hp := hosts[0]
	if hp.Status.PodIP != hostNode.Addr.String() {
		t.Errorf("host-network pod has IP %s, want its node's %s", hp.Status.PodIP, hostNode.Addr)
	}
	expectEcho(t, client, "client", hostNode.Addr.String(), hostPort, "hostnet")
	pids, err := PodContainerPids(&hp, "echo")
	if err != nil {
		t.Fatal(err)
	}
	if same, err := SameNetns(pids[0], filepath.Join("/run/netns", hostNode.Name)); err != nil || !same {
		t.Errorf("host-network pod's process %d: in %s's network namespace %v (%v), want true", pids[0], hostNode.Name, same, err)
	}

	checkInClusterAPI(t, &pods[0])
}

func expectEcho(t *testing.T, client *http.Client, from, addr string, port int, pod string) {
	t.Helper()
	code, reply, _, err := harness.Get(client, addr, port, "echo.test", "/")
	if err != nil || code != 200 || reply.Pod != pod {
		t.Errorf("from %s, GET http://%s:%d/: %d pod %q (%v), want 200 from %s", from, addr, port, code, reply.Pod, err, pod)
		return
	}
	t.Logf("from %s, %s:%d answers as %s", from, addr, port, reply.Pod)
}

// checkInClusterAPI does what rest.InClusterConfig and a client would do
// inside the pod: the API server's address from the container's
// environment, the token and CA from its service-account volume (read
// through /proc/PID/root, as the container sees them), the connection
// opened in the pod's network namespace, the certificate verified against
// the address dialled. A SelfSubjectReview says who the token is.
func checkInClusterAPI(t *testing.T, pod *corev1.Pod) {
	t.Helper()
	pids, err := PodContainerPids(pod, "echo")
	if err != nil {
		t.Fatal(err)
	}
	pid := pids[0]
	root := fmt.Sprintf("/proc/%d/root", pid)
	env := processEnv(t, pid)
	host, port := env["KUBERNETES_SERVICE_HOST"], env["KUBERNETES_SERVICE_PORT"]
	if host == "" || port == "" {
		t.Fatalf("pod %s: no KUBERNETES_SERVICE_HOST/PORT in its environment", pod.Name)
	}
	const sa = "/var/run/secrets/kubernetes.io/serviceaccount"
	token, err := os.ReadFile(root + sa + "/token")
	if err != nil {
		t.Fatalf("pod %s: service-account token: %v", pod.Name, err)
	}
	caPEM, err := os.ReadFile(root + sa + "/ca.crt")
	if err != nil {
		t.Fatalf("pod %s: ca.crt (kube-root-ca.crt): %v", pod.Name, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		t.Fatalf("pod %s: ca.crt holds no certificate", pod.Name)
	}
	var status int
	var body []byte
	err = InNetnsOf(pid, func() error {
		conn, err := net.DialTimeout("tcp", net.JoinHostPort(host, port), 3*time.Second)
		if err != nil {
			return err
		}
		// One connection made in the pod's namespace; TLS and HTTP over
		// it from any thread.
		tr := &http.Transport{
			TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
			DialContext: func(context.Context, string, string) (net.Conn, error) {
				if conn == nil {
					return nil, fmt.Errorf("one connection only")
				}
				c := conn
				conn = nil
				return c, nil
			},
		}
		defer tr.CloseIdleConnections()
		review := `{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}`
		req, err := http.NewRequest(http.MethodPost, "https://"+net.JoinHostPort(host, port)+"/apis/authentication.k8s.io/v1/selfsubjectreviews", strings.NewReader(review))
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
		req.Header.Set("Content-Type", "application/json")
		resp, err := (&http.Client{Transport: tr, Timeout: 5 * time.Second}).Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		status = resp.StatusCode
		body, err = io.ReadAll(resp.Body)
		return err
	})
	if err != nil {
		t.Fatalf("pod %s: API server at %s:%s from the pod's namespace: %v", pod.Name, host, port, err)
	}
	var review struct {
		Status struct {
			UserInfo struct {
				Username string `json:"username"`
			} `json:"userInfo"`
		} `json:"status"`
	}
	if status != http.StatusCreated || json.Unmarshal(body, &review) != nil {
		t.Fatalf("pod %s: SelfSubjectReview: HTTP %d: %s", pod.Name, status, body)
	}
	want := "system:serviceaccount:" + pod.Namespace + ":" + pod.Spec.ServiceAccountName
	if got := review.Status.UserInfo.Username; got != want {
		t.Errorf("pod %s: the API server sees %q, want %q", pod.Name, got, want)
	}
	t.Logf("pod %s reached the API server at %s:%s from its namespace as %s", pod.Name, host, port, review.Status.UserInfo.Username)
}

// processEnv reads /proc/PID/environ.
func processEnv(t *testing.T, pid int) map[string]string {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for kv := range strings.SplitSeq(string(data), "\x00") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			env[k] = v
		}
	}
	return env
}
