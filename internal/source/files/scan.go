package files

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// scanResult is the set of manifest files found under the named paths.
type scanResult struct {
	files    []string          // as reached from the named paths, deduplicated, sorted
	abs      map[string]string // the absolute path of each of files
	dirs     []string          // absolute paths of every folder walked
	problems []Problem
	errs     []error // named paths missing or unreadable
}

// scan finds the manifest files. A named file is read whatever its
// extension, since the user asked for it; inside folders only *.yaml,
// *.yml and *.json count.
func scan(paths []string) scanResult {
	res := scanResult{abs: map[string]string{}}
	seen := map[string]bool{} // absolute path, so -f dir -f dir/a.yaml reads a.yaml once
	addFile := func(p string) {
		abs, err := filepath.Abs(p)
		if err != nil {
			abs = filepath.Clean(p)
		}
		if !seen[abs] {
			seen[abs] = true
			res.files = append(res.files, p)
			res.abs[p] = abs
		}
	}
	for _, p := range paths {
		info, err := os.Stat(p)
		if err == nil && !info.IsDir() && !info.Mode().IsRegular() {
			err = fmt.Errorf("not a regular file or folder")
		}
		if err == nil && info.IsDir() {
			err = res.walk(p, addFile)
		}
		if err != nil {
			res.errs = append(res.errs, fmt.Errorf("manifest path %s: %w", p, err))
			res.problems = append(res.problems, Problem{File: p, Message: err.Error()})
			continue
		}
		if !info.IsDir() {
			addFile(p)
		}
	}
	slices.Sort(res.files)
	return res
}

// walk adds the manifests in dir and its subfolders. Hidden entries are
// skipped, which also skips the ..data machinery of a mounted ConfigMap
// while its visible symlinks are read. Symlinked folders are not followed,
// so a link cycle cannot make a reload endless. Only an unreadable dir
// itself is returned; an unreadable subfolder is a problem.
func (res *scanResult) walk(dir string, addFile func(string)) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	if abs, err := filepath.Abs(dir); err == nil {
		res.dirs = append(res.dirs, abs)
	}
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, ".") || isEditorTemp(name) {
			continue
		}
		full := filepath.Join(dir, name)
		mode := e.Type()
		if mode&fs.ModeSymlink != 0 {
			info, err := os.Stat(full)
			if err != nil || info.IsDir() {
				continue // dangling link, or a folder we do not follow
			}
			mode = info.Mode().Type()
		}
		switch {
		case mode.IsDir():
			if err := res.walk(full, addFile); err != nil {
				res.problems = append(res.problems, Problem{File: full, Message: err.Error()})
			}
		case mode.IsRegular() && isManifestName(name):
			addFile(full)
		}
	}
	return nil
}

func isManifestName(name string) bool {
	switch strings.ToLower(filepath.Ext(name)) {
	case ".yaml", ".yml", ".json":
		return true
	}
	return false
}

// readFile reads path and returns what it decodes to, re-using old's
// decode when the bytes are the same: an unchanged file then keeps its
// objects, and their defaulted timestamps, exactly.
func (l *Loader) readFile(path string, old *fileEntry) *fileEntry {
	start := time.Now()
	data, info, err := readLimited(path)
	if err != nil {
		msg := err.Error()
		return &fileEntry{hash: sha256.Sum256([]byte("error\x00" + msg)),
			problems: []Problem{{File: path, Message: msg}}}
	}
	// The identity is the one before the bytes were read: a write while
	// reading changes it, and the file is read again next time.
	id, known := identityOf(info)
	stable := known && id.newest().Before(start.Add(-l.racy))
	hash := sha256.Sum256(data)
	if old != nil && old.hash == hash {
		e := *old
		e.id, e.stable = id, stable
		return &e
	}
	d := &fileDecoder{file: path, mtime: metav1.NewTime(info.ModTime()), previous: l.winners, log: l.log}
	d.decodeFile(data, strings.EqualFold(filepath.Ext(path), ".json"))
	l.log.Debug("decoded manifest file", "file", path,
		"objects", len(d.objects), "problems", len(d.problems))
	return &fileEntry{hash: hash, objects: d.objects, problems: d.problems, id: id, stable: stable}
}

// readLimited reads a file of at most MaxFileSize bytes. The limit is also
// enforced while reading, as the file may grow after the stat. The file is
// opened without blocking and must be a regular file once open: a FIFO or
// device swapped in after the scan would otherwise block the loader for
// good (opening a FIFO waits for a writer).
func readLimited(path string) ([]byte, fs.FileInfo, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("open: %w", err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, nil, fmt.Errorf("stat: %w", err)
	}
	if !info.Mode().IsRegular() {
		return nil, nil, fmt.Errorf("not a regular file (%s); refused", info.Mode().Type())
	}
	tooBig := fmt.Errorf("file is larger than %d bytes (MaxFileSize); refused", MaxFileSize)
	if info.Size() > MaxFileSize {
		return nil, nil, tooBig
	}
	buf := bytes.NewBuffer(make([]byte, 0, info.Size()+512))
	if _, err := buf.ReadFrom(io.LimitReader(f, MaxFileSize+1)); err != nil {
		return nil, nil, fmt.Errorf("read: %w", err)
	}
	if buf.Len() > MaxFileSize {
		return nil, nil, tooBig
	}
	return buf.Bytes(), info, nil
}
