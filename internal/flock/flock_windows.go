package flock

import (
	"errors"
	"os"
	"syscall"

	"golang.org/x/sys/windows"
)

// What Flock takes: an exclusive or a shared lock, without waiting, or
// the unlock.
const (
	Exclusive = 1 << iota
	NonBlocking
	Unlock
	Shared
)

// Flock locks (LockFileEx) or unlocks one byte of f far past its end, so
// that, like flock(2) elsewhere, the lock guards no content: reads and
// writes of the file go on. With NonBlocking a lock another holds fails
// with EWOULDBLOCK, as flock(2) does.
func Flock(f *os.File, how int) error {
	h := windows.Handle(f.Fd())
	at := &windows.Overlapped{OffsetHigh: 1<<31 - 1}
	if how&Unlock != 0 {
		return windows.UnlockFileEx(h, 0, 1, 0, at)
	}
	flags := uint32(windows.LOCKFILE_EXCLUSIVE_LOCK)
	if how&Shared != 0 {
		flags = 0
	}
	if how&NonBlocking != 0 {
		flags |= windows.LOCKFILE_FAIL_IMMEDIATELY
	}
	err := windows.LockFileEx(h, flags, 0, 1, 0, at)
	if errors.Is(err, windows.ERROR_LOCK_VIOLATION) {
		return syscall.EWOULDBLOCK
	}
	return err
}
