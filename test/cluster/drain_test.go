//go:build linux

package cluster

import (
	"context"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// TestClusterDrainAndRestart exercises the helpers the pier suites lean
// on, with pier echo: a Deployment of two with a PodDisruptionBudget
// (minAvailable 1); traffic from the client namespace to the echo pod on
// pcn0 while pcn1 is drained (cordon, evictions through the eviction API,
// the evicted pod re-created on pcn0): not one failed request, every
// answer from that pod; then kill -9 of the other pod's pier process,
// found through its container's cgroup: the kubelet restarts the
// container (restartCount 1) and the pod is Ready again.
func TestClusterDrainAndRestart(t *testing.T) {
	c := Shared(t)
	image := c.Image(t, "echo")
	ns := c.Namespace(t, "pc-drain")
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	keep, drained := c.Nodes[0], c.Nodes[1]

	labels := map[string]string{"app": "echo"}
	two, grace := int32(2), int64(2)
	spec := corev1.PodSpec{
		TerminationGracePeriodSeconds: &grace,
		Containers:                    []corev1.Container{echoContainer(c, image, echoPort)},
	}
	// One pod per node to start with: the second is created with the
	// Deployment pinned to both nodes' names in turn.
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "echo", Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: &two,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: spec},
		},
	}
	dep.Spec.Template.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
		PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{
			Weight: 100,
			PodAffinityTerm: corev1.PodAffinityTerm{
				LabelSelector: &metav1.LabelSelector{MatchLabels: labels}, TopologyKey: corev1.LabelHostname,
			},
		}},
	}}
	if _, err := c.Clientset.AppsV1().Deployments(ns).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	one := intstr.FromInt32(1)
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "echo", Namespace: ns},
		Spec:       policyv1.PodDisruptionBudgetSpec{MinAvailable: &one, Selector: &metav1.LabelSelector{MatchLabels: labels}},
	}
	if _, err := c.Clientset.PolicyV1().PodDisruptionBudgets(ns).Create(ctx, pdb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitDeployment(ctx, ns, "echo"); err != nil {
		t.Fatal(err)
	}
	target, err := c.PodOn(ctx, ns, "app=echo", keep.Name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.PodOn(ctx, ns, "app=echo", drained.Name); err != nil {
		t.Fatalf("want one echo pod on each node to start with: %v", err)
	}

	traffic := c.StartTraffic(TrafficOptions{Addr: target.Status.PodIP, Port: echoPort})
	t.Cleanup(func() { _ = c.Cordon(context.Background(), drained.Name, false) })
	start := time.Now()
	if err := c.Drain(ctx, drained.Name); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitDeployment(ctx, ns, "echo"); err != nil {
		t.Fatal(err)
	}
	t.Logf("drained %s in %s", drained.Name, time.Since(start).Round(time.Millisecond))
	node, err := c.Clientset.CoreV1().Nodes().Get(ctx, drained.Name, metav1.GetOptions{})
	if err != nil || !node.Spec.Unschedulable {
		t.Errorf("node %s after the drain: unschedulable=%v (%v), want true", drained.Name, node != nil && node.Spec.Unschedulable, err)
	}
	pods, err := c.WaitPods(ctx, ns, "app=echo", 2)
	if err != nil {
		t.Fatal(err)
	}
	var other *corev1.Pod
	for i := range pods {
		if pods[i].Spec.NodeName != keep.Name {
			t.Errorf("pod %s on %s after the drain, want %s", pods[i].Name, pods[i].Spec.NodeName, keep.Name)
		}
		if pods[i].Name != target.Name {
			other = &pods[i]
		}
	}
	if other == nil {
		t.Fatalf("no second echo pod after the drain: %v", pods)
	}

	pids, err := PodContainerPids(other, "echo")
	if err != nil {
		t.Fatal(err)
	}
	pier := ProcessesNamed(pids, "pier")
	if len(pier) != 1 {
		t.Fatalf("pod %s: pier processes %v among the container's %v, want one", other.Name, pier, pids)
	}
	if err := syscall.Kill(pier[0], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	err = poll(ctx, "pod "+other.Name+" restarted and Ready", func() (bool, string, error) {
		p, err := c.Clientset.CoreV1().Pods(ns).Get(ctx, other.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		restarts := int32(0)
		for _, st := range p.Status.ContainerStatuses {
			restarts += st.RestartCount
		}
		return restarts == 1 && PodReady(p), podWaiting(p), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if again, err := c.Clientset.CoreV1().Pods(ns).Get(ctx, other.Name, metav1.GetOptions{}); err == nil {
		if now, err := PodContainerPids(again, "echo"); err != nil || now[0] == pids[0] {
			t.Errorf("pod %s: container processes %v after the restart (%v), want new ones", other.Name, now, err)
		}
	}

	res := traffic.Stop()
	t.Logf("traffic to %s (%s): %s", target.Name, target.Status.PodIP, res)
	if res.Requests < 50 || res.Failed() != 0 || res.Pods[target.Name] != res.Requests {
		t.Errorf("traffic: %s; want at least 50 requests, all answered 200 by %s", res, target.Name)
	}
}
