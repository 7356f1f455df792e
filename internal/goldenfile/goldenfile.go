// Package goldenfile compares rendered output with a file under testdata/,
// for the packages whose output is pinned byte for byte (HAProxy
// configuration, nftables, keepalived, pier lint). A test binary run with
// -update rewrites the files instead; review the diff before committing.
package goldenfile

import (
	"bytes"
	"flag"
	"os"
	"testing"
)

// update is registered once here, so every test binary that imports the
// package accepts -update.
var update = flag.Bool("update", false, "rewrite the golden files under testdata/ instead of comparing")

// Check compares got with the file at path, or writes it with -update.
// rerun is the command that updates it, named in the failure.
func Check(t testing.TB, path string, got []byte, rerun string) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run %s -update)", err, rerun)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the rendered output; review and run %s -update.\n--- got:\n%s", path, rerun, got)
	}
}

// Updating says whether -update was given, for tests that must skip
// other checks while the files are rewritten.
func Updating() bool { return *update }
