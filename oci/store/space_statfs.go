//go:build linux || darwin

package store

import (
	"fmt"
	"syscall"
)

// FreeBytes is what dir's file system has free for an unprivileged user.
func FreeBytes(dir string) (int64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, fmt.Errorf("free space on %s: %w", dir, err)
	}
	return int64(st.Bavail) * int64(st.Bsize), nil
}
