//go:build linux

package files

import (
	"io/fs"
	"syscall"
)

// identityOf is the identity of a file from its stat; ok is false when the
// stat does not carry what is needed.
func identityOf(info fs.FileInfo) (identity, bool) {
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return identity{}, false
	}
	return identity{
		dev:   uint64(st.Dev), // a uint32 on some architectures
		ino:   st.Ino,
		size:  st.Size,
		mtime: st.Mtim.Nano(),
		ctime: st.Ctim.Nano(),
	}, true
}
