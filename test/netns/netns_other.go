//go:build !linux

package netns

import (
	"fmt"
	"net/netip"
	"os"
	"testing"
)

// EnvName names the environment variable that carries the namespace's name.
const EnvName = "PIER_NETNS"

// The conventional test prefixes (see the Linux documentation).
var (
	PodPrefix = netip.MustParsePrefix("10.244.0.1/16")
	VIPPrefix = netip.MustParsePrefix("10.250.0.1/16")
)

// Options configures the namespace.
type Options struct {
	Prefixes []netip.Prefix
	Prepare  func() error
}

// Main fails: network namespaces are Linux only, and a test that needs one
// must not pass by running outside it.
func Main(m *testing.M, opts Options) {
	Enter(opts)
	os.Exit(m.Run())
}

// Enter exits with an error: there are no network namespaces here.
func Enter(Options) {
	fmt.Fprintln(os.Stderr, "netns: network namespaces need Linux")
	os.Exit(1)
}

// Inside is always false off Linux.
func Inside() bool { return false }

// Name is always "" off Linux.
func Name() string { return "" }
