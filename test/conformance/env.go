package conformance

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The environment the test entries (TestConformance here, and the
// Kubernetes one in ./kube) read.
const (
	EnvGate          = "PIER_CONFORMANCE"                 // "1" runs a suite
	EnvPierBin       = "PIER_BIN"                         // pier binary; built from ./cmd/pier if unset
	EnvFeatures      = "PIER_CONFORMANCE_FEATURES"        // comma-separated .feature files or dirs (file:line works)
	EnvFormat        = "PIER_CONFORMANCE_FORMAT"          // godog formats, e.g. "pretty,junit:/tmp/report.xml"
	EnvStatusTimeout = "PIER_CONFORMANCE_STATUS_TIMEOUT"  // wait for an Ingress address
	EnvAbsentTimeout = "PIER_CONFORMANCE_ABSENT_TIMEOUT"  // how long a foreign Ingress must stay without one
	EnvPollInterval  = "PIER_CONFORMANCE_POLL_INTERVAL"   // status polling interval
	EnvScaleSettle   = "PIER_CONFORMANCE_SCALE_SETTLE"    // sleep after scaling (60s, as upstream)
	EnvKeep          = "PIER_CONFORMANCE_KEEP"            // "1" keeps the work dir even when passing
	EnvStop          = "PIER_CONFORMANCE_STOP_ON_FAILURE" // "1" stops at the first failed scenario
	featuresFromRepo = "../shared/conformance/features"   // relative to the repository root
)

// ShortTempDir is where work folders go: HAProxy's runtime sockets live
// under a state folder and a Unix socket path has a small limit (pier
// refuses paths over 90 bytes), so a long TMPDIR is not used.
func ShortTempDir() string {
	if tmp := os.TempDir(); len(tmp) <= 16 {
		return tmp
	}
	return "/tmp"
}

// FeaturePaths returns PIER_CONFORMANCE_FEATURES or the shared features
// directory beside the repository, checked to exist.
func FeaturePaths() ([]string, error) {
	if env := os.Getenv(EnvFeatures); env != "" {
		var paths []string
		for p := range strings.SplitSeq(env, ",") {
			p = strings.TrimSpace(p)
			file := p
			if i := strings.LastIndex(p, ".feature:"); i >= 0 {
				file = p[:i+len(".feature")]
			}
			if _, err := os.Stat(file); err != nil {
				return nil, fmt.Errorf("%s: %w", EnvFeatures, err)
			}
			paths = append(paths, p)
		}
		return paths, nil
	}
	dir, err := defaultFeaturesDir()
	if err != nil {
		return nil, fmt.Errorf("%w; set %s", err, EnvFeatures)
	}
	return []string{dir}, nil
}

// RequireFeaturePaths is FeaturePaths for a test entry. The upstream
// scenarios live beside the repository (../shared), which a clone of the
// repository alone does not have: there the suite says so and skips,
// unless it runs under CI (CI=true), where a missing scenario folder is a
// broken checkout and fails the test.
func RequireFeaturePaths(t testing.TB) []string {
	t.Helper()
	paths, err := FeaturePaths()
	switch {
	case err == nil:
		return paths
	case os.Getenv("CI") == "true":
		t.Fatalf("%v (CI=true: the upstream Ingress scenarios are required)", err)
	default:
		t.Skipf("SKIPPED, NOT PASSED: the upstream Ingress scenarios are not here (%v); "+
			"they come with the shared folder beside the repository", err)
	}
	return nil
}

// defaultFeaturesDir finds ../shared/conformance/features from the
// repository root (the directory holding go.mod).
func defaultFeaturesDir() (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	features := filepath.Clean(filepath.Join(root, featuresFromRepo))
	files, _ := filepath.Glob(filepath.Join(features, "*.feature"))
	if len(files) == 0 {
		return "", fmt.Errorf("no .feature files in %s", features)
	}
	return features, nil
}

// RepoRoot is the directory holding go.mod, above the working directory.
func RepoRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		if filepath.Dir(dir) == dir {
			return "", fmt.Errorf("no go.mod above %s", wd)
		}
	}
}

// OptionsFromEnv returns base with the timings the environment sets.
func OptionsFromEnv(base Options) (Options, error) {
	opts := base
	for env, d := range map[string]*time.Duration{
		EnvStatusTimeout: &opts.StatusTimeout,
		EnvAbsentTimeout: &opts.AbsentStatusTimeout,
		EnvPollInterval:  &opts.PollInterval,
		EnvScaleSettle:   &opts.ScaleSettle,
	} {
		if v := os.Getenv(env); v != "" {
			parsed, err := time.ParseDuration(v)
			if err != nil {
				return Options{}, fmt.Errorf("%s: %w", env, err)
			}
			*d = parsed
		}
	}
	opts.StopOnFailure = os.Getenv(EnvStop) == "1"
	return opts, nil
}
