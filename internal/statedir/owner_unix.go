//go:build unix

package statedir

import (
	"io/fs"
	"os"
	"syscall"
)

// sameOwner gives p the owner of orig, where it differs (tend runs as
// root on a node; elsewhere what it writes is its user's anyway).
func sameOwner(p string, orig fs.FileInfo) error {
	st, ok := orig.Sys().(*syscall.Stat_t)
	if !ok || (int(st.Uid) == os.Getuid() && int(st.Gid) == os.Getgid()) {
		return nil
	}
	return os.Lchown(p, int(st.Uid), int(st.Gid))
}
