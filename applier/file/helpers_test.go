package file

import (
	"context"
	"io/fs"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/internal/confine"
	"github.com/tend-dev/tend/internal/testkit/testfs"
	"github.com/tend-dev/tend/planner"
	"github.com/tend-dev/tend/render"
)

// testAllow is the allowed path of every test.
const testAllow = "/etc/infer"

func newDriver(t testing.TB) (*Driver, string) {
	t.Helper()
	root := t.TempDir()
	return newDriverAt(t, root, []string{testAllow}), root
}

func newDriverAt(t testing.TB, root string, allow []string) *Driver {
	t.Helper()
	tree, err := confine.New(root, allow)
	require.NoError(t, err)
	return New(tree)
}

func createAction(p string) planner.Action {
	return planner.Action{Type: planner.Create, Resource: planner.FileID(p), Kind: planner.KindFile, Reason: "declared"}
}

func deleteAction(p string) planner.Action {
	return planner.Action{Type: planner.Delete, Resource: planner.FileID(p), Kind: planner.KindFile, Reason: "no longer declared"}
}

// writeFile applies the creation of file p with content and mode (octal,
// "" for the default) as render declares it.
func writeFile(t testing.TB, d *Driver, p, content, mode string) error {
	t.Helper()
	m, err := render.ParseMode(mode)
	require.NoError(t, err)
	return d.Apply(context.Background(), createAction(p), render.File{Path: p, Content: []byte(content), Mode: m})
}

// withUmask runs the rest of the test under umask mask.
func withUmask(t *testing.T, mask int) {
	t.Helper()
	old := syscall.Umask(mask)
	t.Cleanup(func() { syscall.Umask(old) })
}

func tempFiles(t testing.TB, dir string) []string { return testfs.TempFiles(t, dir) }
func tree(t testing.TB, dir string) []string      { return testfs.Tree(t, dir) }
func perm(t testing.TB, p string) fs.FileMode     { return testfs.Perm(t, p) }
