package fsutil

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestWriteAtomic: a new file and a replaced one hold exactly the data,
// with the mode asked, and no temporary file stays; a folder that does
// not exist is an error that names the path.
func TestWriteAtomic(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.cfg")
	for _, data := range []string{"first\n", "second, longer\n", ""} {
		if err := WriteAtomic(path, []byte(data), 0o640); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(path)
		if err != nil || string(got) != data {
			t.Fatalf("read %q, %v; want %q", got, err, data)
		}
		st, _ := os.Stat(path)
		if st.Mode().Perm() != 0o640 {
			t.Fatalf("mode %v, want 0640", st.Mode().Perm())
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("folder holds %d files, want only a.cfg", len(entries))
	}
	missing := filepath.Join(dir, "no", "b.cfg")
	if err := WriteAtomic(missing, []byte("x"), 0o600); err == nil || !strings.Contains(err.Error(), missing) {
		t.Fatalf("into a missing folder: %v", err)
	}
}
