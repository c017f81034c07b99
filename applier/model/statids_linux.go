package model

import (
	"io/fs"
	"syscall"
)

// statIDs returns the inode, mtime and ctime (in nanoseconds) of fi: with
// the size, the fingerprint that tells an untouched file from one that
// must be hashed again.
func statIDs(fi fs.FileInfo) (ino uint64, mtime, ctime int64) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, fi.ModTime().UnixNano(), 0
	}
	return st.Ino, st.Mtim.Nano(), st.Ctim.Nano()
}
