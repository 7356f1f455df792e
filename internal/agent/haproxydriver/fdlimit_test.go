package haproxydriver

import (
	"context"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"pier.dev/pier/internal/haproxy/render"
	"pier.dev/pier/internal/metrics"
	"pier.dev/pier/test/harness"
)

// TestShardsLoadBeyondTheFDLimit runs HAProxy under a hard RLIMIT_NOFILE
// of 512, far below what the rendered config asks for (2 × maxconn 4096,
// plus a listener and a check each). HAProxy 2.6's default strict-limits
// would refuse to start it, and at thousands of load balancers a shard
// refused every reload this way; the config now loads within the limit,
// every load balancer serves, a reload for one more is taken, and the
// shortfall is published.
func TestShardsLoadBeyondTheFDLimit(t *testing.T) {
	needHAProxy(t)
	haproxy, err := exec.LookPath("haproxy")
	if err != nil {
		t.Fatal(err)
	}
	dir := harness.ShortTempDir(t)
	const limit = 512
	wrapper := filepath.Join(dir, "haproxy-512fd")
	script := "#!/bin/sh\nulimit -n 512 || exit 1\nexec '" + haproxy + "' \"$@\"\n"
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	d, err := New(Config{StateDir: filepath.Join(dir, "state"), Binary: wrapper, Secrets: noSecrets{}, Metrics: metrics.New(), Processes: 2,
		Render: render.Options{HardStopAfter: 2 * time.Second, MinSlots: 8},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close(true) })
	if err := d.Recover(context.Background(), map[string]bool{}); err != nil {
		t.Fatal(err)
	}
	lbs := lbsIn(t, 0, 2, 1, 3)
	applyAll(t, d, lbs[:2]...)
	serveAll(t, lbs[:2]...)
	sh := d.lbs[lbs[0].UUID].sh
	reloads := sh.proc.Stats().ReloadsOK
	applyAll(t, d, lbs[2])
	serveAll(t, lbs...)
	if got := sh.proc.Stats().ReloadsOK; got != reloads+1 {
		t.Errorf("one more load balancer: %d reloads taken, want 1", got-reloads)
	}

	short, ok := sh.proc.FDShortfall()
	if !ok || short.Limit != limit || short.Needed <= 2*4096 {
		t.Fatalf("shortfall %+v (reported %v), want the limit %d and a need above 2 × maxconn", short, ok, limit)
	}
	d.Drifted()
	if got := testutil.ToFloat64(d.cfg.Metrics.FDShortfall); got != float64(short.Needed-limit) {
		t.Errorf("pier_haproxy_fd_shortfall %v, want %d", got, short.Needed-limit)
	}
}
