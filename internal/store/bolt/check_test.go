package bolt

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"pier.dev/pier/internal/store/storetest"
)

// written makes a real state file of a few dozen pages and returns its
// path and bytes.
func written(t *testing.T) (string, []byte) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "pier.db")
	s := open(t, path)
	for i := range 200 {
		if err := s.PutSpec(t.Context(), storetest.Sample(fmt.Sprintf("lb-%03d", i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < 16*4096 {
		t.Fatalf("state file of %d bytes: too small for the damage below", len(b))
	}
	return path, b
}

// TestDamagedFileRefused damages a real state file the ways a disk, a
// copy or an operator does, and opens it: each is refused with one line
// that names the file, says what is wrong and what to do, in place of
// bbolt's SIGBUS or panic (run without the checks, the "truncated" cases
// kill the test binary).
func TestDamagedFileRefused(t *testing.T) {
	_, good := written(t)
	pageSize := 4096
	zero := func(b []byte, from, to int) []byte {
		b = append([]byte(nil), b...)
		clear(b[from:to])
		return b
	}
	for _, tc := range []struct {
		name string
		data []byte
		want string
	}{
		{"truncated within the data", good[:len(good)/2], "truncated"},
		{"truncated to a page and a bit", good[:pageSize+100], "truncated"},
		{"truncated within the first page", good[:1000], "truncated"},
		{"truncated within the first meta", good[:40], "no valid meta page"},
		{"both meta pages zeroed", zero(good, 0, 2*pageSize), "no valid meta page"},
		{"not a database", []byte(strings.Repeat("not bbolt\n", 1000)), "no valid meta page"},
		{"the freelist and what follows zeroed", zero(good, 3*pageSize, len(good)), "damaged"},
		{"one data page zeroed", zero(good, 100*pageSize, 101*pageSize), "damaged"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "pier.db")
			if err := os.WriteFile(path, tc.data, 0o600); err != nil {
				t.Fatal(err)
			}
			s, err := Open(path)
			if err == nil {
				s.Close()
				t.Fatalf("Open of a damaged file succeeded")
			}
			msg := err.Error()
			t.Logf("%s", msg)
			if !errors.Is(err, ErrDamaged) {
				t.Errorf("error does not match ErrDamaged: %v", err)
			}
			for _, want := range []string{path, tc.want, "restore it from a backup", "move it aside"} {
				if !strings.Contains(msg, want) {
					t.Errorf("error %q does not say %q", msg, want)
				}
			}
			if strings.Contains(msg, "\n") {
				t.Errorf("error is more than one line: %q", msg)
			}
		})
	}
}

// TestCheckedFileOpens: the checks pass a sound file, one page 0 of which
// is damaged (bbolt recovers from page 1), a new file and an empty one.
func TestCheckedFileOpens(t *testing.T) {
	path, good := written(t)
	s := open(t, path)
	lbs, err := s.List(t.Context())
	if err != nil || len(lbs) != 200 {
		t.Fatalf("List: %d load balancers, %v", len(lbs), err)
	}
	s.Close()

	damaged0 := append([]byte(nil), good...)
	clear(damaged0[:4096])
	p0 := filepath.Join(t.TempDir(), "pier.db")
	if err := os.WriteFile(p0, damaged0, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := checkFile(p0); err != nil {
		t.Errorf("page 0 damaged, page 1 sound: %v", err)
	}

	empty := filepath.Join(t.TempDir(), "pier.db")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	open(t, empty).Close()
	open(t, filepath.Join(t.TempDir(), "new", "pier.db")).Close()
}
