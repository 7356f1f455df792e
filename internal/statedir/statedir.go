// Package statedir sets up the state folder that `pier run` and `pier
// agent` keep their database and HAProxy folders in.
package statedir

import (
	"fmt"
	"os"
	"path/filepath"

	"pier.dev/pier/internal/haproxy/render"
)

// Prepare makes dir absolute, checks that HAProxy's socket paths under it
// will fit (render.CheckStateDir) and creates it, private to pier (the
// HAProxy driver later lets the group of HAProxy's workers search it, and
// nothing more, to reach the access-log socket). It returns the absolute
// path.
func Prepare(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("--state-dir %s: %w", dir, err)
	}
	if err := render.CheckStateDir(abs); err != nil {
		return "", fmt.Errorf("--state-dir: %w", err)
	}
	if err := os.MkdirAll(abs, 0o700); err != nil {
		return "", fmt.Errorf("create state dir: %w", err)
	}
	return abs, nil
}
