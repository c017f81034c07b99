//go:build linux

package reserve

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// Take allocates the reserve when the filesystem has room for it and as
// much again besides, so that taking it back never fills the disk. It
// reports whether the reserve is held.
func (r *Reserve) Take() (bool, error) {
	if r.Held() {
		return true, nil
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(filepath.Dir(r.path), &st); err != nil {
		return false, fmt.Errorf("free space of %s: %w", filepath.Dir(r.path), err)
	}
	if int64(st.Bavail)*int64(st.Bsize) < 2*r.size {
		return false, nil
	}
	f, err := os.OpenFile(r.path, os.O_WRONLY|os.O_CREATE, 0o600)
	if err != nil {
		return false, fmt.Errorf("take disk reserve %s: %w", r.path, err)
	}
	err = allocate(f, r.size)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(r.path)
		return false, fmt.Errorf("take disk reserve %s: %w", r.path, err)
	}
	return true, nil
}

// allocate gives f size bytes of allocated blocks: fallocate, or zeros
// written where the filesystem has no fallocate.
func allocate(f *os.File, size int64) error {
	err := syscall.Fallocate(int(f.Fd()), 0, 0, size)
	if err == nil || !errors.Is(err, syscall.EOPNOTSUPP) && !errors.Is(err, syscall.ENOSYS) {
		return err
	}
	zeros := make([]byte, 64<<10)
	for off := int64(0); off < size; off += int64(len(zeros)) {
		if _, err := f.WriteAt(zeros[:min(int64(len(zeros)), size-off)], off); err != nil {
			return err
		}
	}
	return f.Sync()
}
