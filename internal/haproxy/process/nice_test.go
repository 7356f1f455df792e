//go:build linux

package process

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestDeferredCheckIsNiced: the check before a deferred reload runs at
// deferredNice, an ordinary check at the caller's niceness. The "HAProxy"
// here is a script that records the niceness it runs at, once the parent
// had the time to set it.
func TestDeferredCheckIsNiced(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "nice")
	bin := filepath.Join(dir, "fake-haproxy")
	script := "#!/bin/sh\nsleep 0.3\nawk '{print $19}' /proc/$$/stat > " + out + "\n"
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	niceness := func(nice int) string {
		t.Helper()
		if err := check(t.Context(), bin, []string{"x.cfg"}, nice); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(b))
	}
	base := niceness(0)
	if base == strconv.Itoa(deferredNice) {
		t.Skipf("the test itself runs at niceness %s", base)
	}
	if got := niceness(deferredNice); got != strconv.Itoa(deferredNice) {
		t.Fatalf("deferred check ran at niceness %s (an ordinary one at %s), want %d", got, base, deferredNice)
	}
}
