//go:build unix

package flock

import (
	"os"
	"syscall"
)

// What Flock takes: an exclusive or a shared lock, without waiting, or
// the unlock.
const (
	Exclusive   = syscall.LOCK_EX
	Shared      = syscall.LOCK_SH
	NonBlocking = syscall.LOCK_NB
	Unlock      = syscall.LOCK_UN
)

// Flock is flock(2) on f, tried again when a signal interrupts it. With
// NonBlocking a lock another holds fails with EWOULDBLOCK.
func Flock(f *os.File, how int) error {
	for {
		if err := syscall.Flock(int(f.Fd()), how); err != syscall.EINTR {
			return err
		}
	}
}
