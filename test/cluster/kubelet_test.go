//go:build linux

package cluster

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestKubeletNodesReady: both kubelets register their Node and it becomes
// Ready, each with its own lab address as InternalIP and the container
// runtime it was given.
func TestKubeletNodesReady(t *testing.T) {
	c := Shared(t)
	nodes, err := c.Clientset.CoreV1().Nodes().List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes.Items) != len(c.Nodes) {
		t.Fatalf("%d Node objects, want %d", len(nodes.Items), len(c.Nodes))
	}
	seen := map[string]string{}
	for _, want := range c.Nodes {
		node, err := c.Clientset.CoreV1().Nodes().Get(t.Context(), want.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("node %s: %v", want.Name, err)
		}
		if !NodeReady(node) {
			t.Errorf("node %s is not Ready: %+v", want.Name, node.Status.Conditions)
		}
		var internal []string
		for _, a := range node.Status.Addresses {
			if a.Type == corev1.NodeInternalIP {
				internal = append(internal, a.Address)
			}
		}
		if len(internal) != 1 || internal[0] != want.Addr.String() {
			t.Errorf("node %s: InternalIP %v, want [%s]", want.Name, internal, want.Addr)
		}
		if !Subnet.Contains(want.Addr) {
			t.Errorf("node %s: address %s outside the lab's %s", want.Name, want.Addr, Subnet)
		}
		if other, dup := seen[want.Addr.String()]; dup {
			t.Errorf("nodes %s and %s share %s", other, want.Name, want.Addr)
		}
		seen[want.Addr.String()] = want.Name
		if rt := node.Status.NodeInfo.ContainerRuntimeVersion; rt == "" || rt[:len("containerd://")] != "containerd://" {
			t.Errorf("node %s: container runtime %q, want containerd://…", want.Name, rt)
		}
		t.Logf("%s Ready, InternalIP %s, %s, kubelet %s", node.Name, internal, node.Status.NodeInfo.ContainerRuntimeVersion, node.Status.NodeInfo.KubeletVersion)
	}
}
