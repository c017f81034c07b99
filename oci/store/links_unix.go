//go:build unix

package store

import (
	"io/fs"
	"syscall"
)

// links returns the hard links of the file fi describes (0: unknown).
func links(fi fs.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Nlink)
	}
	return 0
}
