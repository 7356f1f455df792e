package kube

import (
	"net/netip"
	"os"
	"testing"

	"pier.dev/pier/test/conformance"
	"pier.dev/pier/test/kubeapi"
	"pier.dev/pier/test/netns"
)

// TestMain runs the binary in a network namespace of its own (pod IPs and
// VIPs on lo) with a control plane, but only when the suite is asked for:
// without PIER_CONFORMANCE=1 the test runs here and reports its skip.
func TestMain(m *testing.M) {
	if os.Getenv(conformance.EnvGate) != "1" {
		os.Exit(m.Run())
	}
	netns.Enter(netns.Options{
		Prefixes: []netip.Prefix{netns.PodPrefix, netns.VIPPrefix},
		Prepare:  kubeapi.Prepare(true),
	})
	kubeapi.Main(m, kubeapi.Options{ControllerManager: true})
}
