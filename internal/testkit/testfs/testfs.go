// Package testfs lists and inspects files for tests: every path under a
// folder, the temporary files tend left, a file's mode. It is test
// support, not part of tend's flow.
package testfs

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/internal/atomicfile"
)

// Tree lists every path under dir, relative to it, without following
// symlinks.
func Tree(t testing.TB, dir string) []string {
	t.Helper()
	var out []string
	walk(t, dir, func(p string, _ fs.DirEntry) {
		if p != dir {
			rel, _ := filepath.Rel(dir, p)
			out = append(out, rel)
		}
	})
	return out
}

// TempFiles lists the temporary files tend left anywhere under dir.
func TempFiles(t testing.TB, dir string) []string {
	t.Helper()
	var out []string
	walk(t, dir, func(p string, e fs.DirEntry) {
		if strings.HasPrefix(e.Name(), atomicfile.TempPrefix) {
			out = append(out, p)
		}
	})
	return out
}

// Perm returns the permission, setuid, setgid and sticky bits of p, which
// is not followed if a symlink.
func Perm(t testing.TB, p string) fs.FileMode {
	t.Helper()
	fi, err := os.Lstat(p)
	require.NoError(t, err)
	return fi.Mode() & (fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky)
}

func walk(t testing.TB, dir string, fn func(p string, e fs.DirEntry)) {
	t.Helper()
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fn(p, e)
		return nil
	})
	require.NoError(t, err)
}
