package ociimage

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"
)

var testEpoch = time.Unix(1700000000, 0).UTC()

// makeTree writes a small tree with a file, a nested file, a symlink, a
// hard link, an empty folder and a setuid file.
func makeTree(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(root, "usr/bin"), 0o755))
	must(os.MkdirAll(filepath.Join(root, "empty"), 0o700))
	must(os.WriteFile(filepath.Join(root, "usr/bin/tool"), []byte("#!/bin/sh\necho hi\n"), 0o755))
	must(os.WriteFile(filepath.Join(root, "b.txt"), []byte("bee\n"), 0o644))
	must(os.WriteFile(filepath.Join(root, "a-suid"), []byte("x"), 0o755))
	must(os.Chmod(filepath.Join(root, "a-suid"), 0o755|os.ModeSetuid))
	must(os.Symlink("usr/bin/tool", filepath.Join(root, "link")))
	must(os.Link(filepath.Join(root, "usr/bin/tool"), filepath.Join(root, "usr/bin/tool2")))
	// Different mtimes on disk must not matter.
	must(os.Chtimes(filepath.Join(root, "b.txt"), time.Now(), time.Now().Add(-time.Hour)))
	return root
}

// readTar lists a tar stream's headers.
func readTar(t *testing.T, r io.Reader) []*tar.Header {
	t.Helper()
	var hs []*tar.Header
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return hs
		}
		if err != nil {
			t.Fatal(err)
		}
		hs = append(hs, h)
	}
}

func TestWriteTarEntries(t *testing.T) {
	root := makeTree(t)
	var buf bytes.Buffer
	if _, _, err := WriteTar(&buf, root, testEpoch); err != nil {
		t.Fatal(err)
	}
	hs := readTar(t, &buf)
	var names []string
	byName := map[string]*tar.Header{}
	for _, h := range hs {
		names = append(names, h.Name)
		byName[h.Name] = h
		if !h.ModTime.Equal(testEpoch) {
			t.Errorf("%s: mtime %v, want %v", h.Name, h.ModTime, testEpoch)
		}
		if !h.AccessTime.IsZero() || !h.ChangeTime.IsZero() || len(h.PAXRecords) != 0 {
			t.Errorf("%s: atime/ctime/PAX records written: %+v", h.Name, h)
		}
		if h.Uname != "" || h.Gname != "" {
			t.Errorf("%s: user/group names written", h.Name)
		}
	}
	want := []string{"a-suid", "b.txt", "empty/", "link", "usr/", "usr/bin/", "usr/bin/tool", "usr/bin/tool2"}
	if !equal(names, want) {
		t.Fatalf("entries %q, want %q", names, want)
	}
	if !sort.StringsAreSorted(names) {
		t.Errorf("entries not sorted: %q", names)
	}
	if h := byName["link"]; h.Typeflag != tar.TypeSymlink || h.Linkname != "usr/bin/tool" {
		t.Errorf("symlink lost: %+v", h)
	}
	if h := byName["usr/bin/tool2"]; h.Typeflag != tar.TypeLink || h.Linkname != "usr/bin/tool" || h.Size != 0 {
		t.Errorf("hard link lost: %+v", h)
	}
	if h := byName["usr/bin/tool"]; h.Typeflag != tar.TypeReg || h.Mode != 0o755 {
		t.Errorf("first name of the hard-linked file: %+v", h)
	}
	if h := byName["a-suid"]; h.Mode != 0o4755 {
		t.Errorf("setuid bit lost: mode %o", h.Mode)
	}
	if h := byName["empty/"]; h.Typeflag != tar.TypeDir || h.Mode != 0o700 {
		t.Errorf("folder mode lost: %+v", h)
	}
	if h := byName["b.txt"]; h.Uid != os.Getuid() || h.Gid != os.Getgid() {
		t.Errorf("owner %d:%d, want the file's %d:%d", h.Uid, h.Gid, os.Getuid(), os.Getgid())
	}
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestWriteLayerReproducibleAndDigests(t *testing.T) {
	root := makeTree(t)
	var layers []Layer
	for i := 0; i < 2; i++ {
		blobs := t.TempDir()
		l, err := WriteLayer(blobs, root, testEpoch, "test")
		if err != nil {
			t.Fatal(err)
		}
		layers = append(layers, l)
		blob, err := os.ReadFile(blobPath(blobs, l.Digest))
		if err != nil {
			t.Fatal(err)
		}
		if got := sha(blob); got != l.Digest || int64(len(blob)) != l.Size {
			t.Errorf("blob digest %s size %d, layer says %s %d", got, len(blob), l.Digest, l.Size)
		}
		zr, err := gzip.NewReader(bytes.NewReader(blob))
		if err != nil {
			t.Fatal(err)
		}
		if zr.Name != "" || !zr.ModTime.IsZero() {
			t.Errorf("gzip header has name %q, mtime %v", zr.Name, zr.ModTime)
		}
		raw, err := io.ReadAll(zr)
		if err != nil {
			t.Fatal(err)
		}
		if got := sha(raw); got != l.DiffID || int64(len(raw)) != l.UncompressedSize {
			t.Errorf("uncompressed digest %s, layer's diff_id %s", got, l.DiffID)
		}
		// Touch a file between the runs: only content and metadata count.
		if err := os.Chtimes(filepath.Join(root, "b.txt"), time.Now(), time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	if layers[0] != layers[1] {
		t.Errorf("same tree, different layers:\n%+v\n%+v", layers[0], layers[1])
	}
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(s[:])
}

func TestSkipsSpecialFiles(t *testing.T) {
	if !skip(os.ModeNamedPipe) || !skip(os.ModeDevice|os.ModeCharDevice) || !skip(os.ModeSocket) {
		t.Error("special files are not skipped")
	}
	if skip(0) || skip(os.ModeDir) || skip(os.ModeSymlink) {
		t.Error("regular entries are skipped")
	}
}
