package store

import (
	"os"

	"golang.org/x/sys/unix"
)

// startWriteBack asks the kernel to start writing n bytes of f from off to
// disk now (sync_file_range), so that the fsync at the end of a download
// waits for the last few megabytes only. Best effort: a file system
// without it loses only speed.
func startWriteBack(f *os.File, off, n int64) {
	_ = unix.SyncFileRange(int(f.Fd()), off, n, unix.SYNC_FILE_RANGE_WRITE)
}
