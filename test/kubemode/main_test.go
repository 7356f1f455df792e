// Package kubemode runs pier's Kubernetes mode as a user would: the real
// `pier controller` and `pier agent` processes against a real API server
// (etcd, kube-apiserver, kube-controller-manager from test/kubeapi), with
// test/nodesim standing in for the kubelet, inside a network namespace of
// its own (test/netns) where VIPs and pod IPs are local addresses.
//
// Both pier processes authenticate with the ServiceAccount tokens of
// deploy/rbac.yaml, so a permission the manifests lack fails here.
//
// There is one agent, on node-a, and the controller's --node-selector
// places every load balancer on node-a alone. VRRP does not exist yet: a
// standby agent would start a second HAProxy bound to the same VIP:port in
// the same namespace (HAProxy sets SO_REUSEPORT, so the kernel would split
// connections between the two rather than fail over), and on real nodes
// nothing would move the VIP. Active/standby is for the VRRP tests; the
// pair tests here (pair_test.go) run a second agent on node-b to check
// placement, heartbeats and cordon, never traffic.
package kubemode

import (
	"net/netip"
	"testing"

	"pier.dev/pier/test/kubeapi"
	"pier.dev/pier/test/netns"
)

func TestMain(m *testing.M) {
	netns.Enter(netns.Options{Prefixes: []netip.Prefix{netns.PodPrefix, netns.VIPPrefix}, Prepare: kubeapi.Prepare(true)})
	kubeapi.Main(m, kubeapi.Options{ControllerManager: true})
}
