package conformance

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"pier.dev/pier/internal/echo"
)

// envHelper is internal: the test binary plays `pier echo`.
const envHelper = "PIER_CONFORMANCE_TEST_HELPER"

func TestMain(m *testing.M) {
	if os.Getenv(envHelper) == "echo" {
		os.Exit(helperEcho(os.Args[1:]))
	}
	os.Exit(m.Run())
}

// TestConformance runs the five upstream features against `pier run`:
//
//	PIER_CONFORMANCE=1 go test ./test/conformance -run TestConformance -v -timeout 30m
//
// A skip is not a pass: without PIER_CONFORMANCE=1 nothing is checked.
func TestConformance(t *testing.T) {
	if os.Getenv(EnvGate) != "1" {
		t.Skipf("SKIPPED, NOT PASSED: set %s=1 to run the Ingress conformance suite against pier run (needs haproxy; %s or a buildable ./cmd/pier)", EnvGate, EnvPierBin)
	}
	if deadline, ok := t.Deadline(); ok && time.Until(deadline) < 10*time.Minute {
		t.Logf("warning: the test deadline is %s away; a full run takes several minutes (use -timeout 30m)", time.Until(deadline).Round(time.Second))
	}
	paths := featurePaths(t)
	opts := optionsFromEnv(t)
	opts.Logf = t.Logf

	dir, err := os.MkdirTemp(ShortTempDir(), "pierc-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() || os.Getenv(EnvKeep) == "1" {
			t.Logf("work dir kept: %s (manifests/, state/, logs/)", dir)
			return
		}
		_ = os.RemoveAll(dir)
	})

	cluster, err := NewFilesCluster(FilesConfig{PierBin: pierBinary(t, dir), Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cluster.Close()
		if t.Failed() {
			t.Logf("end of %s:\n%s", cluster.PierLog(), tail(cluster.PierLog(), 60))
		}
	})
	t.Logf("starting: %s", strings.Join(cluster.PierArgs(), " "))
	if err := cluster.Start(t.Context()); err != nil {
		t.Fatal(err)
	}

	var out bytes.Buffer
	status := RunSuite(t.Context(), cluster, opts, paths, os.Getenv(EnvFormat), io.MultiWriter(os.Stdout, &out))
	summary := Summary(out.String())
	t.Logf("godog summary:\n%s", summary)
	if status != 0 {
		t.Fatalf("conformance failed (godog status %d):\n%s", status, summary)
	}
}

func featurePaths(t *testing.T) []string {
	t.Helper()
	return RequireFeaturePaths(t)
}

func optionsFromEnv(t *testing.T) Options {
	t.Helper()
	opts, err := OptionsFromEnv(DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	return opts
}

// pierBinary returns PIER_BIN or builds ./cmd/pier into dir.
func pierBinary(t *testing.T, dir string) string {
	t.Helper()
	if bin := os.Getenv(EnvPierBin); bin != "" {
		abs, err := filepath.Abs(bin)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(abs); err != nil {
			t.Fatalf("%s: %v", EnvPierBin, err)
		}
		return abs
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("no %s and no go tool to build pier: %v", EnvPierBin, err)
	}
	bin := filepath.Join(dir, "pier")
	cmd := exec.CommandContext(t.Context(), goBin, "build", "-o", bin, "pier.dev/pier/cmd/pier")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building pier (or set %s): %v\n%s", EnvPierBin, err, out)
	}
	return bin
}

// helperEcho lets the test binary stand in for `pier echo --listen ADDR`
// in the files cluster's own tests, serving the real echo package.
func helperEcho(args []string) int {
	if len(args) != 3 || args[0] != "echo" || args[1] != "--listen" {
		fmt.Fprintf(os.Stderr, "helper: want echo --listen ADDR, got %q\n", args)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	err := echo.Run(ctx, echo.Config{
		Listen:    args[2],
		Namespace: os.Getenv("NAMESPACE"),
		Ingress:   os.Getenv("INGRESS_NAME"),
		Service:   os.Getenv("SERVICE_NAME"),
		Pod:       os.Getenv("POD_NAME"),
	}, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}
