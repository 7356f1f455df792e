package kubeapi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var (
	sharedMu   sync.Mutex
	sharedOpts *Options // set by Main; nil means Main is not in charge
	shared     *Server
	sharedErr  error
)

// Main runs the package's tests and then stops the shared server, if a test
// started one. Use it as the whole TestMain:
//
//	func TestMain(m *testing.M) { kubeapi.Main(m, kubeapi.Options{}) }
func Main(m *testing.M, opts Options) {
	sharedMu.Lock()
	sharedOpts = &opts
	sharedMu.Unlock()
	// ^C or a kill of the test binary would otherwise leave the server's
	// folder (on tmpfs: memory) behind; Pdeathsig already ends the children.
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

// stopShared stops the shared server; keepLogs first copies the
// components' logs out of its folder (on tmpfs, removed by Stop) so that a
// failed run can be looked into.
func stopShared(keepLogs bool) {
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if shared == nil {
		return
	}
	shared.stopProcesses() // so the logs are complete
	if keepLogs {
		if dir, err := shared.saveLogs(); err != nil {
			fmt.Fprintf(os.Stderr, "kubeapi: tests failed; could not keep the component logs: %v\n", err)
		} else {
			fmt.Fprintf(os.Stderr, "kubeapi: tests failed; component logs kept in %s\n", dir)
		}
	}
	shared.Stop()
	shared = nil
}

// Shared returns the test binary's server, starting it on first use. It
// fails the test (never skips) when no server can be started, and keeps
// failing fast for later tests rather than retrying a start that failed.
func Shared(t testing.TB) *Server {
	t.Helper()
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if sharedOpts == nil {
		t.Fatal("kubeapi.Shared: TestMain must call kubeapi.Main(m, opts), which stops the server")
	}
	if shared == nil && sharedErr == nil {
		start := time.Now()
		shared, sharedErr = Start(context.Background(), *sharedOpts)
		if sharedErr == nil {
			t.Logf("kubeapi: control plane ready in %s (%s)", time.Since(start).Round(time.Millisecond), shared.Dir())
		}
	}
	if sharedErr != nil {
		t.Fatalf("kubeapi: %v", sharedErr)
	}
	return shared
}

// repoRoot walks up from the working directory (a package folder under go
// test) to the folder holding hack/test-apiserver.sh.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("kubeapi: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "hack", "test-apiserver.sh")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("kubeapi: hack/test-apiserver.sh not found above the working directory; set PIER_KUBE_APISERVER")
		}
		dir = parent
	}
}

// runBuildScript runs hack/test-apiserver.sh, passing its progress through
// to stderr (a cold build takes minutes; silence would look like a hang),
// and returns the path on its last line.
func runBuildScript(ctx context.Context, log *slog.Logger, script string) (string, error) {
	log.Info("kubeapi: preparing binaries", "script", script)
	var stdout bytes.Buffer
	cmd := exec.CommandContext(ctx, "bash", script)
	cmd.Stdout, cmd.Stderr = &stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("kubeapi: %s: %w", script, err)
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	bin := strings.TrimSpace(lines[len(lines)-1])
	if !filepath.IsAbs(bin) {
		return "", fmt.Errorf("kubeapi: %s printed %q, not an absolute path", script, bin)
	}
	if _, err := os.Stat(bin); err != nil {
		return "", fmt.Errorf("kubeapi: %s: %w", script, err)
	}
	return bin, nil
}

// removeStale deletes server folders left by test binaries that died
// without stopping (go test -timeout panics, SIGKILL): each folder records
// its owner's pid.
func removeStale(base string) {
	dirs, _ := filepath.Glob(filepath.Join(base, "pier-kubeapi-*"))
	for _, dir := range dirs {
		data, err := os.ReadFile(filepath.Join(dir, "owner.pid"))
		if err != nil {
			continue // starting right now, or not ours
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
		if err != nil || pid == os.Getpid() {
			continue
		}
		if syscall.Kill(pid, 0) == syscall.ESRCH {
			os.RemoveAll(dir)
		}
	}
}
