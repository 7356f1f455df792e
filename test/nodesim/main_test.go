package nodesim

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
	netns.Enter(netns.Options{Prefixes: []netip.Prefix{netns.PodPrefix}, Prepare: buildKube})
	kubeapi.Main(m, kubeapi.Options{ControllerManager: true})
}

// buildKube runs hack/test-apiserver.sh before the namespace exists: a
// cold build downloads modules (and etcd), which cannot happen inside.
// kubeapi then finds the binary through PIER_KUBE_APISERVER.
func buildKube() error {
	if os.Getenv("PIER_KUBE_APISERVER") != "" {
		return nil
	}
	dir, err := os.Getwd()
	if err != nil {
		return err
	}
	for ; ; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "hack", "test-apiserver.sh")); err == nil {
			break
		}
		if dir == filepath.Dir(dir) {
			return errors.New("hack/test-apiserver.sh not found above the working directory")
		}
	}
	var stdout bytes.Buffer
	cmd := exec.Command("bash", filepath.Join(dir, "hack", "test-apiserver.sh"))
	cmd.Stdout, cmd.Stderr = &stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("hack/test-apiserver.sh: %w", err)
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	return os.Setenv("PIER_KUBE_APISERVER", lines[len(lines)-1])
}
