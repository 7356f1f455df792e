package kube

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
		Prepare:  prepare,
	})
	kubeapi.Main(m, kubeapi.Options{ControllerManager: true})
}

// prepare runs outside the namespace, where builds may fetch what they
// need: the kube binaries (hack/test-apiserver.sh) and pier (unless
// PIER_BIN names one). Both reach the tests through the environment.
func prepare() error {
	root, err := conformance.RepoRoot()
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
	if os.Getenv(conformance.EnvPierBin) != "" {
		return nil
	}
	// One fixed path, overwritten by each run: Prepare's process cannot
	// remove it afterwards (it exits with the child's status).
	bin := filepath.Join(os.TempDir(), "pier-conformance-kube", "pier")
	cmd := exec.Command("go", "build", "-o", bin, "pier.dev/pier/cmd/pier")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		var execErr *exec.Error
		if errors.As(err, &execErr) {
			return fmt.Errorf("no %s and no go tool to build pier: %w", conformance.EnvPierBin, err)
		}
		return fmt.Errorf("building pier (or set %s): %w\n%s", conformance.EnvPierBin, err, out)
	}
	return os.Setenv(conformance.EnvPierBin, bin)
}
