// Package kube runs the five upstream Ingress conformance features,
// unedited, against pier in Kubernetes mode: a real kube-apiserver and
// kube-controller-manager (test/kubeapi), a node simulator playing kubelet
// and scheduler (test/nodesim), `pier controller` and `pier agent` as the
// ServiceAccounts of deploy/rbac.yaml, all in a network namespace of the
// test's own (test/netns):
//
//	PIER_CONFORMANCE=1 go test ./test/conformance/kube -run TestConformanceKubernetes -v -timeout 40m
//
// It needs root (the namespace), iproute2, etcd, haproxy and the kube
// binaries hack/test-apiserver.sh builds. Without PIER_CONFORMANCE=1 it
// skips, which is not a pass. The environment of ../ applies (PIER_BIN,
// PIER_CONFORMANCE_FEATURES, _FORMAT, _STATUS_TIMEOUT (5m, as upstream),
// _ABSENT_TIMEOUT (20s), _POLL_INTERVAL (5s, as upstream), _SCALE_SETTLE
// (60s), _KEEP, _STOP_ON_FAILURE).
package kube

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"

	"pier.dev/pier/test/conformance"
	"pier.dev/pier/test/kubeapi"
	"pier.dev/pier/test/nodesim"
)

const (
	// leaseNamespace is where deploy/rbac.yaml lets the controller hold its
	// Lease (the namespace is created by that file).
	leaseNamespace = "pier-system"
	// nodes run echo pods and a `pier agent` each; see TestConformanceKubernetes.
	activeNode, standbyNode = "node-a", "node-b"
)

var agentNodes = []string{activeNode, standbyNode}

// TestConformanceKubernetes runs the features through the API server.
//
// Two nodes are registered, both run echo pods and both run `pier agent`;
// the controller has no --node-selector, so every load balancer is placed
// on both, active and standby, and both agents run it hot. The agents do
// not hold addresses here (no --vrrp-interface): the VIPs are local on lo
// of the test's one namespace, so both HAProxy bind the same VIP:port
// (HAProxy sets SO_REUSEPORT) and the kernel spreads connections between
// them. Every scenario therefore reaches the active and the standby
// HAProxy alike, and passes only if both serve the spec it wrote: a
// standby that lags or renders differently fails it. The address move
// itself (keepalived, VRRP, failovers) is test/kubepair's, where each
// agent runs in a node namespace of its own.
func TestConformanceKubernetes(t *testing.T) {
	if os.Getenv(conformance.EnvGate) != "1" {
		t.Skipf("SKIPPED, NOT PASSED: set %s=1 to run the Ingress conformance suite against pier controller and pier agent (needs root, iproute2, etcd, haproxy and hack/test-apiserver.sh)", conformance.EnvGate)
	}
	paths := conformance.RequireFeaturePaths(t)
	opts, err := conformance.OptionsFromEnv(kubeOptions())
	if err != nil {
		t.Fatal(err)
	}
	opts.Logf = t.Logf
	dir := workDir(t)

	start := time.Now()
	srv := kubeapi.Shared(t)
	admin := srv.Config()
	client, err := kubernetes.NewForConfig(admin)
	if err != nil {
		t.Fatal(err)
	}
	deploy, err := kubeapi.RepoPath("deploy")
	if err != nil {
		t.Fatal(err)
	}
	if err := kubeapi.ApplyFiles(t.Context(), admin,
		filepath.Join(deploy, "crd-loadbalancers.yaml"), filepath.Join(deploy, "rbac.yaml")); err != nil {
		t.Fatal(err)
	}
	controllerKC := serviceAccountKubeconfig(t, client, srv, dir, leaseNamespace, "pier-controller")
	agentKC := serviceAccountKubeconfig(t, client, srv, dir, leaseNamespace, "pier-agent")
	startNodes(t, client, dir)

	cluster, err := conformance.NewKubeCluster(conformance.KubeConfig{
		Admin: admin, PierBin: os.Getenv(conformance.EnvPierBin), Dir: dir,
		ControllerKubeconfig: controllerKC, AgentKubeconfig: agentKC,
		InternalPool: "10.250.0.0/16", LeaseNamespace: leaseNamespace,
		AgentNodes: agentNodes,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeCluster(t, cluster) })
	if err := cluster.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Logf("environment ready in %s:\n%s", time.Since(start).Round(time.Millisecond), strings.Join(cluster.PierArgs(), "\n"))

	var out bytes.Buffer
	status := conformance.RunSuite(t.Context(), cluster, opts, paths, os.Getenv(conformance.EnvFormat), io.MultiWriter(os.Stdout, &out))
	summary := conformance.Summary(out.String())
	t.Logf("godog summary:\n%s\nwall time since the control plane was asked for: %s", summary, time.Since(start).Round(time.Second))
	if status != 0 {
		t.Fatalf("conformance failed (godog status %d):\n%s", status, summary)
	}
	// Both agents ran the load balancers: pairs were placed, not one node.
	for _, node := range agentNodes {
		n := strings.Count(readFile(cluster.Log("agent-"+node)), `msg="haproxy running"`)
		t.Logf("agent on %s started %d HAProxy instances", node, n)
		if n == 0 {
			t.Errorf("the agent on %s started no HAProxy: the load balancers were not placed on both nodes", node)
		}
	}
}

func readFile(path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	return string(data)
}

// kubeOptions are the upstream runner's timings: a 5-minute status
// timeout polled every 5 s, 60 s after scaling; the wait that an Ingress
// of another class stays without an address is kept short.
func kubeOptions() conformance.Options {
	opts := conformance.DefaultOptions()
	opts.StatusTimeout = 5 * time.Minute
	opts.PollInterval = 5 * time.Second
	opts.AbsentStatusTimeout = 20 * time.Second
	return opts
}

// workDir holds logs, kubeconfigs and the agent's state; kept on failure.
func workDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp(conformance.ShortTempDir(), "pierk-")
	if err == nil {
		err = os.Mkdir(filepath.Join(dir, "logs"), 0o755)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() || os.Getenv(conformance.EnvKeep) == "1" {
			t.Logf("work dir kept: %s (logs/, kubeconfigs, s-%s/, s-%s/)", dir, activeNode, standbyNode)
			return
		}
		_ = os.RemoveAll(dir)
	})
	return dir
}

// startNodes registers node-a and node-b and runs their pods.
func startNodes(t *testing.T, client kubernetes.Interface, dir string) {
	t.Helper()
	logFile, err := os.Create(filepath.Join(dir, "logs", "nodesim.log"))
	if err != nil {
		t.Fatal(err)
	}
	sim, err := nodesim.Start(context.WithoutCancel(t.Context()), client, nodesim.Options{
		Nodes:  agentNodes,
		Logger: slog.New(slog.NewTextHandler(logFile, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sim.Stop()
		_ = logFile.Close()
	})
}

// closeCluster deletes what the scenarios left and checks that the
// LoadBalancers and HAProxy processes went with them, then stops pier.
func closeCluster(t *testing.T, cluster *conformance.KubeCluster) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	start := time.Now()
	if err := cluster.Close(ctx); err != nil {
		t.Errorf("teardown: %v", err)
	} else {
		t.Logf("teardown: namespaces, LoadBalancers and HAProxy gone in %s", time.Since(start).Round(time.Millisecond))
	}
	if t.Failed() {
		for _, name := range []string{"controller", "agent-" + activeNode, "agent-" + standbyNode} {
			t.Logf("end of %s:\n%s", cluster.Log(name), tail(cluster.Log(name), 60))
		}
	}
}

func tail(path string, n int) string {
	lines := strings.Split(strings.TrimRight(readFile(path), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
