// Package fsutil holds the one way pier replaces a file that another
// process reads: HAProxy its config fragments and maps, keepalived its
// config and track files, a restarted agent its saved specs.
package fsutil

import (
	"fmt"
	"os"
	"path/filepath"
)

// WriteAtomic replaces path with data, mode perm: written to a temporary
// file in the same folder, then renamed over path, so a reader sees the
// old content or the new, never a part. The temporary name is unique
// (writers may race on one path) and ends in ".tmp", which no reader
// loads: HAProxy reads only a folder's *.cfg files. It does not fsync: a
// crash may lose the new content, never leave a torn file.
func WriteAtomic(path string, data []byte, perm os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".*.tmp")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp, perm)
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("install %s: %w", path, err)
	}
	return nil
}
