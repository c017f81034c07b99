//go:build !linux

package model

import "io/fs"

// statIDs returns the mtime of fi only: off Linux, where no node runs,
// the inode and ctime are not read, and a file's size and mtime are its
// fingerprint.
func statIDs(fi fs.FileInfo) (ino uint64, mtime, ctime int64) {
	return 0, fi.ModTime().UnixNano(), 0
}
