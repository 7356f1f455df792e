package kubeapi

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
)

// Prepare builds what a test binary needs before it enters its network
// namespace (netns.Options.Prepare), where nothing can be downloaded: the
// control-plane binaries through hack/test-apiserver.sh unless
// PIER_KUBE_APISERVER names them, and, with withPier, the pier binary unless
// PIER_BIN names one. Both reach the tests through those variables.
func Prepare(withPier bool) func() error {
	return func() error {
		root, err := repoRoot()
		if err != nil {
			return err
		}
		if os.Getenv("PIER_KUBE_APISERVER") == "" {
			bin, err := runBuildScript(context.Background(), slog.Default(), filepath.Join(root, "hack", "test-apiserver.sh"))
			if err != nil {
				return err
			}
			if err := os.Setenv("PIER_KUBE_APISERVER", bin); err != nil {
				return err
			}
		}
		if !withPier || os.Getenv("PIER_BIN") != "" {
			return nil
		}
		// One fixed, ignored path (.cache/ also holds the Kubernetes
		// binaries): rebuilt from Go's build cache on every run.
		bin := filepath.Join(root, ".cache", "test-bin", "pier")
		if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
			return err
		}
		cmd := exec.Command("go", "build", "-o", bin, "./cmd/pier")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("go build ./cmd/pier (or set PIER_BIN): %w\n%s", err, out)
		}
		return os.Setenv("PIER_BIN", bin)
	}
}
