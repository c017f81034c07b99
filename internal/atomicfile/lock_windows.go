package atomicfile

import (
	"errors"
	"os"
	"syscall"

	"golang.org/x/sys/windows"
)

// oNoFollow is no flag on Windows: a temporary file is created with
// O_EXCL, which fails on any name already there, a link included.
const oNoFollow = 0

// lock takes an exclusive lock (LockFileEx) on one byte of f far past its
// end, so that, like flock elsewhere, it guards no content; with wait it
// waits for another writer of the same file (else fails with EWOULDBLOCK,
// as flock does). Closing f releases it.
func lock(f *os.File, wait bool) error {
	flags := uint32(windows.LOCKFILE_EXCLUSIVE_LOCK)
	if !wait {
		flags |= windows.LOCKFILE_FAIL_IMMEDIATELY
	}
	err := windows.LockFileEx(windows.Handle(f.Fd()), flags, 0, 1, 0, &windows.Overlapped{OffsetHigh: 1<<31 - 1})
	if errors.Is(err, windows.ERROR_LOCK_VIOLATION) {
		return syscall.EWOULDBLOCK
	}
	return err
}
