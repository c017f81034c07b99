//go:build unix

package atomicfile

import (
	"errors"
	"os"
	"syscall"
)

// oNoFollow makes an open fail on a symlink rather than follow it.
const oNoFollow = syscall.O_NOFOLLOW

// lock takes f's flock, with wait waiting for another writer of the same
// file (else failing with EWOULDBLOCK). A file system without flock is no
// error: tend's own writes of one file are serialised by the state
// directory's lock.
func lock(f *os.File, wait bool) error {
	how := syscall.LOCK_EX
	if !wait {
		how |= syscall.LOCK_NB
	}
	for {
		err := syscall.Flock(int(f.Fd()), how)
		switch {
		case err == nil, errors.Is(err, syscall.ENOLCK), errors.Is(err, syscall.EOPNOTSUPP), errors.Is(err, syscall.ENOSYS):
			return nil
		case errors.Is(err, syscall.EINTR):
			continue
		default:
			return err
		}
	}
}
