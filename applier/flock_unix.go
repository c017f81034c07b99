//go:build unix

package applier

import (
	"os"
	"syscall"
)

// What flock takes: an exclusive lock, without waiting, or the unlock.
const (
	lockEx = syscall.LOCK_EX
	lockNB = syscall.LOCK_NB
	lockUn = syscall.LOCK_UN
)

// flock is flock(2) on f, tried again when a signal interrupts it. With
// lockNB a lock another holds fails with EWOULDBLOCK.
func flock(f *os.File, how int) error {
	for {
		if err := syscall.Flock(int(f.Fd()), how); err != syscall.EINTR {
			return err
		}
	}
}
