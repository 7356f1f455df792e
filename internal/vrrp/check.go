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
)

// ErrCheckFailed wraps what `keepalived -t` said of a refused config.
var ErrCheckFailed = errors.New("keepalived configuration check failed")

// Check runs `keepalived -t` on config, written to a scratch file in dir.
// keepalived 2.2 exits 0 for some errors it only logs, so its output is
// read too: any line naming an error or an unknown keyword fails.
func Check(ctx context.Context, binary string, config []byte, dir string) error {
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
	cmd := exec.CommandContext(ctx, binary, "--config-test", "-f", f.Name())
	cmd.Dir = filepath.Dir(f.Name())
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	runErr := cmd.Run()
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
