//go:build linux

package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"pier.dev/pier/internal/lab"
	"pier.dev/pier/test/kubeapi"
)

var (
	sharedMu   sync.Mutex
	mainCalled bool
	shared     *Cluster
	sharedErr  error
)

// Main runs the package's tests and then stops the shared cluster, if a
// test started one, keeping its logs when a test failed. Use it as the
// whole TestMain:
//
//	func TestMain(m *testing.M) { cluster.Main(m) }
//
// A panicking test or go test's timeout ends the binary without Main's
// clean-up; the next Start sweeps what was left.
func Main(m *testing.M) {
	sharedMu.Lock()
	mainCalled = true
	sharedMu.Unlock()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sig
		stopShared(false)
		os.Exit(2)
	}()
	code := m.Run()
	stopShared(code != 0)
	os.Exit(code)
}

func stopShared(keepLogs bool) {
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if shared != nil {
		shared.Stop(keepLogs)
		shared = nil
	}
}

// Shared returns the test binary's cluster, starting it on first use
// (about a minute). A missing prerequisite skips the test with
// "SKIPPED, NOT PASSED: …", or fails it when CI is set; a cluster that
// does not start fails this test and every later one at once.
func Shared(t testing.TB) *Cluster {
	t.Helper()
	Need(t)
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if !mainCalled {
		t.Fatal("cluster.Shared: TestMain must call cluster.Main(m), which stops the cluster")
	}
	if shared == nil && sharedErr == nil {
		start := time.Now()
		shared, sharedErr = Start(context.Background(), nil)
		if sharedErr == nil {
			t.Logf("cluster: %d nodes Ready in %s (%s)", len(shared.Nodes), time.Since(start).Round(time.Millisecond), shared.Dir)
		}
	}
	if sharedErr != nil {
		t.Fatal(sharedErr)
	}
	return shared
}

// Need skips the test ("SKIPPED, NOT PASSED: …"), or fails it when CI is
// set, unless every prerequisite of the cluster is here.
func Need(t testing.TB) {
	t.Helper()
	missing := Missing()
	if missing == "" {
		return
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("cluster suite: missing %s", missing)
	}
	t.Skipf("SKIPPED, NOT PASSED: cluster suite needs %s", missing)
}

var (
	prepareOnce sync.Once
	prepareErr  error
)

// Missing says what the cluster needs and this machine lacks, or "" when
// nothing: Linux, root and iproute2 (the lab), nsenter, containerd with
// ctr and the runc shim, runc, the CNI plugins in /usr/lib/cni, kubelet
// and kube-scheduler beside kube-apiserver ($PIER_KUBE_APISERVER, built
// by hack/test-apiserver.sh when unset) and a pause image archive.
func Missing() string {
	if err := lab.Available(); err != nil {
		return err.Error()
	}
	var missing []string
	for _, tool := range []string{"nsenter", "containerd", "ctr", "containerd-shim-runc-v2", "runc"} {
		if _, err := exec.LookPath(tool); err != nil {
			missing = append(missing, tool)
		}
	}
	for _, plugin := range []string{"bridge", "host-local", "loopback"} {
		if _, err := os.Stat(filepath.Join("/usr/lib/cni", plugin)); err != nil {
			missing = append(missing, "/usr/lib/cni/"+plugin)
		}
	}
	if len(missing) > 0 {
		return strings.Join(missing, ", ") + " (Debian: containerd, runc, containernetworking-plugins, util-linux)"
	}
	prepareOnce.Do(func() { prepareErr = kubeapi.Prepare(false)() })
	if prepareErr != nil {
		return "the Kubernetes binaries: " + prepareErr.Error()
	}
	dir := filepath.Dir(os.Getenv("PIER_KUBE_APISERVER"))
	for _, b := range []string{"kubelet", "kube-scheduler", "kube-controller-manager"} {
		if _, err := os.Stat(filepath.Join(dir, b)); err != nil {
			missing = append(missing, filepath.Join(dir, b))
		}
	}
	if len(missing) > 0 {
		return strings.Join(missing, ", ") + " (hack/test-apiserver.sh builds them)"
	}
	if _, err := ImageArchive("pause"); errors.Is(err, errNoImage) {
		return err.Error()
	}
	return ""
}

var errNoImage = errors.New("no image archive")

var (
	archiveMu sync.Mutex
	archives  = map[string]string{}
)

// ImageArchive returns the OCI archive of pier's image for role (pause,
// echo, agent, controller): $PIER_IMAGE_<ROLE> (PIER_IMAGE_ECHO, …) when
// set, else the last line that hack/image.sh ROLE prints, once per test
// binary. Without either the error wraps errNoImage.
func ImageArchive(role string) (string, error) {
	archiveMu.Lock()
	defer archiveMu.Unlock()
	if p, ok := archives[role]; ok {
		return p, nil
	}
	env := "PIER_IMAGE_" + strings.ToUpper(role)
	path := os.Getenv(env)
	if path == "" {
		script, err := kubeapi.RepoPath("hack", "image.sh")
		if err != nil {
			return "", err
		}
		if _, err := os.Stat(script); err != nil {
			return "", fmt.Errorf("%w for %s: set %s or add hack/image.sh", errNoImage, role, env)
		}
		cmd := exec.Command("bash", script, role)
		cmd.Stderr = os.Stderr
		out, err := cmd.Output()
		if err != nil {
			return "", fmt.Errorf("hack/image.sh %s: %w", role, err)
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		path = strings.TrimSpace(lines[len(lines)-1])
	}
	if !filepath.IsAbs(path) {
		return "", fmt.Errorf("image archive for %s: %q is not an absolute path", role, path)
	}
	if _, err := os.Stat(path); err != nil {
		return "", fmt.Errorf("image archive for %s: %w", role, err)
	}
	archives[role] = path
	return path, nil
}

// ImportImage imports an image archive into every node's containerd and
// returns the names it holds (as pods name them in image:).
func (c *Cluster) ImportImage(path string) ([]string, error) {
	var names []string
	for _, n := range c.Nodes {
		got, err := n.importImage(context.Background(), path)
		if err != nil {
			return nil, err
		}
		names = got
	}
	return names, nil
}

// Image imports pier's image for role into every node (once per cluster)
// and returns its name. No archive is a missing prerequisite (skip, or
// fail under CI); a failed import fails the test.
func (c *Cluster) Image(t testing.TB, role string) string {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if ref, ok := c.images[role]; ok {
		return ref
	}
	path, err := ImageArchive(role)
	if errors.Is(err, errNoImage) {
		if os.Getenv("CI") != "" {
			t.Fatalf("cluster suite: %v", err)
		}
		t.Skipf("SKIPPED, NOT PASSED: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	names, err := c.ImportImage(path)
	if err != nil {
		t.Fatal(err)
	}
	c.images[role] = names[0]
	return names[0]
}
