package nodesim

import (
	"net/netip"
	"testing"

	"pier.dev/pier/test/kubeapi"
	"pier.dev/pier/test/netns"
)

func TestMain(m *testing.M) {
	netns.Enter(netns.Options{Prefixes: []netip.Prefix{netns.PodPrefix}, Prepare: kubeapi.Prepare(false)})
	kubeapi.Main(m, kubeapi.Options{ControllerManager: true})
}
