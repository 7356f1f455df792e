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
// nothing would move the VIP. Active/standby is for the VRRP tests.
package kubemode

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"pier.dev/pier/test/kubeapi"
	"pier.dev/pier/test/netns"
)

func TestMain(m *testing.M) {
	netns.Enter(netns.Options{Prefixes: []netip.Prefix{netns.PodPrefix, netns.VIPPrefix}, Prepare: prepare})
	kubeapi.Main(m, kubeapi.Options{ControllerManager: true})
}

// prepare runs outside the namespace, where builds may download: it builds
// the Kubernetes binaries (hack/test-apiserver.sh) and pier, unless
// PIER_KUBE_APISERVER and PIER_BIN name them already.
func prepare() error {
	root, err := repoRoot()
	if err != nil {
		return err
	}
	if os.Getenv("PIER_KUBE_APISERVER") == "" {
		var stdout bytes.Buffer
		cmd := exec.Command("bash", filepath.Join(root, "hack", "test-apiserver.sh"))
		cmd.Stdout, cmd.Stderr = &stdout, os.Stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("hack/test-apiserver.sh: %w", err)
		}
		lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
		if err := os.Setenv("PIER_KUBE_APISERVER", lines[len(lines)-1]); err != nil {
			return err
		}
	}
	if os.Getenv("PIER_BIN") != "" {
		return nil
	}
	// One fixed, ignored path (.cache/ holds the Kubernetes binaries too):
	// rebuilt on every run from the build cache, never piling up.
	bin := filepath.Join(root, ".cache", "kubemode", "pier")
	if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
		return err
	}
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/pier")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build ./cmd/pier: %w\n%s", err, out)
	}
	return os.Setenv("PIER_BIN", bin)
}

func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for ; ; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "hack", "test-apiserver.sh")); err == nil {
			return dir, nil
		}
		if dir == filepath.Dir(dir) {
			return "", errors.New("hack/test-apiserver.sh not found above the working directory")
		}
	}
}
