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

// lock takes an exclusive lock on f's first byte (LockFileEx), with wait
// waiting for another writer of the same file (else failing with
// EWOULDBLOCK, as flock does elsewhere). Closing f releases it.
func lock(f *os.File, wait bool) error {
	flags := uint32(windows.LOCKFILE_EXCLUSIVE_LOCK)
	if !wait {
		flags |= windows.LOCKFILE_FAIL_IMMEDIATELY
	}
	err := windows.LockFileEx(windows.Handle(f.Fd()), flags, 0, 1, 0, new(windows.Overlapped))
	if errors.Is(err, windows.ERROR_LOCK_VIOLATION) {
		return syscall.EWOULDBLOCK
	}
	return err
}
