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

// Environment of TestConformance.
const (
	envGate          = "PIER_CONFORMANCE"                 // "1" runs the suite
	envPierBin       = "PIER_BIN"                         // pier binary; built from ./cmd/pier if unset
	envFeatures      = "PIER_CONFORMANCE_FEATURES"        // comma-separated .feature files or dirs (file:line works)
	envFormat        = "PIER_CONFORMANCE_FORMAT"          // godog formats, e.g. "pretty,junit:/tmp/report.xml"
	envStatusTimeout = "PIER_CONFORMANCE_STATUS_TIMEOUT"  // default 60s
	envAbsentTimeout = "PIER_CONFORMANCE_ABSENT_TIMEOUT"  // default 10s
	envScaleSettle   = "PIER_CONFORMANCE_SCALE_SETTLE"    // default 60s, as upstream
	envKeep          = "PIER_CONFORMANCE_KEEP"            // "1" keeps the work dir even when passing
	envStop          = "PIER_CONFORMANCE_STOP_ON_FAILURE" // "1" stops at the first failed scenario
	envHelper        = "PIER_CONFORMANCE_TEST_HELPER"     // internal: the test binary plays `pier echo`
	featuresFromRepo = "../shared/conformance/features"   // relative to the repository root
)

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
	if os.Getenv(envGate) != "1" {
		t.Skipf("SKIPPED, NOT PASSED: set %s=1 to run the Ingress conformance suite against pier run (needs haproxy; %s or a buildable ./cmd/pier)", envGate, envPierBin)
	}
	if deadline, ok := t.Deadline(); ok && time.Until(deadline) < 10*time.Minute {
		t.Logf("warning: the test deadline is %s away; a full run takes several minutes (use -timeout 30m)", time.Until(deadline).Round(time.Second))
	}
	paths := featurePaths(t)
	opts := optionsFromEnv(t)
	opts.Logf = t.Logf

	dir, err := os.MkdirTemp(shortTempDir(), "pierc-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() || os.Getenv(envKeep) == "1" {
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
	opts.StopOnFailure = os.Getenv(envStop) == "1"
	status := RunSuite(t.Context(), cluster, opts, paths, os.Getenv(envFormat), io.MultiWriter(os.Stdout, &out))
	summary := Summary(out.String())
	t.Logf("godog summary:\n%s", summary)
	if status != 0 {
		t.Fatalf("conformance failed (godog status %d):\n%s", status, summary)
	}
}

// shortTempDir is where the work folder goes: HAProxy's runtime sockets
// live under the state folder and a Unix socket path has a small limit
// (pier refuses paths over 90 bytes), so a long TMPDIR is not used.
func shortTempDir() string {
	if tmp := os.TempDir(); len(tmp) <= 16 {
		return tmp
	}
	return "/tmp"
}

// featurePaths returns PIER_CONFORMANCE_FEATURES or the shared features
// directory beside the repository, checked to exist.
func featurePaths(t *testing.T) []string {
	t.Helper()
	if env := os.Getenv(envFeatures); env != "" {
		var paths []string
		for p := range strings.SplitSeq(env, ",") {
			p = strings.TrimSpace(p)
			file := p
			if i := strings.LastIndex(p, ".feature:"); i >= 0 {
				file = p[:i+len(".feature")]
			}
			if _, err := os.Stat(file); err != nil {
				t.Fatalf("%s: %v", envFeatures, err)
			}
			paths = append(paths, p)
		}
		return paths
	}
	dir, err := defaultFeaturesDir()
	if err != nil {
		t.Fatalf("%v; set %s", err, envFeatures)
	}
	return []string{dir}
}

// defaultFeaturesDir finds ../shared/conformance/features from the
// repository root (the directory holding go.mod).
func defaultFeaturesDir() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			features := filepath.Clean(filepath.Join(dir, featuresFromRepo))
			files, _ := filepath.Glob(filepath.Join(features, "*.feature"))
			if len(files) == 0 {
				return "", fmt.Errorf("no .feature files in %s", features)
			}
			return features, nil
		}
		if filepath.Dir(dir) == dir {
			return "", fmt.Errorf("no go.mod above %s", wd)
		}
	}
}

func optionsFromEnv(t *testing.T) Options {
	t.Helper()
	opts := DefaultOptions()
	for env, d := range map[string]*time.Duration{
		envStatusTimeout: &opts.StatusTimeout,
		envAbsentTimeout: &opts.AbsentStatusTimeout,
		envScaleSettle:   &opts.ScaleSettle,
	} {
		if v := os.Getenv(env); v != "" {
			parsed, err := time.ParseDuration(v)
			if err != nil {
				t.Fatalf("%s: %v", env, err)
			}
			*d = parsed
		}
	}
	return opts
}

// pierBinary returns PIER_BIN or builds ./cmd/pier into dir.
func pierBinary(t *testing.T, dir string) string {
	t.Helper()
	if bin := os.Getenv(envPierBin); bin != "" {
		abs, err := filepath.Abs(bin)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(abs); err != nil {
			t.Fatalf("%s: %v", envPierBin, err)
		}
		return abs
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("no %s and no go tool to build pier: %v", envPierBin, err)
	}
	bin := filepath.Join(dir, "pier")
	cmd := exec.CommandContext(t.Context(), goBin, "build", "-o", bin, "pier.dev/pier/cmd/pier")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building pier (or set %s): %v\n%s", envPierBin, err, out)
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
