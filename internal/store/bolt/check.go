package bolt

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"runtime/debug"

	bbolt "go.etcd.io/bbolt"
)

// ErrDamaged is matched (errors.Is) by the error Open returns when the
// state file is truncated or corrupt.
var ErrDamaged = errors.New("state file is damaged")

// damagedError names the file, says what is wrong with it and what the
// operator can do, in one line: bbolt itself meets a truncated file with
// a SIGBUS or a panic deep in its freelist, hundreds of lines of trace
// that name neither the file nor a way out.
type damagedError struct {
	path, why string
}

func (e *damagedError) Error() string {
	return fmt.Sprintf("state file %s is damaged (%s): restore it from a backup, "+
		"or move it aside to start with an empty one (docs/operations.md, \"pier.db lost or damaged\")",
		e.path, e.why)
}

func (e *damagedError) Is(target error) bool { return target == ErrDamaged }

// bbolt's on-disk meta page, as its internal/common package lays it out:
// a 16-byte page header, then magic, version, page size, flags (4 bytes
// each), the root bucket (root page, sequence), the freelist page, the
// high-water mark (pages in use), the transaction id (8 bytes each) and
// an FNV-64a checksum of everything before it. Pages 0 and 1 hold one
// meta each; the valid one with the higher transaction id is current.
const (
	pageHeaderSize = 16
	metaMagic      = 0xED0CDAED
	metaVersion    = 2
	metaSize       = 64
	metaSummed     = 56 // the bytes the checksum covers
)

type meta struct {
	pageSize uint32
	pages    uint64 // high-water mark: the file holds at least this many pages
	txid     uint64
}

// readMeta decodes the meta page at buf, or says why it is not one.
func readMeta(buf []byte) (meta, error) {
	if len(buf) < pageHeaderSize+metaSize {
		return meta{}, errors.New("too short")
	}
	m := buf[pageHeaderSize : pageHeaderSize+metaSize]
	le := binary.NativeEndian // bbolt writes its structs as they are in memory
	if le.Uint32(m[0:]) != metaMagic {
		return meta{}, errors.New("no bbolt magic")
	}
	if v := le.Uint32(m[4:]); v != metaVersion {
		return meta{}, fmt.Errorf("bbolt format version %d, not %d", v, metaVersion)
	}
	h := fnv.New64a()
	h.Write(m[:metaSummed])
	if h.Sum64() != le.Uint64(m[metaSummed:]) {
		return meta{}, errors.New("checksum mismatch")
	}
	return meta{pageSize: le.Uint32(m[8:]), pages: le.Uint64(m[40:]), txid: le.Uint64(m[48:])}, nil
}

// checkFile refuses a state file bbolt would fault on when it maps it:
// one whose meta pages are both invalid, or shorter than the pages its
// current meta says are in use (a truncated copy, a full disk). A
// missing or empty file is new, and passes: bbolt initialises it.
func checkFile(path string) error {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("open state file %s: %w", path, err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return fmt.Errorf("open state file %s: %w", path, err)
	}
	size := info.Size()
	if size == 0 {
		return nil
	}
	if !info.Mode().IsRegular() {
		return &damagedError{path: path, why: "not a regular file"}
	}
	var metas []meta
	var why0 error
	if m, err := metaAt(f, 0); err == nil {
		metas = append(metas, m)
		if m1, err := metaAt(f, int64(m.pageSize)); err == nil {
			metas = append(metas, m1)
		}
	} else {
		why0 = err
		// Page 0 is damaged: find page 1 as bbolt does, at each page size
		// it supports.
		for shift := 0; shift <= 14; shift++ {
			pos := int64(1024) << shift
			if pos >= size {
				break
			}
			if m, err := metaAt(f, pos); err == nil && int64(m.pageSize) == pos {
				metas = append(metas, m)
				break
			}
		}
	}
	if len(metas) == 0 {
		return &damagedError{path: path, why: fmt.Sprintf("%d bytes, no valid meta page: %v", size, why0)}
	}
	cur := metas[0]
	for _, m := range metas[1:] {
		if m.txid > cur.txid {
			cur = m
		}
	}
	if need := int64(cur.pages) * int64(cur.pageSize); size < need {
		return &damagedError{path: path, why: fmt.Sprintf("truncated: %d bytes, its last transaction needs %d",
			size, need)}
	}
	return nil
}

func metaAt(f *os.File, off int64) (meta, error) {
	buf := make([]byte, pageHeaderSize+metaSize)
	if _, err := f.ReadAt(buf, off); err != nil {
		if errors.Is(err, io.EOF) {
			return meta{}, errors.New("file ends before its meta page")
		}
		return meta{}, err
	}
	return readMeta(buf)
}

// openChecked opens the file with bbolt and walks every page once
// (tx.Check), so that damage the meta pages do not show (a page of
// zeroes, a freelist overwritten) is found here, as an error, rather than
// as a panic at some later read. bbolt panics on such pages, and a page
// beyond the end of the file faults: both are turned into an error
// naming the file.
func openChecked(path string, opts *bbolt.Options) (db *bbolt.DB, err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			if db != nil {
				_ = db.Close()
			}
			db, err = nil, &damagedError{path: path, why: fmt.Sprint(r)}
		}
	}()
	db, err = bbolt.Open(path, 0o600, opts)
	if err != nil {
		return nil, err
	}
	err = db.View(func(tx *bbolt.Tx) error {
		var first error
		for e := range tx.Check() { // read to the end: the check runs until it closes the channel
			if first == nil {
				first = e
			}
		}
		return first
	})
	if err != nil {
		db.Close()
		return nil, &damagedError{path: path, why: err.Error()}
	}
	return db, nil
}
