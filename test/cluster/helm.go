//go:build linux

package cluster

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"pier.dev/pier/test/kubeapi"
)

var (
	helmOnce sync.Once
	helmPath string
	helmErr  error
)

// HelmBinary is $PIER_HELM, or the helm that hack/helm.sh builds from its
// Go module (once per test binary; minutes on a cold machine).
func HelmBinary() (string, error) {
	helmOnce.Do(func() {
		if p := os.Getenv("PIER_HELM"); p != "" {
			helmPath = p
			return
		}
		script, err := kubeapi.RepoPath("hack", "helm.sh")
		if err != nil {
			helmErr = err
			return
		}
		var stdout bytes.Buffer
		cmd := exec.Command("bash", script)
		cmd.Stdout, cmd.Stderr = &stdout, os.Stderr
		if err := cmd.Run(); err != nil {
			helmErr = fmt.Errorf("hack/helm.sh: %w", err)
			return
		}
		lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
		helmPath = strings.TrimSpace(lines[len(lines)-1])
	})
	if helmErr == nil && !filepath.IsAbs(helmPath) {
		return "", fmt.Errorf("helm binary %q is not an absolute path", helmPath)
	}
	return helmPath, helmErr
}

// Helm runs helm against the cluster's API server as its admin, with the
// given arguments, and returns what it printed.
func (c *Cluster) Helm(ctx context.Context, args ...string) (string, error) {
	bin, err := HelmBinary()
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append(args, "--kubeconfig", c.Server.Kubeconfig())...)
	// Helm keeps its cache and config under HOME: the cluster's folder,
	// removed with it.
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+filepath.Join(c.Dir, "helm", "cache"),
		"HELM_CONFIG_HOME="+filepath.Join(c.Dir, "helm", "config"), "HELM_DATA_HOME="+filepath.Join(c.Dir, "helm", "data"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("helm %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// BuildImage runs hack/image.sh ROLE with IMAGE_TAG=tag, a second build
// of an image under another tag (a rollout's new version), and returns
// the archive's path.
func BuildImage(role, tag string) (string, error) {
	script, err := kubeapi.RepoPath("hack", "image.sh")
	if err != nil {
		return "", err
	}
	var stdout bytes.Buffer
	cmd := exec.Command("bash", script, role)
	cmd.Env = append(os.Environ(), "IMAGE_TAG="+tag)
	cmd.Stdout, cmd.Stderr = &stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("hack/image.sh %s (tag %s): %w", role, tag, err)
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	return strings.TrimSpace(lines[len(lines)-1]), nil
}

// SplitImage splits a reference docker.io/library/pier:dev into its
// repository and tag, as the chart's values take them.
func SplitImage(ref string) (repo, tag string) {
	i := strings.LastIndex(ref, ":")
	if i < 0 || strings.Contains(ref[i:], "/") {
		return ref, ""
	}
	return ref[:i], ref[i+1:]
}
