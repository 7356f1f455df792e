package vrrp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// ErrCheckFailed wraps what `keepalived -t` said of a refused config.
var ErrCheckFailed = errors.New("keepalived configuration check failed")

// CheckTimeout bounds a `keepalived -t`: it parses a file of a few
// instances in milliseconds, and every address change of the node waits
// behind it.
const CheckTimeout = 30 * time.Second

// Check runs `keepalived -t` on config, written to a scratch file in dir,
// killed after CheckTimeout. keepalived 2.2 exits 0 for some errors it
// only logs, so its output is read too: any line naming an error or an
// unknown keyword fails.
func Check(ctx context.Context, binary string, config []byte, dir string) error {
	return check(ctx, binary, config, dir, CheckTimeout)
}

func check(ctx context.Context, binary string, config []byte, dir string, timeout time.Duration) error {
	f, err := os.CreateTemp(dir, "check-*.conf")
	if err != nil {
		return fmt.Errorf("keepalived check: %w", err)
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(config); err != nil {
		f.Close()
		return fmt.Errorf("keepalived check: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("keepalived check: %w", err)
	}
	deadline, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(deadline, binary, "--config-test", "-f", f.Name()) // killed at the deadline
	cmd.Dir = filepath.Dir(f.Name())
	cmd.WaitDelay = time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	runErr := cmd.Run()
	if ctx.Err() == nil && deadline.Err() != nil {
		return fmt.Errorf("%w: keepalived -t took longer than %s, killed: %s", ErrCheckFailed, timeout, strings.TrimSpace(out.String()))
	}
	if msg := checkComplaints(out.String()); runErr != nil || msg != "" {
		return fmt.Errorf("%w: keepalived -t: %v %s", ErrCheckFailed, runErr, msg)
	}
	return nil
}

func checkComplaints(out string) string {
	var bad []string
	for _, l := range strings.Split(out, "\n") {
		low := strings.ToLower(l)
		if strings.Contains(low, "error") || strings.Contains(low, "unknown keyword") ||
			strings.Contains(low, "invalid") || strings.Contains(low, "out of range") {
			bad = append(bad, strings.TrimSpace(l))
		}
	}
	return strings.Join(bad, "; ")
}
