package files

import (
	"os"
	"time"
)

// racyWindow is how recently a file may have been modified, when it is
// read, for its stat to be no proof that a later write changes it: a
// write within the same timestamp tick, leaving the same size, looks
// unchanged. Linux filesystems stamp with a clock tick of a few
// milliseconds, some (ext4 with small inodes, FAT) with one or two
// seconds; a file modified within racyWindow of its read is read again
// on every load until it is older (as git does with its index).
const racyWindow = 2 * time.Second

// identity is what one stat says about a file: which inode it is, its
// size, and when its bytes (mtime) or inode (ctime, which no tool can set
// back) last changed. Any write, truncation, replacement by rename, or
// copy with a preserved mtime changes it.
type identity struct {
	dev, ino     uint64
	size         int64
	mtime, ctime int64 // nanoseconds since the epoch
}

// newest is the later of the two timestamps.
func (id identity) newest() time.Time {
	return time.Unix(0, max(id.mtime, id.ctime))
}

// statIdentity stats path, following links as reading it does.
func statIdentity(path string) (identity, bool) {
	info, err := os.Stat(path)
	if err != nil || !info.Mode().IsRegular() {
		return identity{}, false
	}
	return identityOf(info)
}
