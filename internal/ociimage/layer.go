// Package ociimage writes OCI image layouts (and archives of them) from
// plain directories, byte for byte reproducibly, using only the standard
// library. It exists so pier can build its container images without a
// container daemon or a registry: a directory tree goes in, a tar of an
// OCI image layout comes out, and the same tree gives the same digest.
package ociimage

import (
	"archive/tar"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"
)

// Layer is one written layer blob and what a config and a manifest need
// to know about it.
type Layer struct {
	// Digest is "sha256:<hex>" of the compressed blob (the manifest's view).
	Digest string
	// DiffID is "sha256:<hex>" of the uncompressed tar (the config's view).
	DiffID string
	// Size is the compressed blob's length in bytes.
	Size int64
	// UncompressedSize is the tar stream's length in bytes.
	UncompressedSize int64
	// Entries is the number of tar entries written.
	Entries int
	// Skipped counts device nodes, FIFOs and sockets left out (see skip).
	Skipped int
	// Comment becomes this layer's history entry's created_by.
	Comment string
}

// entry is one path of the tree to archive, found by walking it.
type entry struct {
	name string // slash-separated, relative to the root, no leading "./"
	path string // where it is on disk
	info fs.FileInfo
}

// collect walks root and returns every path below it sorted by name, so
// that the tar's order never depends on the file system's readdir order.
func collect(root string) ([]entry, error) {
	var entries []entry
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("walk %s: %w", p, err)
		}
		if p == root {
			return nil
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return fmt.Errorf("relative path of %s: %w", p, err)
		}
		info, err := os.Lstat(p)
		if err != nil {
			return fmt.Errorf("lstat %s: %w", p, err)
		}
		entries = append(entries, entry{name: filepath.ToSlash(rel), path: p, info: info})
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].name < entries[j].name })
	return entries, nil
}

// inode identifies a file across its hard links.
type inode struct{ dev, ino uint64 }

// tarWriter turns sorted entries into tar headers. It remembers the first
// name of every multiply-linked inode so later names become hard links.
type tarWriter struct {
	tw      *tar.Writer
	epoch   time.Time
	links   map[inode]string
	entries int
	skipped int
}

// skip reports whether a file type is left out of layers: device nodes,
// FIFOs and sockets. Container runtimes mount their own /dev, and an
// unprivileged unpacker could not create device nodes anyway.
func skip(mode fs.FileMode) bool {
	return mode&(fs.ModeDevice|fs.ModeCharDevice|fs.ModeNamedPipe|fs.ModeSocket) != 0
}

// header builds the tar header for one entry. It sets only the fields
// that describe the file (name, type, mode, owner, size, link target)
// and a fixed mtime; no atime, ctime, user or group names are written, so
// Go's tar writer picks USTAR and adds PAX records only for long names.
func (w *tarWriter) header(e entry) (*tar.Header, error) {
	st, ok := e.info.Sys().(*syscall.Stat_t)
	if !ok {
		return nil, fmt.Errorf("%s: no stat data (not a unix file system?)", e.path)
	}
	h := &tar.Header{
		Name:    e.name,
		Mode:    tarMode(e.info.Mode()),
		Uid:     int(st.Uid),
		Gid:     int(st.Gid),
		ModTime: w.epoch,
	}
	mode := e.info.Mode()
	switch {
	case mode.IsDir():
		h.Typeflag = tar.TypeDir
		h.Name += "/"
	case mode&fs.ModeSymlink != 0:
		target, err := os.Readlink(e.path)
		if err != nil {
			return nil, fmt.Errorf("readlink %s: %w", e.path, err)
		}
		h.Typeflag = tar.TypeSymlink
		h.Linkname = target
	case mode.IsRegular():
		h.Typeflag = tar.TypeReg
		h.Size = e.info.Size()
		if uint64(st.Nlink) > 1 {
			key := inode{dev: uint64(st.Dev), ino: uint64(st.Ino)}
			if first, seen := w.links[key]; seen {
				h.Typeflag = tar.TypeLink
				h.Linkname = first
				h.Size = 0
			} else {
				w.links[key] = e.name
			}
		}
	default:
		return nil, fmt.Errorf("%s: unsupported file type %v", e.path, mode.Type())
	}
	return h, nil
}

// tarMode maps Go's file mode to the tar header's permission and
// setuid/setgid/sticky bits.
func tarMode(m fs.FileMode) int64 {
	mode := int64(m.Perm())
	if m&fs.ModeSetuid != 0 {
		mode |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		mode |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		mode |= 0o1000
	}
	return mode
}

