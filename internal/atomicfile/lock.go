package atomicfile

import (
	"errors"
	"os"
	"syscall"

	"github.com/tend-dev/tend/internal/flock"
)

// lock takes f's exclusive lock, with wait waiting for another writer of
// the same file (else failing with EWOULDBLOCK). A file system without
// locks is no error: tend's own writes of one file are serialised by the
// state directory's lock. Closing f releases it.
func lock(f *os.File, wait bool) error {
	how := flock.Exclusive
	if !wait {
		how |= flock.NonBlocking
	}
	err := flock.Flock(f, how)
	if errors.Is(err, syscall.ENOLCK) || errors.Is(err, syscall.EOPNOTSUPP) || errors.Is(err, syscall.ENOSYS) {
		return nil
	}
	return err
}
