package applier

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/manifest"
	"github.com/tend-dev/tend/planner"
)

// testAllow is the allowed path of every test.
const testAllow = "/etc/infer"

func newDriver(t testing.TB) (*FileDriver, string) {
	t.Helper()
	root := t.TempDir()
	d, err := NewFileDriver(root, []string{testAllow})
	require.NoError(t, err)
	return d, root
}

func createAction(p string) planner.Action {
	return planner.Action{Type: planner.Create, Resource: FileID(p), Kind: planner.KindFile, Reason: "declared"}
}

func deleteAction(p string) planner.Action {
	return planner.Action{Type: planner.Delete, Resource: FileID(p), Kind: planner.KindFile, Reason: "no longer declared"}
}

func writeFile(t testing.TB, d *FileDriver, p, content, mode string) error {
	t.Helper()
	return d.Apply(context.Background(), createAction(p), manifest.File{Path: p, Content: content, Mode: mode})
}

// withUmask runs the rest of the test under umask mask.
func withUmask(t *testing.T, mask int) {
	t.Helper()
	old := syscall.Umask(mask)
	t.Cleanup(func() { syscall.Umask(old) })
}

// tempFiles lists the .tend-* files left anywhere under dir.
func tempFiles(t testing.TB, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if strings.HasPrefix(e.Name(), tempPrefix) {
			out = append(out, p)
		}
		return nil
	})
	require.NoError(t, err)
	return out
}

// tree lists every path under dir, relative to it, without following
// symlinks.
func tree(t testing.TB, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != dir {
			rel, _ := filepath.Rel(dir, p)
			out = append(out, rel)
		}
		return nil
	})
	require.NoError(t, err)
	return out
}

func perm(t testing.TB, p string) fs.FileMode {
	t.Helper()
	fi, err := os.Lstat(p)
	require.NoError(t, err)
	return fi.Mode() & (fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky)
}
