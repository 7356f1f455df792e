//go:build linux

// Package kubepair proves the active/standby pair in Kubernetes mode: the
// real kube-apiserver (test/kubeapi), `pier controller` in this process's
// namespace, and one `pier agent --vrrp-interface eth0` inside each of two
// lab node namespaces (internal/lab), where each agent runs HAProxy and
// keepalived. Traffic comes from the lab's client namespace; the backend
// (`pier echo`) runs in its pods namespace.
//
//	this namespace: etcd, kube-apiserver 127.0.0.1:P, pier controller,
//	                relay 10.99.0.1:R → 127.0.0.1:P (the API outage cuts it)
//	        │ kpN-host 10.99.0.1 (lab.Options.HostLink: no forwarding)
//	  kpN-sw br0 ── kpN-n0 10.99.0.11  pier agent, haproxy, keepalived
//	             ── kpN-n1 10.99.0.12  pier agent, haproxy, keepalived
//	             ── kpN-pods 10.99.0.50 pier echo :9001
//	             ── kpN-c  10.99.0.100  the probe's client
//
// The agents reach the API server only through the relay, so cutting it
// is an API-server outage for both nodes while the controller keeps its
// own connection. The serving certificate is for 127.0.0.1: the agents'
// kubeconfig keeps that name (tls-server-name) whatever address they dial.
//
// The test binary stays in the root namespace (the lab's namespaces are
// created with `ip netns add`, which a process inside `ip netns exec`
// would make in a mount namespace of its own, invisible to the next
// run's clean-up). Everything it starts is ended by its cleanups, and
// lab.RemoveStale("kp") removes what a killed run left.
package kubepair

import (
	"fmt"
	"os"
	"testing"

	"pier.dev/pier/internal/lab"
	"pier.dev/pier/test/kubeapi"
)

// TestMain builds pier and the control plane unless PIER_BIN and
// PIER_KUBE_APISERVER name them, when a lab can be built at all (root,
// Linux, iproute2); otherwise the test reports its skip.
func TestMain(m *testing.M) {
	if lab.Available() == nil {
		if err := kubeapi.Prepare(true)(); err != nil {
			fmt.Fprintf(os.Stderr, "kubepair: %v\n", err)
			os.Exit(1)
		}
	}
	kubeapi.Main(m, kubeapi.Options{})
}