// write writes one entry, with its content for regular files.
func (w *tarWriter) write(e entry) error {
	if skip(e.info.Mode()) {
		w.skipped++
		return nil
	}
	h, err := w.header(e)
	if err != nil {
		return err
	}
	if err := w.tw.WriteHeader(h); err != nil {
		return fmt.Errorf("tar header for %s: %w", e.name, err)
	}
	w.entries++
	if h.Typeflag != tar.TypeReg {
		return nil
	}
	f, err := os.Open(e.path)
	if err != nil {
		return fmt.Errorf("open %s: %w", e.path, err)
	}
	defer f.Close()
	n, err := io.Copy(w.tw, f)
	if err != nil {
		return fmt.Errorf("copy %s: %w", e.path, err)
	}
	if n != h.Size {
		return fmt.Errorf("%s changed size while archived (%d, then %d bytes)", e.path, h.Size, n)
	}
	return nil
}

// WriteTar writes the tree under root as an uncompressed tar to out:
// entries sorted by name, every mtime set to epoch, owners and modes as
// on disk, hard links and symlinks kept. It returns the counts of written
// and skipped entries.
func WriteTar(out io.Writer, root string, epoch time.Time) (entries, skipped int, err error) {
	list, err := collect(root)
	if err != nil {
		return 0, 0, err
	}
	w := &tarWriter{tw: tar.NewWriter(out), epoch: epoch.UTC().Truncate(time.Second), links: map[inode]string{}}
	for _, e := range list {
		if err := w.write(e); err != nil {
			return 0, 0, err
		}
	}
	if err := w.tw.Close(); err != nil {
		return 0, 0, fmt.Errorf("close tar: %w", err)
	}
	return w.entries, w.skipped, nil
}

// countingHash hashes and counts what is written through it.
type countingHash struct {
	h hash.Hash
	n int64
}

func (c *countingHash) Write(p []byte) (int, error) {
	c.n += int64(len(p))
	return c.h.Write(p)
}

func (c *countingHash) digest() string { return "sha256:" + hex.EncodeToString(c.h.Sum(nil)) }

// WriteLayer archives root into a gzip-compressed layer blob stored in
// blobDir (an OCI layout's blobs/sha256 folder) under its digest. The
// gzip header carries no name and mtime 0, so the blob depends only on
// the tree's content.
func WriteLayer(blobDir, root string, epoch time.Time, comment string) (Layer, error) {
	tmp, err := os.CreateTemp(blobDir, ".layer-*")
	if err != nil {
		return Layer{}, fmt.Errorf("create layer temp file: %w", err)
	}
	defer os.Remove(tmp.Name()) // no-op once renamed
	defer tmp.Close()

	compressed := &countingHash{h: sha256.New()}
	gz, err := gzip.NewWriterLevel(io.MultiWriter(tmp, compressed), gzip.DefaultCompression)
	if err != nil {
		return Layer{}, fmt.Errorf("gzip writer: %w", err)
	}
	// The zero gzip.Header (no name, no comment, ModTime zero) is what we
	// want; set it explicitly so the intent survives edits.
	gz.Header = gzip.Header{OS: 255}
	uncompressed := &countingHash{h: sha256.New()}
	entries, skipped, err := WriteTar(io.MultiWriter(gz, uncompressed), root, epoch)
	if err != nil {
		return Layer{}, fmt.Errorf("layer from %s: %w", root, err)
	}
	if err := gz.Close(); err != nil {
		return Layer{}, fmt.Errorf("close gzip: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return Layer{}, fmt.Errorf("close layer temp file: %w", err)
	}
	l := Layer{
		Digest:           compressed.digest(),
		DiffID:           uncompressed.digest(),
		Size:             compressed.n,
		UncompressedSize: uncompressed.n,
		Entries:          entries,
		Skipped:          skipped,
		Comment:          comment,
	}
	if err := os.Rename(tmp.Name(), blobPath(blobDir, l.Digest)); err != nil {
		return Layer{}, fmt.Errorf("store layer blob: %w", err)
	}
	return l, nil
}

// blobPath is where a blob with the given "sha256:<hex>" digest lives.
func blobPath(blobDir, digest string) string {
	return filepath.Join(blobDir, strings.TrimPrefix(digest, "sha256:"))
}

// writeBlob stores data in blobDir under its digest and returns the digest.
func writeBlob(blobDir string, data []byte) (string, error) {
	sum := sha256.Sum256(data)
	digest := "sha256:" + hex.EncodeToString(sum[:])
	if err := os.WriteFile(blobPath(blobDir, digest), data, 0o644); err != nil {
		return "", fmt.Errorf("write blob %s: %w", digest, err)
	}
	return digest, nil
}

// errNoLayers is returned when an image would have no layers at all.
var errNoLayers = errors.New("an image needs at least one layer")
